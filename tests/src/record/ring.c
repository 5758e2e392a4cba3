/* SPDX-License-Identifier: MIT */
/*
 * ring.c - a program that runs far longer than a --ring holds
 * (tests/trace/test_record_ring.py).  Modes:
 *   long N M      N calls of old_work() inside phase_a(), then M of
 *                 new_work() inside phase_b(); prints its counts
 *   crash N M     the same, then a SIGSEGV in crash_here()
 *   serve         ticks, a round a byte read, until stdin closes: prints
 *                 "pid=P" after its first round (on_error() for an 'e')
 *   trigger N K   N calls of tick(), on_error() at every K-th
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile long sink;

__attribute__((noinline)) void old_work(long i)
{
	sink += i;
}

__attribute__((noinline)) void new_work(long i)
{
	sink -= i;
}

__attribute__((noinline)) void phase_a(long n)
{
	for (long i = 0; i < n; i++)
		old_work(i);
}

__attribute__((noinline)) void phase_b(long m)
{
	for (long i = 0; i < m; i++)
		new_work(i);
}

__attribute__((noinline)) void crash_here(void)
{
	*(volatile int *)(sink & 0) = 1;
}

__attribute__((noinline)) void tick(long i)
{
	sink ^= i;
}

__attribute__((noinline)) void on_error(long i)
{
	sink += 2 * i;
}

static void serve(void)
{
	char c;

	/* tick between reads: the test writes a byte per round it wants.  The
	 * first round before the pid, so that a snapshot has ticks to show. */
	for (long i = 0;; i++) {
		for (int k = 0; k < 1000; k++)
			tick(i);
		if (!i) {
			printf("pid=%d\n", (int)getpid());
			fflush(stdout);
		}
		if (read(0, &c, 1) <= 0)
			break;
		if (c == 'e')
			on_error(i);
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "long") || !strcmp(mode, "crash")) {
		long n = atol(argv[2]), m = atol(argv[3]);

		phase_a(n);
		phase_b(m);
		printf("old_work=%ld new_work=%ld\n", n, m);
		fflush(stdout);
		if (!strcmp(mode, "crash"))
			crash_here();
		return 0;
	}
	if (!strcmp(mode, "serve")) {
		serve();
		return 0;
	}
	if (!strcmp(mode, "trigger")) {
		long n = atol(argv[2]), k = atol(argv[3]), errors = 0;

		for (long i = 0; i < n; i++) {
			tick(i);
			if (i % k == k - 1) {
				on_error(i);
				errors++;
			}
		}
		printf("tick=%ld on_error=%ld\n", n, errors);
		return 0;
	}
	fprintf(stderr, "usage: ring long|crash N M | serve | trigger N K\n");
	return 2;
}
