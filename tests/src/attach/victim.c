/* SPDX-License-Identifier: MIT */
/*
 * The process tests/test_attach.py attaches to: built with the ftpad GCC
 * plugin (exit=1), not linked with libftpad.  Threads:
 * - main runs a hot loop over padded functions and counts its calls;
 * - a reader blocks in read() on a pipe a writer fills every 20 ms, and
 *   checks every read's result (no EINTR, the bytes in order);
 * - a sleeper sleeps 30 ms at a time and checks nanosleep returns 0, not
 *   early (no EINTR, no lost time);
 * - one thread blocks in read() on stdin: its end of file ends the program.
 * It prints "ready PID" once all run, and at the end "ok CALLS" and exit 0,
 * or what went wrong and exit 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
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

static void *sleeper(void *arg)
{
	(void)arg;
	while (!stop) {
		struct timespec ts = { 0, 30000000 };
		uint64_t t0 = ns_now();
		int r = nanosleep(&ts, NULL);

		if (r)
			failure("nanosleep", r);
		if (ns_now() - t0 < 30000000)
			failure("nanosleep returned early, ns", (long)(ns_now() - t0));
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

int main(void)
{
	pthread_t t[4];
	void *(*fn[4])(void *) = { writer, reader, sleeper, stdin_watch };
	unsigned long sum = 0;

	if (pipe(pipefd))
		return 1;
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, fn[i], NULL);
	printf("ready %d\n", getpid());
	fflush(stdout);
	for (int i = 0; !stop; i++)
		sum += (unsigned long)victim_work(i & 1023);
	for (int i = 0; i < 4; i++)
		if (i != 3)
			pthread_join(t[i], NULL);
	if (failed)
		return 1;
	printf("ok %lu %lu\n", calls, sum);
	return 0;
}
