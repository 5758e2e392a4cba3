/* SPDX-License-Identifier: MIT */
/*
 * A server-like target for `ftpad patch` (tests/attach/test_patch.py):
 * hot threads call a global and a static function in a loop and check
 * each result is the old code's or a patch's; other threads block in
 * system calls, one of them inside a padded function (blocked_in_read)
 * so that a patch of it must be refused.  Commands on stdin, one a line:
 * "expect old|new|new2|new2old|any" (what every call that starts from now on
 * must return; answered "ok"), "bad" (answers "bad N": the unexpected
 * results so far), "quit" (prints the counts; exit status 0
 * only if no call returned something unexpected).  With the argument
 * "block", the hot threads block every signal, as many servers' workers
 * do: SIGTRAP too, so the pads are written without int3.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compute.h"

#define HOT_THREADS 3

/* What the patches return: old x+1 / x*3; new x+1001 / x*3+7; new2
 * x+2001 / x*3+7 (patch2 replaces the global one only); new2old: patch2
 * alone, x+2001 / x*3. */
enum expect { ANY, OLD, NEW, NEW2, NEW2_OLD };

static volatile int expect = ANY;
static volatile int stop;
static unsigned long calls, bad;
static int block_pipe[2];

/* No pad: a patch of it is refused. */
__attribute__((noinline, no_instrument_function)) long unpadded_compute(long x)
{
	__asm__ volatile("" ::: "memory");
	return x - 1;
}

/* Blocks for ever in read(), called from here: on this thread's stack. */
__attribute__((noinline)) long blocked_in_read(long x)
{
	char c;

	if (read(block_pipe[0], &c, 1) < 0)
		return -1;
	return x;
}

static bool good(int e, long x, long g, long s)
{
	bool old_g = g == x + 1, new_g = g == x + 1001, new2_g = g == x + 2001;
	bool old_s = s == x * 3, new_s = s == x * 3 + 7;

	switch (e) {
	case OLD:
		return old_g && old_s;
	case NEW:
		return new_g && new_s;
	case NEW2:
		return new2_g && new_s;
	case NEW2_OLD:
		return new2_g && old_s;
	default:
		return (old_g || new_g || new2_g) && (old_s || new_s);
	}
}

static bool block_signals;

static void *hot(void *arg)
{
	long x = (long)(uintptr_t)arg;

	if (block_signals) {
		sigset_t all;

		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, NULL);
	}

	while (!stop) {
		int e = expect; /* read before the calls start */
		long g = global_compute(x), s = static_compute(x);

		__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
		if (!good(e, x, g, s) && __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED) < 5)
			fprintf(stderr, "bad: expect %d x %ld global %ld static %ld\n", e, x, g, s);
		x = (x + 1) & 0xffff;
	}
	return NULL;
}

static void *blocker(void *arg)
{
	(void)arg;
	blocked_in_read(1);
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	while (!stop)
		poll(NULL, 0, 50);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[HOT_THREADS + 2];
	char line[64];

	block_signals = argc > 1 && !strcmp(argv[1], "block");
	if (pipe(block_pipe))
		return 1;
	for (int i = 0; i < HOT_THREADS; i++)
		pthread_create(&t[i], NULL, hot, (void *)(uintptr_t)(i * 1000));
	pthread_create(&t[HOT_THREADS], NULL, blocker, NULL);
	pthread_create(&t[HOT_THREADS + 1], NULL, sleeper, NULL);
	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready %ld\n", unpadded_compute(1));
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "expect ", 7)) {
			expect = !strcmp(line + 7, "old\n") ? OLD : !strcmp(line + 7, "new\n") ? NEW
				 : !strcmp(line + 7, "new2\n") ? NEW2
				 : !strcmp(line + 7, "new2old\n") ? NEW2_OLD : ANY;
			printf("ok\n");
		} else if (!strcmp(line, "bad\n")) {
			printf("bad %lu\n", __atomic_load_n(&bad, __ATOMIC_RELAXED));
		} else if (!strcmp(line, "quit\n")) {
			break;
		}
	}
	stop = 1;
	for (int i = 0; i < HOT_THREADS; i++)
		pthread_join(t[i], NULL);
	printf("calls %lu bad %lu patched %ld\n", calls, bad, patched_calls);
	return bad != 0;
}
