/* SPDX-License-Identifier: MIT */
/*
 * Traces every function libftpad finds in this program while it calls
 * t_run() of ftpad_traced.c, and prints one line per call:
 *   event NAME ip=0x... parent=0x... arg0=N
 * then "result N", and after unregistering "after N events=0" when nothing
 * more was seen.  Built without pads, so only ftpad_traced.c has sites.
 */
#include <stdio.h>

#include "ftpad.h"

long t_run(long x);

static int events;

static void on_entry(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		     struct ftpad_regs *regs)
{
	const char *name = ftpad_lookup_name(ip);

	(void)ops;
	events++;
	printf("event %s ip=%#lx parent=%#lx arg0=%lu\n", name ? name : "?", ip, parent_ip,
	       ftpad_regs_get_argument(regs, 0));
}

static struct ftpad_ops ops = { .func = on_entry };

int main(void)
{
	struct ftpad_stats st = { .sz = sizeof(st) };
	int err = ftpad_register_ops(&ops);
	long r;

	if (err) {
		printf("register: %s\n", ftpad_strerror(err));
		return 1;
	}
	ftpad_get_stats(&st);
	printf("sites %lu enabled %lu\n", st.sites, st.enabled);
	r = t_run(5);
	printf("result %ld\n", r);
	err = ftpad_unregister_ops(&ops);
	events = 0;
	r = t_run(5);
	printf("after %ld events=%d err=%d\n", r, events, err);
	return 0;
}
