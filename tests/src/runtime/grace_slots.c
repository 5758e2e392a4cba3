/* SPDX-License-Identifier: MIT */
/*
 * grace_slots.c - claiming a thread's dispatch slot never allocates,
 * whatever the program did before, and slots do not pile up as threads
 * come and go.
 *
 * The program first makes 40 pthread keys: from index 32 on,
 * pthread_setspecific() allocates a second-level array with calloc.  It
 * defines malloc, calloc and realloc itself, on top of glibc's, and aborts
 * when they are called where they must not be.
 *
 *   grace_slots signal  each new thread's first traced call is in a
 *                       signal handler, where allocating aborts
 *   grace_slots alloc   each new thread's first traced call is made by
 *                       calloc, holding its (non-recursive) lock: calloc
 *                       entered again aborts
 *   grace_slots churn   2000 short threads, 8 at a time, each with one
 *                       traced call: the slots held stay those of the
 *                       first chunk
 *
 * Prints "calls=C slots=S".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftpad.h"

#define KEYS 40
#define THREADS 8

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);

static __thread int in_handler, in_calloc;
static int mode_alloc;
static long calls;

__attribute__((noipa)) long g_work(long x)
{
	return x ^ 0x55;
}

/* Traced; called by calloc with its lock held. */
__attribute__((noipa)) long g_note(long n)
{
	return n + 1;
}

static void die(const char *why)
{
	write(2, why, strlen(why));
	abort();
}

void *malloc(size_t n)
{
	if (in_handler)
		die("malloc in a signal handler\n");
	return __libc_malloc(n);
}

void *realloc(void *p, size_t n)
{
	if (in_handler)
		die("realloc in a signal handler\n");
	return __libc_realloc(p, n);
}

/* An allocator with a lock, which calls a traced helper while holding it. */
void *calloc(size_t n, size_t size)
{
	void *p;

	if (in_handler)
		die("calloc in a signal handler\n");
	if (in_calloc)
		die("calloc entered again while it holds its lock\n");
	in_calloc = 1;
	if (mode_alloc)
		g_note(n);
	p = __libc_calloc(n, size);
	in_calloc = 0;
	return p;
}

static void count(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		  struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
}

static struct ftpad_ops ops = { .func = count };

static void on_usr1(int sig)
{
	in_handler = 1;
	g_work(sig);
	in_handler = 0;
}

static void *first_in_handler(void *arg)
{
	(void)arg;
	pthread_kill(pthread_self(), SIGUSR1);
	return (void *)g_work(1);
}

static void *first_in_calloc(void *arg)
{
	void *volatile p; /* not a pair the compiler may drop */

	(void)arg;
	p = calloc(1, 32);
	free(p);
	return NULL;
}

static void *one_call(void *arg)
{
	return (void *)g_work((long)arg);
}

static void run_threads(void *(*fn)(void *), int rounds)
{
	pthread_t t[THREADS];

	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < THREADS; i++)
			if (pthread_create(&t[i], NULL, fn, NULL))
				die("pthread_create\n");
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
	}
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	struct ftpad_stats st = { .sz = sizeof(st) };
	struct sigaction sa = { .sa_handler = on_usr1 };
	pthread_key_t key;
	int err;

	for (int i = 0; i < KEYS; i++)
		if (pthread_key_create(&key, NULL))
			die("pthread_key_create\n");
	sigaction(SIGUSR1, &sa, NULL);
	mode_alloc = !strcmp(mode, "alloc");
	if ((err = ftpad_set_filter(&ops, mode_alloc ? "g_note" : "g_work", 1)) ||
	    (err = ftpad_register_ops(&ops))) {
		printf("setup: %d\n", err);
		return 2;
	}
	if (!strcmp(mode, "signal"))
		run_threads(first_in_handler, 4);
	else if (mode_alloc)
		run_threads(first_in_calloc, 4);
	else
		run_threads(one_call, 2000 / THREADS);
	ftpad_unregister_ops(&ops);
	ftpad_get_stats(&st);
	printf("calls=%ld slots=%lu\n", calls, st.thread_slots);
	return 0;
}
