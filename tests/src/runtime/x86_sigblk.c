/* SPDX-License-Identifier: MIT */
/*
 * x86_sigblk.c - worker threads that block every signal, as the workers
 * of many servers do (here the whole process, as with signalfd: the main
 * thread blocks them before it creates the workers, which inherit its
 * mask), call traced functions in tight loops while the main thread
 * registers and unregisters an ops on them, TOGGLES times.  Build with the
 * plugin padding work_* only.  A worker that ran into an int3 of the
 * patch protocol would be killed by the kernel (SIGTRAP), and the whole
 * process with it.
 *
 *   x86_sigblk TOGGLES [exact]
 *
 * Prints "ok registered=R refused=F calls=C": R registers returned 0, F
 * returned -EAGAIN (anything else fails); C callbacks ran.  Every call's
 * result is checked.  With exact, another ops stays registered from
 * before the workers start to after they stop, and the toggled one has
 * FTPAD_OPS_FL_SAVE_REGS, so that each toggle moves the sites from one
 * call to another (to the full save and back): the ops that stays must
 * see exactly every call ("lost=0").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ftpad.h"

#define WORKERS 2

__attribute__((noinline)) long work_add(long x)
{
	return x + 1;
}

__attribute__((noinline)) long work_mul(long x)
{
	return x * 3;
}

static long (*volatile add_fn)(long) = work_add;
static long (*volatile mul_fn)(long) = work_mul;
static volatile int stop;
static volatile int wrong;
static unsigned long calls;

static void on_call(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		    struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
}

static struct ftpad_ops ops = { .func = on_call };

static unsigned long stay_calls, made[8];

static void on_stay(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *o,
		    struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)o, (void)regs;
	__atomic_fetch_add(&stay_calls, 1, __ATOMIC_RELAXED);
}

static struct ftpad_ops stay = { .func = on_stay };

static void *worker(void *arg)
{
	long i = (long)arg, me = i / 1000000;

	while (!stop) {
		if (add_fn(i) != i + 1 || mul_fn(i) != i * 3)
			wrong = 1;
		made[me] += 2;
		i++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[WORKERS];
	long toggles = argc > 1 ? atol(argv[1]) : 0, registered = 0, refused = 0;
	bool exact = argc > 2 && !strcmp(argv[2], "exact");
	unsigned long total = 0;
	sigset_t all;

	if (toggles <= 0)
		return 2;
	if (ftpad_set_filter(&ops, "work_*", 1) || ftpad_set_filter(&stay, "work_*", 1))
		return 1;
	if (exact) {
		ops.flags = FTPAD_OPS_FL_SAVE_REGS;
		if (ftpad_register_ops(&stay))
			return 1;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (long i = 0; i < WORKERS; i++) {
		if (pthread_create(&t[i], NULL, worker, (void *)(i * 1000000)))
			return 1;
		pthread_setname_np(t[i], "blocker");
	}
	for (long n = 0; n < toggles; n++) {
		int err = ftpad_register_ops(&ops);

		if (err == -EAGAIN) {
			refused++;
			continue;
		}
		if (err) {
			printf("FAIL register: %d\n", err);
			return 1;
		}
		registered++;
		err = ftpad_unregister_ops(&ops);
		if (err) {
			printf("FAIL unregister: %d\n", err);
			return 1;
		}
	}
	stop = 1;
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	if (wrong) {
		printf("FAIL a traced function returned a wrong result\n");
		return 1;
	}
	if (exact) {
		if (ftpad_unregister_ops(&stay))
			return 1;
		for (int i = 0; i < WORKERS; i++)
			total += made[i];
		printf("lost=%ld\n", (long)(total - stay_calls));
	}
	printf("ok registered=%ld refused=%ld calls=%lu\n", registered, refused, calls);
	return 0;
}
