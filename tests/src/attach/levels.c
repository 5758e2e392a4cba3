/* SPDX-License-Identifier: MIT */
/*
 * A program for `ftpad attach --depth/--time-filter` (tests/
 * test_attach_options.py), built with the GCC plugin and exit sites, not
 * linked with libftpad.  Its one working thread loops over:
 *
 *   level1 -> level2 -> level3 -> level4   (call depths 1 to 4)
 *   slow_call                              (sleeps SLOW_MS)
 *   fast_call                              (a few instructions)
 *
 * It prints "ready PID" once running, and at the end of its stdin stops
 * and prints "ok" and its own counts, after checking that each level ran
 * as often as the one above it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SLOW_MS 20

static volatile unsigned long calls[4], slow_calls, fast_calls;
static volatile int stop;

/* Each adds after its call, so that none is a tail call. */
__attribute__((noinline)) void level4(void) { calls[3]++; }
__attribute__((noinline)) void level3(void) { level4(); calls[2]++; }
__attribute__((noinline)) void level2(void) { level3(); calls[1]++; }
__attribute__((noinline)) void level1(void) { level2(); calls[0]++; }

__attribute__((noinline)) void slow_call(void)
{
	struct timespec ts = { 0, SLOW_MS * 1000000L };

	while (nanosleep(&ts, &ts))
		;
	slow_calls++;
}

__attribute__((noinline)) void fast_call(void) { fast_calls++; }

static void *read_stdin(void *arg)
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
	pthread_t reader;

	if (pthread_create(&reader, NULL, read_stdin, NULL))
		return 1;
	printf("ready %d\n", getpid());
	fflush(stdout);
	while (!stop) {
		level1();
		slow_call();
		fast_call();
	}
	pthread_join(reader, NULL);
	for (int i = 1; i < 4; i++)
		if (calls[i] != calls[0]) {
			printf("level%d ran %lu times, level1 %lu\n", i + 1, calls[i], calls[0]);
			return 1;
		}
	printf("ok levels=%lu slow=%lu fast=%lu\n", calls[0], slow_calls, fast_calls);
	return 0;
}
