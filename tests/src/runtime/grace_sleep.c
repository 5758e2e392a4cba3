/* SPDX-License-Identifier: MIT */
/*
 * grace_sleep.c - an unregister that waits for a callback sleeps, and can
 * be given a timeout.
 *
 *   grace_sleep cpu      a callback sleeps 1.5 s; the unregister made
 *                        meanwhile waits for it.  Prints the wall and CPU
 *                        time of the unregistering thread, in ms.
 *   grace_sleep timeout  ftpad_unregister_ops_timeout() while a callback
 *                        sleeps: -ETIMEDOUT, the ops still registered and
 *                        traced; also when the lock is what it waits for;
 *                        a later unregister works.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftpad.h"

__attribute__((noipa)) long g_slow(long x)
{
	return x + 11;
}

__attribute__((noipa)) long g_other(long x)
{
	return x * 2;
}

static int inside, done;
static long calls;
static __thread int sleepy;

/* Every call counts; the sleeper thread's sleeps 1.5 s. */
static void callback(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		     struct ftpad_regs *regs)
{
	struct timespec pause = { 1, 500000000 };

	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
	if (!sleepy)
		return;
	__atomic_store_n(&inside, 1, __ATOMIC_SEQ_CST);
	nanosleep(&pause, NULL);
	__atomic_store_n(&done, 1, __ATOMIC_SEQ_CST);
}

static struct ftpad_ops ops = { .func = callback }, ops2 = { .func = callback };

static void *sleeper(void *arg)
{
	(void)arg;
	sleepy = 1;
	return (void *)g_slow(1);
}

static pid_t unregisterer_tid;

static void *unregisterer(void *arg)
{
	__atomic_store_n(&unregisterer_tid, gettid(), __ATOMIC_SEQ_CST);
	return (void *)(long)ftpad_unregister_ops(arg);
}

/*
 * Until the unregisterer thread sleeps: in ftpad_unregister_ops(), waiting
 * for the sleeping callback, with the lock held.  Its state is read, not
 * guessed from a fixed pause, which a loaded machine can outlast.
 */
static void wait_unregisterer_asleep(void)
{
	struct timespec ms = { 0, 1000000 };
	char path[64], stat[512];

	for (;;) {
		pid_t tid = __atomic_load_n(&unregisterer_tid, __ATOMIC_SEQ_CST);
		FILE *f;
		char *state = NULL;

		snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
		f = tid ? fopen(path, "r") : NULL;
		if (f && fgets(stat, sizeof(stat), f))
			state = strrchr(stat, ')');
		if (f)
			fclose(f);
		if (state && state[1] == ' ' && state[2] == 'S')
			return;
		nanosleep(&ms, NULL);
	}
}

static long ms(clockid_t clock)
{
	struct timespec t;

	clock_gettime(clock, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000;
}

static void wait_inside(pthread_t *t)
{
	if (pthread_create(t, NULL, sleeper, NULL))
		_exit(2);
	while (!__atomic_load_n(&inside, __ATOMIC_SEQ_CST))
		sched_yield();
}

static int cpu(void)
{
	long wall, used;
	pthread_t t;
	int err;

	wait_inside(&t);
	wall = ms(CLOCK_MONOTONIC);
	used = ms(CLOCK_THREAD_CPUTIME_ID);
	err = ftpad_unregister_ops(&ops);
	used = ms(CLOCK_THREAD_CPUTIME_ID) - used;
	wall = ms(CLOCK_MONOTONIC) - wall;
	pthread_join(t, NULL);
	printf("unregister=%d done=%d wall_ms=%ld cpu_ms=%ld\n", err, done, wall, used);
	return 0;
}

static void show(const char *when)
{
	struct ftpad_stats st = { .sz = sizeof(st) };
	long before = calls;

	ftpad_get_stats(&st);
	g_slow(2);
	g_other(3);
	printf("%s: registered=%d,%d enabled=%lu traced=%ld\n", when,
	       !!(ops.flags & FTPAD_OPS_FL_ENABLED), !!(ops2.flags & FTPAD_OPS_FL_ENABLED),
	       st.enabled, calls - before);
}

static int timeout(void)
{
	pthread_t t, u;
	void *ret;

	wait_inside(&t);
	printf("timeout 200=%d\n", ftpad_unregister_ops_timeout(&ops, 200));
	printf("timeout 0=%d\n", ftpad_unregister_ops_timeout(&ops, 0));
	printf("done=%d\n", done);
	show("timed out");
	/* Another thread waits in ftpad_unregister_ops(&ops), holding the lock. */
	if (pthread_create(&u, NULL, unregisterer, &ops))
		return 2;
	wait_unregisterer_asleep();
	printf("lock: timeout 100=%d\n", ftpad_unregister_ops_timeout(&ops2, 100));
	pthread_join(u, &ret);
	pthread_join(t, NULL);
	printf("unregister=%ld done=%d\n", (long)ret, done);
	show("after");
	printf("timeout 1000=%d\n", ftpad_unregister_ops_timeout(&ops2, 1000));
	show("end");
	return 0;
}

int main(int argc, char **argv)
{
	int err;

	alarm(20);
	if ((err = ftpad_set_filter(&ops, "g_slow", 1)) || (err = ftpad_register_ops(&ops)) ||
	    (err = ftpad_set_filter(&ops2, "g_other", 1)) || (err = ftpad_register_ops(&ops2))) {
		printf("setup: %d\n", err);
		return 2;
	}
	if (argc > 1 && !strcmp(argv[1], "cpu"))
		return cpu();
	show("before");
	return timeout();
}
