/* SPDX-License-Identifier: MIT */
/*
 * LD_PRELOADed into `ftpad attach` (tests/attach/test_attach_hostile.py): the
 * instant a trace directory (a directory with an info) is handed to another
 * user by any chown call, its info is replaced by a symlink to
 * $SWAP_TARGET, as that user could do then.  A tool that changes info
 * through its path after that hands $SWAP_TARGET over instead.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void swap_info(const char *dir)
{
	const char *target = getenv("SWAP_TARGET");
	char info[PATH_MAX + 8];
	struct stat st;

	if (!target || lstat(dir, &st) || !S_ISDIR(st.st_mode))
		return;
	snprintf(info, sizeof(info), "%s/info", dir);
	if (lstat(info, &st))
		return; /* not a trace directory */
	unlink(info);
	if (!symlink(target, info))
		fprintf(stderr, "swap_at_chown: %s -> %s\n", info, target);
}

static void swap_info_fd(int fd)
{
	char link[64], dir[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, dir, sizeof(dir) - 1);
	if (n > 0) {
		dir[n] = 0;
		swap_info(dir);
	}
}

int chown(const char *path, uid_t uid, gid_t gid)
{
	int (*real)(const char *, uid_t, gid_t) = dlsym(RTLD_NEXT, "chown");
	int r = real(path, uid, gid);

	if (!r)
		swap_info(path);
	return r;
}

int fchown(int fd, uid_t uid, gid_t gid)
{
	int (*real)(int, uid_t, gid_t) = dlsym(RTLD_NEXT, "fchown");
	int r = real(fd, uid, gid);

	if (!r)
		swap_info_fd(fd);
	return r;
}

int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	int (*real)(int, const char *, uid_t, gid_t, int) = dlsym(RTLD_NEXT, "fchownat");
	int r = real(dirfd, path, uid, gid, flags);
	int fd;

	if (r)
		return r;
	if (!*path && (flags & AT_EMPTY_PATH)) {
		swap_info_fd(dirfd);
	} else if (path[0] == '/' || dirfd == AT_FDCWD) {
		swap_info(path);
	} else if ((fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)) >= 0) {
		swap_info_fd(fd);
		close(fd);
	}
	return r;
}
