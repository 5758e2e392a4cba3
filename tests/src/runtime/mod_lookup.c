/* SPDX-License-Identifier: MIT */
/*
 * Lookups read the tables.  Usage:
 *   mod_lookup lookup lib.so   ftpad_lookup_name() as the very first call,
 *                              for the program's function, then for one of
 *                              a library loaded afterwards
 *   mod_lookup stats lib.so    register, then dlopen: ftpad_get_stats()
 *                              must patch the new library's sites
 * Exit 0 and "ok".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "ftpad.h"

static unsigned long calls;

__attribute__((noinline)) int traced_here(int x)
{
	return x + 1;
}

static void count(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		  struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
}

static struct ftpad_ops ops = { .func = count };

static int lookups(const char *lib)
{
	const char *name = ftpad_lookup_name((unsigned long)traced_here);
	void *h;

	printf("program: %s\n", name ? name : "(null)");
	if (!name || strcmp(name, "traced_here"))
		return 1;
	h = dlopen(lib, RTLD_NOW);
	if (!h)
		return 2;
	name = ftpad_lookup_name((unsigned long)dlsym(h, "mod_f150"));
	printf("library: %s\n", name ? name : "(null)");
	return !name || strcmp(name, "mod_f150");
}

static int stats(const char *lib)
{
	struct ftpad_stats st = { .sz = sizeof(st) };
	int (*all)(int);
	unsigned long before;
	void *h;

	if (ftpad_register_ops(&ops))
		return 1;
	for (int round = 0; round < 2; round++) {
		h = dlopen(lib, RTLD_NOW);
		all = h ? (int (*)(int))dlsym(h, "mod_call_all") : NULL;
		if (!all || ftpad_get_stats(&st))
			return 2;
		before = calls;
		all(1);
		printf("round %d: %lu calls, %lu sites enabled\n", round, calls - before,
		       st.enabled);
		if (calls - before != 101)
			return 3;
		dlclose(h);
	}
	return ftpad_unregister_ops(&ops);
}

int main(int argc, char **argv)
{
	int err;

	if (argc < 3)
		return 2;
	err = !strcmp(argv[1], "lookup") ? lookups(argv[2]) : stats(argv[2]);
	if (!err)
		printf("ok\n");
	return err;
}
