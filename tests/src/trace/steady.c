/* SPDX-License-Identifier: MIT */
/*
 * A program that runs for a while at a steady pace, for the tests that
 * follow a recording as it is written (tests/trace/test_live.py):
 *
 *   steady SECONDS [CALLS_PER_MS]
 *   steady until PATH [CALLS_PER_MS]
 *
 * calls tick() (which calls tock()) CALLS_PER_MS times (default 10) each
 * millisecond or so, for SECONDS or until PATH exists (a test says when),
 * then prints "calls=N" (tick's calls).
 *
 *   steady burst CALLS
 *
 * calls tick() CALLS times as fast as it can: more events than a small
 * cap holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) void tock(unsigned long i)
{
	sink += i;
}

__attribute__((noinline)) void tick(unsigned long i)
{
	tock(i);
	sink ^= i;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	unsigned long calls = 0;

	if (argc == 3 && !strcmp(argv[1], "burst")) {
		unsigned long n = strtoul(argv[2], NULL, 10);

		for (; calls < n; calls++)
			tick(calls);
	} else if (argc >= 2) {
		const char *until = argc > 2 && !strcmp(argv[1], "until") ? argv[2] : NULL;
		double end = until ? 0 : now_s() + atof(argv[1]);
		unsigned long per_ms = argc > 2 + !!until ? strtoul(argv[2 + !!until], NULL, 10) : 10;

		for (unsigned long ms = 0; until ? ms % 16 || access(until, F_OK) : now_s() < end;
		     ms++) {
			for (unsigned long k = 0; k < per_ms; k++)
				tick(calls++);
			usleep(1000);
		}
	} else {
		fprintf(stderr, "usage: steady SECONDS [CALLS_PER_MS] | steady burst CALLS\n");
		return 2;
	}
	printf("calls=%lu\n", calls);
	return 0;
}
