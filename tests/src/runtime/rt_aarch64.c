/* SPDX-License-Identifier: MIT */
/*
 * rt_aarch64.c - libftpad on aarch64, run under qemu-aarch64.  Compiled with
 * the aarch64 plugin (only the f_* functions are padded: include=f_*) and
 * linked with the aarch64 libftpad.  tests/runtime/test_runtime_aarch64.py checks
 * what it prints against the ELF file.
 *
 *   rt_aarch64 trace     an ops on f_*: prints ip, parent_ip and arguments
 *   rt_aarch64 clobber   a callback destroys every call-clobbered register
 *                        while the f_* results must stay right
 *   rt_aarch64 bytes     pad words before, while and after enabling
 *   rt_aarch64 redirect  a callback sends f_add to f_sub and rewrites
 *                        arguments of f_ten, in x0 and on the stack
 *   rt_aarch64 backtrace the return addresses a callback's backtrace()
 *                        sees, through the trampoline's CFI
 *   rt_aarch64 dlopen LIB  traces lib_add in the dlopened LIB, through
 *                        the library's own stub page
 *   rt_aarch64 calls     only calls the f_* functions (for the built-in tracer)
 *   rt_aarch64 toggle N  enable and disable N times, the code already run
 *                        (translated, under qemu) both ways: exact counts
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftpad.h"
#include "rt_common.h"

/* noipa: callers assume nothing, so no call is merged or dropped. */
#define NOINLINE __attribute__((noipa))

struct big {
	long v[6]; /* over 16 bytes: returned through the address in x8 */
};

NOINLINE long f_add(long a, long b)
{
	return a + b;
}

NOINLINE long f_sub(long a, long b)
{
	return a - b;
}

NOINLINE double f_fma(double a, double b, float c)
{
	return a * b + c;
}

NOINLINE struct big f_big(long x)
{
	struct big r;

	for (int i = 0; i < 6; i++)
		r.v[i] = x * (i + 1);
	return r;
}

/* Ten arguments: the last two are passed on the stack. */
NOINLINE long f_ten(long a0, long a1, long a2, long a3, long a4, long a5, long a6, long a7,
		    long a8, long a9)
{
	return a0 + 2 * a1 + 3 * a2 + 4 * a3 + 5 * a4 + 6 * a5 + 7 * a6 + 8 * a7 + 9 * a8 +
	       10 * a9;
}

/* A GNU C nested function: its static chain arrives in x18. */
NOINLINE long f_outer(long x)
{
	long base = x * 100;
	NOINLINE long f_nested(long y)
	{
		return base + y;
	}
	long (*volatile fn)(long) = f_nested;

	return fn(7);
}

NOINLINE long f_caller(long x)
{
	return f_add(x, 1) + 1;
}

/* Every f_* call, each result checked; returns how many padded calls. */
static int call_all(void)
{
	struct big b;

	check(f_add(2, 3), 5, "f_add");
	check((long)(f_fma(1.5, 4.0, 0.25f) * 100), 625, "f_fma");
	b = f_big(3);
	for (int i = 0; i < 6; i++)
		check(b.v[i], 3 * (i + 1), "f_big");
	check(f_ten(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 385, "f_ten");
	check(f_outer(4), 407, "f_outer");
	check(f_caller(10), 12, "f_caller");
	return 8; /* f_outer calls f_nested, f_caller calls f_add */
}

static int clobbered;

/* Destroys x0-x18 and q0-q31: what a callback is allowed to do, and more. */
static void clobber(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *o,
		    struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)o, (void)regs;
	clobbered++;
	__asm__ volatile(
		"mov x0, #-1\n\tmov x1, x0\n\tmov x2, x0\n\tmov x3, x0\n\tmov x4, x0\n\t"
		"mov x5, x0\n\tmov x6, x0\n\tmov x7, x0\n\tmov x8, x0\n\tmov x9, x0\n\t"
		"mov x10, x0\n\tmov x11, x0\n\tmov x12, x0\n\tmov x13, x0\n\tmov x14, x0\n\t"
		"mov x15, x0\n\tmov x16, x0\n\tmov x17, x0\n\tmov x18, x0\n\t"
		"movi v0.2d, #-1\n\tmovi v1.2d, #-1\n\tmovi v2.2d, #-1\n\tmovi v3.2d, #-1\n\t"
		"movi v4.2d, #-1\n\tmovi v5.2d, #-1\n\tmovi v6.2d, #-1\n\tmovi v7.2d, #-1\n\t"
		"movi v8.2d, #-1\n\tmovi v9.2d, #-1\n\tmovi v10.2d, #-1\n\tmovi v11.2d, #-1\n\t"
		"movi v12.2d, #-1\n\tmovi v13.2d, #-1\n\tmovi v14.2d, #-1\n\tmovi v15.2d, #-1\n\t"
		"movi v16.2d, #-1\n\tmovi v17.2d, #-1\n\tmovi v18.2d, #-1\n\tmovi v19.2d, #-1\n\t"
		"movi v20.2d, #-1\n\tmovi v21.2d, #-1\n\tmovi v22.2d, #-1\n\tmovi v23.2d, #-1\n\t"
		"movi v24.2d, #-1\n\tmovi v25.2d, #-1\n\tmovi v26.2d, #-1\n\tmovi v27.2d, #-1\n\t"
		"movi v28.2d, #-1\n\tmovi v29.2d, #-1\n\tmovi v30.2d, #-1\n\tmovi v31.2d, #-1"
		::: "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11",
		"x12", "x13", "x14", "x15", "x16", "x17", "x18",
		"v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11",
		"v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19", "v20", "v21", "v22",
		"v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31", "memory");
}

