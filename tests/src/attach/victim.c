/* SPDX-License-Identifier: MIT */
/*
 * The process tests/attach/test_attach.py attaches to: built with the ftpad GCC
 * plugin (exit=1), not linked with libftpad.  Threads:
 * - main runs a hot loop over padded functions and counts its calls;
 * - a reader blocks in read() on a pipe a writer fills every 20 ms, and
 *   checks every read's result (no EINTR, the bytes in order);
 * - a sleeper sleeps 30 ms at a time and checks nanosleep returns 0, not
 *   early (no EINTR, no lost time);
 * - one thread blocks in read() on stdin: its end of file ends the program.
 * It prints "ready PID" once all run, and at the end "ok CALLS" and exit 0,
 * or what went wrong and exit 1.
 *
 * argv[1] chooses what the main thread does, so that ftpad attach's stub
 * runs on each kind of thread:
 * - "hot" (the default): a loop that keeps a double in an SSE register
 *   between its calls and checks it (the stub must restore the extended
 *   state);
 * - "blocked": waits in pthread_join (futex), so the stub runs on a thread
 *   blocked in read() (the restart of -ERESTARTSYS);
 * - "sleep": no thread but the main one, sleeping in nanosleep and polling
 *   stdin, so the stub runs on it (restart through restart_syscall).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop, failed;
static int pipefd[2];
static unsigned long calls;

__attribute__((noinline)) int victim_leaf(int x)
{
	calls++;
	return x * 3 + 1;
}

__attribute__((noinline)) int victim_work(int x)
{
	calls++;
	return victim_leaf(x) ^ victim_leaf(x + 1);
}

static void failure(const char *what, long got)
{
	fprintf(stderr, "victim: %s: %ld (%s)\n", what, got, got < 0 ? strerror(errno) : "");
	failed = 1;
}

static uint64_t ns_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *writer(void *arg)
{
	unsigned char n = 0;

	(void)arg;
	while (!stop) {
		if (write(pipefd[1], &n, 1) != 1)
			failure("write", -1);
		n++;
		usleep(20000);
	}
	close(pipefd[1]);
	return NULL;
}

static void *reader(void *arg)
{
	unsigned char want = 0, got;
	ssize_t r;

	(void)arg;
	while ((r = read(pipefd[0], &got, 1)) == 1) {
		if (got != want)
			failure("read: byte out of order", got);
		want = (unsigned char)(got + 1);
	}
	if (r != 0)
		failure("read", r);
	return NULL;
}

/* Sleeps 30 ms at a time until stop; arg non-NULL: once. */
static void *sleeper(void *arg)
{
	for (bool once = arg != NULL; !stop; once = false) {
		struct timespec ts = { 0, 30000000 };
		uint64_t t0 = ns_now();
		int r = nanosleep(&ts, NULL);

		if (r)
			failure("nanosleep", r);
		if (ns_now() - t0 < 30000000)
			failure("nanosleep returned early, ns", (long)(ns_now() - t0));
		if (once)
			break;
	}
	return NULL;
}

static void *stdin_watch(void *arg)
{
	char buf[64];

	(void)arg;
	while (read(0, buf, sizeof(buf)) > 0)
		;
	stop = 1;
	return NULL;
}

/* Counts in a double, in a register across the inner loop (no call in
 * it), against an integer count: a register the stub did not restore
 * shows. */
static unsigned long hot_loop(void)
{
	unsigned long sum = 0, n = 0;
	double acc = 0;

	for (int i = 0; !stop; i++) {
		for (int k = 0; k < 100000; k++) {
			acc += 1.0;
			n++;
			__asm__ volatile("" : "+x"(acc), "+r"(n));
		}
		if (acc != (double)n) {
			failure("the double's count differs from the integer's", (long)n);
			acc = (double)n;
		}
		sum += (unsigned long)victim_work(i & 1023);
	}
	return sum;
}

/* The only thread: sleeps, and sees stdin's end of file without blocking. */
static int sleep_alone(void)
{
	char c;
	ssize_t r;

	fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
	printf("ready %d\n", getpid());
	fflush(stdout);
	while ((r = read(0, &c, 1)) != 0) {
		if (r < 0 && errno != EAGAIN)
			failure("read stdin", r);
		sleeper(&calls); /* one round */
	}
	if (failed)
		return 1;
	printf("ok %lu 0\n", calls);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "hot";
	pthread_t t[4];
	void *(*fn[4])(void *) = { writer, reader, sleeper, stdin_watch };
	unsigned long sum = 0;

	if (!strcmp(mode, "sleep"))
		return sleep_alone();
	if (pipe(pipefd))
		return 1;
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, fn[i], NULL);
	printf("ready %d\n", getpid());
	fflush(stdout);
	if (!strcmp(mode, "blocked"))
		pthread_join(t[3], NULL);
	else
		sum = hot_loop();
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	if (failed)
		return 1;
	printf("ok %lu %lu\n", calls, sum);
	return 0;
}
