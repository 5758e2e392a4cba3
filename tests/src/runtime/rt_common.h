/* SPDX-License-Identifier: MIT */
/*
 * rt_common.h - what the aarch64 runtime test programs (rt_aarch64.c,
 * rt_pads_aarch64.c) share: a checked call, a recording callback, the
 * dumps tests/runtime/test_runtime_aarch64.py reads, and the `trace` and `bytes`
 * commands built on them.  Static functions: each
 * program gets its own copy, unpadded (the plugin pads only f_* there).
 */
#ifndef RT_COMMON_H
#define RT_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "ftpad.h"

static void check(long got, long want, const char *what)
{
	if (got != want) {
		printf("FAIL %s = %ld, want %ld\n", what, got, want);
		exit(1);
	}
}

/* What record() saw of the first 64 calls; nevents counts every call. */
static struct event {
	unsigned long ip, parent_ip, args[10];
} events[64];
static unsigned int nevents;

static void record(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		   struct ftpad_regs *regs)
{
	unsigned int i = __atomic_fetch_add(&nevents, 1, __ATOMIC_RELAXED);

	(void)ops;
	if (i >= 64)
		return;
	events[i].ip = ip;
	events[i].parent_ip = parent_ip;
	for (unsigned int a = 0; a < 10; a++)
		events[i].args[a] = ftpad_regs_get_argument(regs, a);
}

/* Each recorded event: function, ip, parent_ip and ten arguments. */
static void print_events(void)
{
	for (unsigned int i = 0; i < nevents && i < 64; i++) {
		const char *name = ftpad_lookup_name(events[i].ip);

		printf("event %s ip=%#lx parent=%#lx args=", name ? name : "?", events[i].ip,
		       events[i].parent_ip);
		for (int a = 0; a < 10; a++)
			printf("%s%ld", a ? "," : "", (long)events[i].args[a]);
		printf("\n");
	}
}

/* For each function: its ops slot and the four words from its entry, as hex. */
static void dump_pad_words(void (*const *fns)(void), size_t n, const char *phase)
{
	for (size_t i = 0; i < n; i++) {
		const unsigned int *p = (const unsigned int *)((const char *)fns[i] - 8);

		printf("pad %s %#lx", phase, (unsigned long)fns[i]);
		for (int w = 0; w < 6; w++)
			printf(" %08x", p[w]);
		printf("\n");
	}
}

/*
 * `trace`: one ops with record() on filter, every call of call_all()
 * (which returns how many traced calls it made) seen and printed, then
 * none once unregistered.
 */
static int trace_all(const char *filter, int (*call_all)(void))
{
	struct ftpad_ops ops = { .func = record };
	int n;

	check(ftpad_set_filter(&ops, filter, 1), 0, "ftpad_set_filter");
	check(ftpad_register_ops(&ops), 0, "ftpad_register_ops");
	n = call_all();
	check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	check(nevents, n, "events");
	print_events();
	nevents = 0;
	call_all();
	printf("after-unregister events=%u\n", nevents);
	return 0;
}

/* `bytes`: the pads (dump) before, while and after every site is enabled. */
static int dump_toggled(void (*dump)(const char *phase))
{
	struct ftpad_ops ops = { .func = record };

	dump("before");
	check(ftpad_register_ops(&ops), 0, "ftpad_register_ops");
	dump("enabled");
	check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	dump("after");
	return 0;
}

#endif /* RT_COMMON_H */
