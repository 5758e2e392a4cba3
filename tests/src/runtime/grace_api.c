/* SPDX-License-Identifier: MIT */
/*
 * grace_api.c - every ftpad_* call made from inside a callback either
 * works or returns -EDEADLK, as ftpad.h says.
 *
 *   grace_api calls      one callback makes every call and prints what
 *                        each returned
 *   grace_api stats      ftpad_get_stats() from a callback while another
 *                        thread unregisters (and so holds the lock while
 *                        it waits for that callback): it must return, not
 *                        deadlock (an alarm ends the program otherwise)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftpad.h"

__attribute__((noipa)) long g_work(long x)
{
	return x * 5 + 2;
}

static struct ftpad_ops ops, other = { .func = NULL };

static int quiet(enum ftpad_log_level level, const char *fmt, va_list ap)
{
	(void)level, (void)fmt, (void)ap;
	return 0;
}

/* What each call returns from inside the callback. */
static void every_call(unsigned long ip, struct ftpad_regs *regs)
{
	struct ftpad_stats st = { .sz = sizeof(st) };
	char buf[64];
	const char *name;
	ftpad_print_fn_t old;

	printf("register=%d\n", ftpad_register_ops(&other));
	printf("unregister=%d\n", ftpad_unregister_ops(&ops));
	printf("unregister_timeout=%d\n", ftpad_unregister_ops_timeout(&ops, 10));
	printf("set_filter=%d\n", ftpad_set_filter(&other, "g_*", 1));
	printf("set_notrace=%d\n", ftpad_set_notrace(&other, "g_*", 1));
	printf("get_stats=%d\n", ftpad_get_stats(&st));
	name = ftpad_lookup_name(ip);
	printf("lookup_name=%s\n", name ? name : "(null)");
	ftpad_lookup_symbol(ip + 1, buf, sizeof(buf));
	printf("lookup_symbol=%s\n", buf);
	printf("strerror=%s\n", ftpad_strerror(-EDEADLK) ? "ok" : "(null)");
	old = ftpad_set_print(quiet);
	printf("set_print=%s\n", ftpad_set_print(old) == quiet ? "ok" : "wrong");
	printf("recursion_trylock=%d\n", ftpad_recursion_trylock());
	ftpad_recursion_unlock();
	printf("get_argument=%lu\n", ftpad_regs_get_argument(regs, 0));
	printf("get_stack_pointer=%s\n", ftpad_regs_get_stack_pointer(regs) ? "ok" : "0");
	printf("set_ip=%d\n", ftpad_regs_set_ip(regs, ip)); /* not IPMODIFY */
	printf("get_pt_regs=%s\n", ftpad_get_pt_regs(regs) ? "set" : "(null)");
}

static int mode_stats;
static int inside, unregistering, stats_err = 1;

static void callback(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *o,
		     struct ftpad_regs *regs)
{
	struct ftpad_stats st = { .sz = sizeof(st) };
	struct timespec pause = { 0, 100000000 };

	(void)parent_ip, (void)o;
	if (!mode_stats) {
		every_call(ip, regs);
		return;
	}
	if (__atomic_exchange_n(&inside, 1, __ATOMIC_SEQ_CST))
		return;
	while (!__atomic_load_n(&unregistering, __ATOMIC_SEQ_CST))
		sched_yield();
	/* By now the other thread holds the lock and waits for us. */
	nanosleep(&pause, NULL);
	stats_err = ftpad_get_stats(&st);
}

static void *caller(void *arg)
{
	(void)arg;
	return (void *)g_work(7);
}

int main(int argc, char **argv)
{
	pthread_t t;
	int err;

	alarm(5);
	mode_stats = argc > 1 && !strcmp(argv[1], "stats");
	ops.func = callback;
	other.func = callback;
	if ((err = ftpad_set_filter(&ops, "g_work", 1)) || (err = ftpad_register_ops(&ops))) {
		printf("setup: %d\n", err);
		return 2;
	}
	if (!mode_stats) {
		printf("g_work=%ld\n", g_work(3));
		printf("outside: unregister=%d\n", ftpad_unregister_ops(&ops));
		return 0;
	}
	if (pthread_create(&t, NULL, caller, NULL))
		return 2;
	while (!__atomic_load_n(&inside, __ATOMIC_SEQ_CST))
		sched_yield();
	__atomic_store_n(&unregistering, 1, __ATOMIC_SEQ_CST);
	err = ftpad_unregister_ops(&ops);
	pthread_join(t, NULL);
	printf("unregister=%d get_stats_in_callback=%d\n", err, stats_err);
	return 0;
}
