/* SPDX-License-Identifier: MIT */
/*
 * dl.c - modules loaded and unloaded while an ops is registered.
 *
 *   dl LIB   register an ops on lib_*, then dlopen LIB (built with the
 *            plugin, not linked with libftpad), call it, dlclose it, load
 *            it again and call it again; print what was seen
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "ftpad.h"

static int calls;
static long last_arg;

static void on_call(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		    struct ftpad_regs *regs)
{
	(void)parent_ip, (void)ops;
	if (!strcmp(ftpad_lookup_name(ip), "lib_square"))
		calls++;
	last_arg = (long)ftpad_regs_get_argument(regs, 0);
}

static struct ftpad_ops ops = { .func = on_call };

static long (*load(const char *lib, void **handle))(long)
{
	*handle = dlopen(lib, RTLD_NOW);
	if (!*handle) {
		printf("FAIL dlopen: %s\n", dlerror());
		return NULL;
	}
	return (long (*)(long))dlsym(*handle, "lib_square");
}

static void stats(const char *when)
{
	struct ftpad_stats st = { .sz = sizeof(st) };

	ftpad_get_stats(&st);
	printf("%s: modules=%lu sites=%lu enabled=%lu\n", when, st.modules, st.sites, st.enabled);
}

int main(int argc, char **argv)
{
	void *h;
	long (*square)(long);
	unsigned long ip;
	long r;

	if (argc < 2)
		return 2;
	ftpad_set_filter(&ops, "lib_*", 1);
	ftpad_register_ops(&ops);
	stats("before");
	square = load(argv[1], &h);
	if (!square)
		return 1;
	stats("loaded");
	r = square(7);
	printf("square(7)=%ld calls=%d arg=%ld\n", r, calls, last_arg);
	ip = (unsigned long)square;
	dlclose(h);
	stats("closed");
	printf("name after dlclose: %s\n", ftpad_lookup_name(ip) ? "found" : "none");
	square = load(argv[1], &h);
	if (!square)
		return 1;
	r = square(8);
	printf("square(8)=%ld calls=%d arg=%ld\n", r, calls, last_arg);
	printf("unregister: %d\n", ftpad_unregister_ops(&ops));
	r = square(9);
	printf("square(9)=%ld calls=%d\n", r, calls);
	dlclose(h);
	stats("end");
	return 0;
}
