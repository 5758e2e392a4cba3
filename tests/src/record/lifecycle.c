/* SPDX-License-Identifier: MIT */
/*
 * lifecycle.c - what tests/trace/test_record_lifecycle.py records: the
 * ways a process can begin, end or change under the recorder.  It counts
 * its own calls and prints the counts.
 *   lifecycle vforkexec FILE N
 *                   mid() 3 times, a vfork child that execs /bin/true,
 *                   then FILE opened, mid() N times, "done" written to FILE
 *   lifecycle execfail ROUNDS
 *                   three threads call w0(), w1(), w2() in a loop (a short
 *                   spin between calls: tens of MB of events, not a GB)
 *                   while the main thread makes ROUNDS execv()s that fail
 *   lifecycle resethand N
 *                   a SIGSEGV handler with SA_RESETHAND that says what a
 *                   query of the action shows, then raises SIGSEGV again;
 *                   mid() N times, then a write through NULL
 *   lifecycle daemon N|forever
 *                   fork, setsid, fork: the grandchild, stdio on /dev/null,
 *                   sleeps 0.3 s and calls mid() N times (or sleeps for
 *                   60 s), while the program itself exits at once
 *   lifecycle exitgroup N
 *                   mid() N times, then a raw exit_group system call (3)
 *   lifecycle chroot DIR N
 *                   chroot(DIR), then mid() N times, then exit(0)
 *   lifecycle clonevm N
 *                   mid() 10 times, a clone(CLONE_VM) child (its parent's
 *                   TLS) that calls mid() N times, waited for, then mid()
 *                   10 times more
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long n_leaf, n_mid;

__attribute__((noinline)) int leaf(int x)
{
	__atomic_fetch_add(&n_leaf, 1, __ATOMIC_RELAXED);
	return x + 1;
}

__attribute__((noinline)) int mid(int x)
{
	n_mid++;
	return leaf(x) * 2;
}

static void mids(long n)
{
	for (long i = 0; i < n; i++)
		mid((int)i);
}

static void report(void)
{
	printf("leaf=%ld mid=%ld\n", n_leaf, n_mid);
	fflush(stdout);
}

static int vfork_exec(const char *file, long n)
{
	char *argv[] = { "true", NULL };
	pid_t pid;
	int fd, status;

	mids(3);
	pid = vfork();
	if (!pid) {
		execv("/bin/true", argv);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	mids(n);
	if (write(fd, "done\n", 5) != 5)
		return 1;
	close(fd);
	report();
	return 0;
}

/* ---- execfail ---- */

static int stop;
static long counts[3];

#define WORKER(k)                                                   \
	__attribute__((noinline)) int w##k(int x)                   \
	{                                                           \
		counts[k]++;                                        \
		return x + k;                                       \
	}                                                           \
	static void *run_w##k(void *arg)                            \
	{                                                           \
		(void)arg;                                          \
		while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) { \
			w##k(1);                                    \
			for (volatile int j = 0; j < 200; j++)      \
				;                                   \
		}                                                   \
		return NULL;                                        \
	}
WORKER(0)
WORKER(1)
WORKER(2)

static int exec_fails(long rounds)
{
	void *(*fns[3])(void *) = { run_w0, run_w1, run_w2 };
	char *argv[] = { "nothing", NULL };
	pthread_t t[3];

	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, fns[i], NULL);
	for (long i = 0; i < rounds; i++) {
		execv("/nonexistent/nothing", argv);
		nanosleep(&(struct timespec){ .tv_nsec = 300000 }, NULL);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	printf("w0=%ld w1=%ld w2=%ld\n", counts[0], counts[1], counts[2]);
	return 0;
}

/* ---- resethand ---- */

static void on_segv(int sig)
{
	struct sigaction now;
	char text[64];
	int len;

	sigaction(sig, NULL, &now);
	len = snprintf(text, sizeof(text), "dfl=%d siginfo=%d\n", now.sa_handler == SIG_DFL,
		       !!(now.sa_flags & SA_SIGINFO));
	if (write(1, text, len) != len)
		_exit(1);
	raise(sig); /* the default action's now: it ends the process */
}

static int reset_hand(long n)
{
	struct sigaction act = { .sa_handler = on_segv, .sa_flags = SA_RESETHAND };

	sigemptyset(&act.sa_mask);
	sigaction(SIGSEGV, &act, NULL);
	mids(n);
	report();
	*(volatile int *)(long)(n_mid - n) = 1; /* NULL */
	return 0;
}

/* ---- daemon ---- */

static int daemonize(const char *what)
{
	pid_t pid = fork();
	int fd;

	if (pid) {
		waitpid(pid, NULL, 0);
		return 0;
	}
	setsid();
	if (fork())
		_exit(0);
	fd = open("/dev/null", O_RDWR);
	dup2(fd, 0), dup2(fd, 1), dup2(fd, 2);
	if (!strcmp(what, "forever")) {
		sleep(60);
		exit(0);
	}
	nanosleep(&(struct timespec){ .tv_nsec = 300000000 }, NULL);
	mids(atol(what));
	exit(0);
}

/* ---- clonevm ---- */

static int in_clone(void *arg)
{
	mids((long)arg);
	return 0;
}

static int clone_vm(long n)
{
	size_t size = 1 << 20;
	char *stack = malloc(size);
	pid_t pid;

	mids(10);
	pid = clone(in_clone, stack + size, CLONE_VM | SIGCHLD, (void *)n);
	waitpid(pid, NULL, 0);
	mids(10);
	report();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	if (!strcmp(argv[1], "vforkexec") && argc > 3)
		return vfork_exec(argv[2], atol(argv[3]));
	if (!strcmp(argv[1], "execfail"))
		return exec_fails(atol(argv[2]));
	if (!strcmp(argv[1], "resethand"))
		return reset_hand(atol(argv[2]));
	if (!strcmp(argv[1], "daemon"))
		return daemonize(argv[2]);
	if (!strcmp(argv[1], "exitgroup")) {
		mids(atol(argv[2]));
		report();
		syscall(SYS_exit_group, 3);
	}
	if (!strcmp(argv[1], "chroot") && argc > 3) {
		if (chroot(argv[2]) || chdir("/"))
			return 1;
		mids(atol(argv[3]));
		report();
		return 0;
	}
	if (!strcmp(argv[1], "clonevm"))
		return clone_vm(atol(argv[2]));
	return 2;
}
