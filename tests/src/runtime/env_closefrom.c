/* SPDX-License-Identifier: MIT */
/*
 * env_closefrom.c - a program that closes every descriptor above 2, as
 * daemons do, then opens files of its own: libftpad's descriptors
 * (/proc/self/mem, FTPAD_OUTPUT) must never write into them.
 *
 *   env_closefrom register -     register (/proc/self/mem opened), unregister,
 *                                closefrom(3), make a file (memfd) with one
 *                                line in it, register again: prints the
 *                                calls seen and the file's size and data
 *   env_closefrom fork FILE      register, then in a forked child:
 *                                closefrom(3), open FILE as the child's log,
 *                                unregister and register, write a line to
 *                                the log; prints what the child saw
 *   env_closefrom trace FILE     run under FTPAD_FILTER=traced and
 *                                FTPAD_OUTPUT: closefrom(3), open FILE with
 *                                one line in it, call traced
 * The program's file must hold exactly its line afterwards.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env_common.h"


static struct ftpad_ops ops = { .func = on_call };

/* What a daemon does at start, then a file of its own with one line. */
static int close_all_and_open(const char *path, const char *line)
{
	int fd;

	closefrom(3);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, line, strlen(line)) != (ssize_t)strlen(line))
		return -1;
	return fd;
}

static int check(const char *what, int err)
{
	if (err)
		printf("FAIL %s: %s\n", what, ftpad_strerror(err));
	return err;
}

/* The file in memory: a disk's file system may refuse a write at the
 * offset of a code address (ext4: EFBIG), shmem takes it. */
static int registered_again(void)
{
	char buf[64] = "";
	struct stat st;
	int fd;

	if (check("register", ftpad_register_ops(&ops)) ||
	    check("unregister", ftpad_unregister_ops(&ops)))
		return 1;
	closefrom(3);
	fd = memfd_create("user", MFD_CLOEXEC);
	if (fd < 0 || write(fd, "user data\n", 10) != 10)
		return 2;
	if (check("register", ftpad_register_ops(&ops)))
		return 1;
	sink = traced(1);
	if (fstat(fd, &st) < 0 || pread(fd, buf, sizeof(buf) - 1, 0) < 0)
		return 2;
	printf("calls=%d size=%lld data=%s", calls, (long long)st.st_size, buf);
	return 0;
}

static int forked(const char *path)
{
	int status, fd;
	pid_t pid;

	if (check("register", ftpad_register_ops(&ops)))
		return 1;
	pid = fork();
	if (pid == 0) {
		fd = close_all_and_open(path, "");
		if (fd < 0 || check("unregister", ftpad_unregister_ops(&ops)) ||
		    check("register", ftpad_register_ops(&ops)))
			_exit(1);
		sink = traced(1);
		dprintf(fd, "child log: calls=%d\n", calls);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 2;
	printf("child status=%#x\n", status);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3 || ftpad_set_filter(&ops, "traced", 1))
		return 2;
	if (!strcmp(argv[1], "register"))
		return registered_again();
	if (!strcmp(argv[1], "fork"))
		return forked(argv[2]);
	if (close_all_and_open(argv[2], "user data\n") < 0)
		return 2;
	sink = traced(1);
	return 0;
}