static int cmd_clobber(void)
{
	struct ftpad_ops ops = { .func = clobber };
	int n;

	check(ftpad_set_filter(&ops, "f_*", 1), 0, "ftpad_set_filter");
	check(ftpad_register_ops(&ops), 0, "ftpad_register_ops");
	n = call_all();
	check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	check(clobbered, n, "callbacks");
	printf("clobber ok %d\n", clobbered);
	return 0;
}

static void (*const pads[])(void) = {
	(void (*)(void))f_add, (void (*)(void))f_fma, (void (*)(void))f_ten,
};

static void dump_pads(const char *phase)
{
	dump_pad_words(pads, sizeof(pads) / sizeof(pads[0]), phase);
}

static int cmd_toggle(int rounds)
{
	struct ftpad_ops ops = { .func = record };
	int n = 0;

	check(ftpad_set_filter(&ops, "f_*", 1), 0, "ftpad_set_filter");
	for (int i = 0; i < 3; i++)
		call_all();
	for (int i = 0; i < rounds; i++) {
		nevents = 0;
		check(ftpad_register_ops(&ops), 0, "ftpad_register_ops");
		for (int k = 0; k < 3; k++)
			n = call_all();
		check(nevents, 3 * n, "events while enabled");
		check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
		nevents = 0;
		for (int k = 0; k < 3; k++)
			call_all();
		check(nevents, 0, "events while disabled");
	}
	printf("toggle ok %d\n", rounds);
	return 0;
}

static void *frames[32];
static int nframes;

static void unwind(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *o,
		   struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)o, (void)regs;
	nframes = backtrace(frames, 32);
}

static int cmd_backtrace(void)
{
	struct ftpad_ops ops = { .func = unwind };

	check(ftpad_set_filter(&ops, "f_add", 1), 0, "ftpad_set_filter");
	check(ftpad_register_ops(&ops), 0, "ftpad_register_ops");
	check(f_caller(10), 12, "f_caller");
	check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	for (int i = 0; i < nframes; i++)
		printf("frame %#lx\n", (unsigned long)frames[i]);
	return 0;
}

int main(int argc, char **argv);

static int cmd_dlopen(const char *path)
{
	struct ftpad_ops ops = { .func = record };
	void *lib;
	long (*lib_add)(long, long);
	const char *name;

	lib = dlopen(path, RTLD_NOW);
	if (!lib) {
		printf("FAIL dlopen: %s\n", dlerror());
		return 1;
	}
	lib_add = (long (*)(long, long))dlsym(lib, "lib_add");
	check(ftpad_set_filter(&ops, "lib_*", 1), 0, "ftpad_set_filter");
	check(ftpad_register_ops(&ops), 0, "ftpad_register_ops");
	check(lib_add(20, 22), 42, "lib_add");
	check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	check(nevents, 1, "events");
	name = ftpad_lookup_name(events[0].ip);
	check(events[0].ip == (unsigned long)lib_add, 1, "ip is lib_add");
	check(events[0].args[0] == 20 && events[0].args[1] == 22, 1, "arguments");
	printf("dlopen ok %s lib=%#lx main=%#lx parent=%#lx\n", name ? name : "?",
	       (unsigned long)lib_add, (unsigned long)main, events[0].parent_ip);
	return 0;
}

static int stack_ok;

static void redirect(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *o,
		     struct ftpad_regs *regs)
{
	(void)parent_ip, (void)o;
	if (ip == (unsigned long)f_add) {
		check(ftpad_regs_set_ip(regs, (unsigned long)f_sub), 0, "ftpad_regs_set_ip");
	} else if (ip == (unsigned long)f_ten) {
		/* The 9th argument is the first word on the stack at the entry. */
		stack_ok = *(long *)ftpad_regs_get_stack_pointer(regs) == 9;
		ftpad_regs_set_argument(regs, 0, 100);
		ftpad_regs_set_argument(regs, 9, 0);
	}
}

static int cmd_redirect(void)
{
	struct ftpad_ops ops = { .func = redirect, .flags = FTPAD_OPS_FL_IPMODIFY };

	check(ftpad_set_filter(&ops, "f_add,f_ten", 1), 0, "ftpad_set_filter");
	check(ftpad_register_ops(&ops), 0, "ftpad_register_ops");
	check(f_add(5, 3), 2, "f_add redirected to f_sub");
	check(f_caller(10), 10, "f_caller through the redirect");
	check(f_ten(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 384, "f_ten with new arguments");
	check(stack_ok, 1, "stack pointer");
	check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	/* Other arguments: GCC knows f_add is pure and would reuse its result. */
	check(f_add(6, 3), 9, "f_add after unregistering");
	check(f_ten(1, 2, 3, 4, 5, 6, 7, 8, 9, 11), 395, "f_ten after unregistering");
	printf("redirect ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "dlopen"))
		return cmd_dlopen(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "backtrace"))
		return cmd_backtrace();
	if (argc == 2 && !strcmp(argv[1], "redirect"))
		return cmd_redirect();
	if (argc == 2 && !strcmp(argv[1], "calls"))
		return printf("calls ok %d\n", call_all()) < 0;
	if (argc == 3 && !strcmp(argv[1], "toggle"))
		return cmd_toggle(atoi(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "trace"))
		return trace_all("f_*", call_all);
	if (argc == 2 && !strcmp(argv[1], "clobber"))
		return cmd_clobber();
	if (argc == 2 && !strcmp(argv[1], "bytes"))
		return dump_toggled(dump_pads);
	fprintf(stderr, "usage: rt_aarch64 trace | clobber | bytes | backtrace | dlopen LIB | redirect | calls | toggle N\n");
	return 2;
}
