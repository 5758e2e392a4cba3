/* SPDX-License-Identifier: MIT */
/*
 * signals.c - a tight loop of traced calls under a 50 us interval timer
 * whose handler makes traced calls too, so that handlers land at every
 * point of the fast recording path, between a slot's reservation and its
 * write included.  Prints its own counts, for an exact account of every
 * event: written, or dropped and counted.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static volatile unsigned long handled, inner;

__attribute__((noinline)) long in_handler(long x)
{
	inner++;
	return x * 3;
}

__attribute__((noinline)) void on_alarm(int sig)
{
	handled++;
	in_handler(sig);
	in_handler(sig + 1);
}

__attribute__((noinline)) long work(long x)
{
	return x * 7 + 1;
}

long (*volatile p_work)(long) = work;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, s = 0;
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval every = { { 0, 50 }, { 0, 50 } }, off = { 0 };

	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &every, NULL);
	for (long i = 0; i < n; i++)
		s += p_work(i);
	setitimer(ITIMER_REAL, &off, NULL);
	printf("work=%ld handled=%lu inner=%lu sum=%ld\n", n, handled, inner, s);
	return 0;
}
