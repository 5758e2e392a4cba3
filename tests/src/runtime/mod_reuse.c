/* SPDX-License-Identifier: MIT */
/*
 * Writes into a module that is gone.  Usage:
 *   mod_reuse MODE libA.so libB.so [legacy]
 * A is mod_lib.c padded, B the same without pads.  MODE:
 *   other     register; dlclose(A); dlopen(B) where A was; unregister;
 *             B must still compute right
 *   callback  the same, with the dlclose and dlopen made in a callback
 *   gone      register; dlclose(A); unregister must not fault
 *   reload    register; dlclose(A); dlopen(A) again where it was;
 *             ftpad_get_stats(); A's calls must be seen again
 * legacy: dlopen and dlclose through the versions programs built against
 * glibc < 2.34 use, which libftpad.so's hooks do not catch.
 * Exit 0 and "ok", 77 if the loader put the new module elsewhere.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftpad.h"

#if defined(__x86_64__)
#define LEGACY "GLIBC_2.2.5"
#else
#define LEGACY "GLIBC_2.17"
#endif

static void *(*open_lib)(const char *, int) = dlopen;
static int (*close_lib)(void *) = dlclose;
static const char *path_b;
static void *handle_a, *handle_b;
static unsigned long calls, swaps;

__attribute__((noinline)) void trigger(void)
{
	__asm__ volatile("" ::: "memory");
}

static void swap_libraries(void)
{
	if (close_lib(handle_a))
		exit(3);
	handle_b = open_lib(path_b, RTLD_NOW);
	if (!handle_b)
		exit(4);
}

static void count(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		  struct ftpad_regs *regs)
{
	(void)parent_ip, (void)ops, (void)regs;
	__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
	if (ip == (unsigned long)trigger && !swaps++)
		swap_libraries();
}

static struct ftpad_ops ops = { .func = count };

static unsigned long base(void *handle)
{
	struct link_map *lm = NULL;

	if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) || !lm)
		exit(5);
	return lm->l_addr;
}

static int (*symbol(void *handle, const char *name))(int)
{
	int (*f)(int) = (int (*)(int))dlsym(handle, name);

	if (!f) {
		fprintf(stderr, "no %s\n", name);
		exit(6);
	}
	return f;
}

static int expected_sum(int x, int hundreds)
{
	int s = 0;

	for (int n = 100; n < 100 * (hundreds + 1); n++)
		s += x * (n + 3) + 1;
	return s;
}

static int check(int err, const char *what)
{
	if (err) {
		fprintf(stderr, "%s: %s\n", what, ftpad_strerror(err));
		exit(7);
	}
	return 0;
}

/* B where A was, or exit 77. */
static void same_place(unsigned long a)
{
	if (base(handle_b) != a) {
		printf("moved: %#lx -> %#lx\n", a, base(handle_b));
		exit(77);
	}
}

int main(int argc, char **argv)
{
	const char *mode = argv[1];
	unsigned long at, before;
	int sum;

	if (argc < 4)
		return 2;
	path_b = argv[3];
	if (argc > 4 && !strcmp(argv[4], "legacy")) {
		open_lib = (void *(*)(const char *, int))dlvsym(RTLD_DEFAULT, "dlopen", LEGACY);
		close_lib = (int (*)(void *))dlvsym(RTLD_DEFAULT, "dlclose", LEGACY);
		if (!open_lib || !close_lib)
			return 2;
	}
	handle_a = open_lib(argv[2], RTLD_NOW);
	if (!handle_a)
		return 2;
	at = base(handle_a);
	check(ftpad_set_filter(&ops, "mod_*,trigger", 1), "filter");
	check(ftpad_register_ops(&ops), "register");
	if (symbol(handle_a, "mod_call_all")(1) != expected_sum(1, 1) || calls != 101)
		return 8;
	if (!strcmp(mode, "callback")) {
		trigger();
		same_place(at);
	} else if (!strcmp(mode, "other")) {
		swap_libraries();
		same_place(at);
	} else if (!strcmp(mode, "gone")) {
		close_lib(handle_a);
	} else if (!strcmp(mode, "reload")) {
		close_lib(handle_a);
		handle_b = handle_a = open_lib(argv[2], RTLD_NOW);
		if (!handle_a)
			return 4;
		same_place(at);
		struct ftpad_stats st = { .sz = sizeof(st) };
		check(ftpad_get_stats(&st), "stats");
		before = calls;
		symbol(handle_a, "mod_call_all")(2);
		printf("calls after reload: %lu\n", calls - before);
		if (calls - before != 101)
			return 9;
	}
	check(ftpad_unregister_ops(&ops), "unregister");
	if (handle_b) {
		sum = symbol(handle_b, "mod_call_all")(3);
		if (sum != expected_sum(3, 1)) {
			printf("B computes %d, not %d\n", sum, expected_sum(3, 1));
			return 10;
		}
	}
	printf("ok\n");
	return 0;
}
