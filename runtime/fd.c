/* SPDX-License-Identifier: MIT */
/*
 * fd.c - the descriptors libftpad keeps open (/proc/self/mem, the tracer's
 * FTPAD_OUTPUT), checked to still be ours before each use.
 *
 * A program owns its descriptor numbers: a daemon closes every one above 2
 * (closefrom), then opens files of its own, which take the lowest numbers
 * free, ours among them.  So a number alone says nothing; the file does.
 * Each descriptor is known by the device and inode it had when opened, and
 * fstat() before each write says whether the number still holds that file
 * (a fstat costs a fraction of a write to /proc/self/mem or to a file).
 * What holds against a thread of the program that closes our number and
 * opens another file on it between the check and the write: the number is
 * moved high at open, so that an open(), which takes the lowest number
 * free, gets it only in a program that holds that many; a deliberate dup2()
 * onto it in that window is not caught.  A descriptor that is no longer
 * ours is never closed: the number is the program's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* Half the limit of descriptors, at most 1024 (the kernel's table grows
 * to the highest number used): out of reach of a program's opens unless
 * it holds that many. */
static int high_floor(void)
{
	struct rlimit lim;

	if (getrlimit(RLIMIT_NOFILE, &lim) < 0 || lim.rlim_cur / 2 > 1024)
		return 1024;
	return lim.rlim_cur / 2 > 3 ? (int)(lim.rlim_cur / 2) : 3;
}

/* fd moved to a high number; fd itself if that cannot be done. */
static int move_high(int fd)
{
	int high = fcntl(fd, F_DUPFD_CLOEXEC, high_floor());

	if (high < 0)
		return fd;
	close(fd);
	return high;
}

int ftpad_own_fd_open(struct ftpad_own_fd *o, const char *path, int flags, mode_t mode,
		      bool same_file)
{
	return ftpad_own_fd_openat(o, AT_FDCWD, path, flags, mode, same_file);
}

int ftpad_own_fd_openat(struct ftpad_own_fd *o, int dir, const char *path, int flags,
			mode_t mode, bool same_file)
{
	int fd = openat(dir, path, flags | O_CLOEXEC, mode), err;
	struct stat st;

	if (fd < 0)
		return -errno;
	fd = move_high(fd);
	if (fstat(fd, &st) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	if (same_file && (st.st_dev != o->dev || st.st_ino != o->ino)) {
		close(fd);
		return -ESTALE;
	}
	o->dev = st.st_dev;
	o->ino = st.st_ino;
	return fd;
}

bool ftpad_own_fd_valid(const struct ftpad_own_fd *o, int fd)
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == o->dev && st.st_ino == o->ino;
}
