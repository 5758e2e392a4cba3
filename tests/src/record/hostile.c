/* SPDX-License-Identifier: MIT */
/*
 * hostile.c - programs that treat their descriptors, limits, disk and pids
 * as theirs alone, for tests/trace/test_record_hostile.py.  Each calls
 * work() a known number of times and says how many on stdout:
 *
 *   hostile daemon N       N calls, every descriptor above 2 closed (as a
 *                          daemon does), two files opened, N calls more
 *                          while it writes to them, N more; checks that its
 *                          files hold what it wrote
 *   hostile threads N K    N short threads, one after the other, each
 *                          calling work() K times and opening a file
 *   hostile fsize N        RLIMIT_FSIZE set to 8 KiB, then N calls (a trace
 *                          compresses them to 0.03-0.2 bytes each)
 *   hostile calls N        N calls
 *   hostile reuse-pid N    two children, one after the other, with the
 *                          same pid (ns_last_pid; pid 1 of a pid namespace
 *                          runs it), each making N calls
 *   hostile reuse-tid N    two threads with the same tid, likewise
 *
 * Exit 0 when all went as without tracing; 2 when the kernel would not
 * give a pid back (the test skips); 3 when a file did not hold what the
 * program wrote into it.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static long calls;

__attribute__((noinline)) void work(void)
{
	calls++;
	__asm__ volatile("" ::: "memory");
}

static void work_n(long n)
{
	for (long i = 0; i < n; i++)
		work();
}

static int holds(int fd, const char *text)
{
	char buf[64] = "";
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	return n == (ssize_t)strlen(text) && !memcmp(buf, text, n);
}

static int daemon_like(long n)
{
	int a, b;

	work_n(n);
	usleep(200000); /* the recorder's files are open by now */
	for (int fd = 3; fd < 65536; fd++)
		close(fd);
	a = open("first.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	b = open("second.txt", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (a < 0 || b < 0)
		return perror("open"), 1;
	work_n(n);
	if (write(a, "first\n", 6) != 6 || write(b, "second\n", 7) != 7)
		return 1;
	usleep(200000);
	work_n(n);
	usleep(200000);
	if (!holds(a, "first\n") || !holds(b, "second\n")) {
		printf("a file holds more than was written\n");
		return 3;
	}
	return 0;
}

static long per_thread;

static void *short_thread(void *arg)
{
	(void)arg;
	work_n(per_thread);
	return NULL;
}

static int many_threads(long n, long k)
{
	long made = 0;

	per_thread = k;
	for (long i = 0; i < n; i++) {
		pthread_t t;
		int fd = open("/dev/null", O_RDONLY);

		if (fd < 0)
			return perror("open"), 1;
		close(fd);
		if (pthread_create(&t, NULL, short_thread, NULL))
			return perror("pthread_create"), 1;
		pthread_join(t, NULL);
		made++;
	}
	calls = made * k;
	return 0;
}

static int limited_files(long n)
{
	struct rlimit lim = { 8 << 10, 8 << 10 };
	int fd;

	if (setrlimit(RLIMIT_FSIZE, &lim))
		return perror("setrlimit"), 1;
	fd = open("own.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "own\n", 4) != 4)
		return 1;
	close(fd);
	work_n(n);
	return 0;
}

/* The next pid (or tid) the kernel gives is pid: ns_last_pid. */
static int give_back(pid_t pid)
{
	FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");

	if (!f)
		return -1;
	fprintf(f, "%d", pid - 1);
	return fclose(f);
}

static pid_t child(long n)
{
	pid_t pid = fork();

	if (!pid) {
		work_n(n);
		exit(0);
	}
	waitpid(pid, NULL, 0);
	return pid;
}

static int reused_pid(long n)
{
	pid_t first = child(n), second;

	if (give_back(first))
		return 2;
	second = child(n);
	if (second != first)
		return 2;
	calls = 2 * n;
	return 0;
}

static pid_t thread_tid;

static void *tid_thread(void *arg)
{
	thread_tid = gettid();
	work_n(*(long *)arg);
	return NULL;
}

static int reused_tid(long n)
{
	pthread_t t;
	pid_t first;

	pthread_create(&t, NULL, tid_thread, &n);
	pthread_join(t, NULL);
	first = thread_tid;
	usleep(100000); /* the first thread's file is written by now */
	if (give_back(first))
		return 2;
	pthread_create(&t, NULL, tid_thread, &n);
	pthread_join(t, NULL);
	if (thread_tid != first)
		return 2;
	calls = 2 * n;
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 2 ? argv[1] : "";
	long n = argc > 2 ? atol(argv[2]) : 0;
	int rc = 1;

	if (!strcmp(mode, "daemon"))
		rc = daemon_like(n);
	else if (!strcmp(mode, "threads") && argc > 3)
		rc = many_threads(n, atol(argv[3]));
	else if (!strcmp(mode, "fsize"))
		rc = limited_files(n);
	else if (!strcmp(mode, "calls"))
		work_n(n), rc = 0;
	else if (!strcmp(mode, "reuse-pid"))
		rc = reused_pid(n);
	else if (!strcmp(mode, "reuse-tid"))
		rc = reused_tid(n);
	printf("calls=%ld\n", calls);
	return rc;
}
