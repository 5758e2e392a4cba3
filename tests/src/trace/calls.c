/* SPDX-License-Identifier: MIT */
/*
 * calls.c - a call tree with some weight for tests/trace/test_pprof.py:
 * main > work (N times) > spin and fib (a recursion), and a second thread
 * running work too, so that the profile folds paths over threads and
 * counts a recursion's time once.
 */
#include <pthread.h>
#include <stdlib.h>

static volatile unsigned sink;

__attribute__((noinline, noclone)) void spin(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		sink += i;
}

__attribute__((noinline, noclone)) unsigned fib(unsigned n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noinline, noclone)) void work(unsigned n)
{
	spin(200 * n);
	sink += fib(n % 8 + 4);
}

static void *thread_main(void *arg)
{
	for (unsigned i = 0; i < 50; i++)
		work(i);
	return arg;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 100;
	pthread_t t;

	if (pthread_create(&t, NULL, thread_main, NULL))
		return 1;
	for (unsigned i = 0; i < n; i++)
		work(i);
	pthread_join(t, NULL);
	return 0;
}
