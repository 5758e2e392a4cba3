/* SPDX-License-Identifier: MIT */
/*
 * api.c - the calls a callback makes on regs, notrace lists and the
 * IPMODIFY rules, on functions compiled with the GCC plugin.  Prints one
 * line per check; tests/test_runtime_api.py compares them.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "ftpad.h"

__attribute__((noipa)) long f(long a, long b)
{
	return a - b;
}

__attribute__((noipa)) long g(long a, long b)
{
	return a * b;
}

__attribute__((noipa)) long h(long a, long b, long c, long d, long e, long f6, long s7)
{
	return a + b + c + d + e + f6 + s7;
}

static char seen[64];

static void note(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		 struct ftpad_regs *regs)
{
	const char *name = ftpad_lookup_name(ip);

	(void)parent_ip, (void)ops, (void)regs;
	strncat(seen, name ? name : "?", sizeof(seen) - strlen(seen) - 2);
	strcat(seen, " ");
}

/* Changes the 2nd argument of f and the 7th (on the stack) of h. */
static void change_args(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
			struct ftpad_regs *regs)
{
	unsigned long sp = ftpad_regs_get_stack_pointer(regs);

	(void)ops;
	/* At the entry the stack pointer points at the return address. */
	if (*(unsigned long *)sp != parent_ip)
		printf("FAIL sp %#lx holds %#lx, not parent_ip %#lx\n", sp,
		       *(unsigned long *)sp, parent_ip);
	if (ip == (unsigned long)f)
		ftpad_regs_set_argument(regs, 1, 1);
	else
		ftpad_regs_set_argument(regs, 6, 1000);
}

static int set_ip_result;

static void to_g(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		 struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops;
	set_ip_result = ftpad_regs_set_ip(regs, (unsigned long)g);
}

static int nested_result;

static void registers_inside(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
			     struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)regs;
	nested_result = ftpad_unregister_ops(ops);
}

static int recursing_calls;

/* Calls the function it traces: the guard must keep it from recursing. */
static void calls_f(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		    struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	if (++recursing_calls < 100)
		f(2, 2);
}

static void must(int err, const char *what)
{
	if (err)
		printf("FAIL %s: %s\n", what, ftpad_strerror(err));
}

static void notrace(void)
{
	struct ftpad_ops ops = { .func = note };

	must(ftpad_set_filter(&ops, "f,g,h", 1), "filter");
	must(ftpad_set_notrace(&ops, "g", 1), "notrace");
	must(ftpad_register_ops(&ops), "register");
	f(1, 2), g(1, 2), h(1, 2, 3, 4, 5, 6, 7);
	/* Changing the notrace list of a registered ops re-patches. */
	must(ftpad_set_notrace(&ops, "f", 0), "notrace add");
	f(1, 2), g(1, 2);
	must(ftpad_unregister_ops(&ops), "unregister");
	printf("notrace: %s\n", seen);
}

static void arguments(void)
{
	struct ftpad_ops ops = { .func = change_args };

	must(ftpad_set_filter(&ops, "f,h", 1), "filter");
	must(ftpad_register_ops(&ops), "register");
	long r = f(10, 3);

	printf("set_argument: f(10, 3)=%ld h(1..7)=%ld\n", r, h(1, 2, 3, 4, 5, 6, 7));
	must(ftpad_unregister_ops(&ops), "unregister");
	printf("restored: f(10, 3)=%ld h(1..7)=%ld\n", f(10, 3), h(1, 2, 3, 4, 5, 6, 7));
}

static void redirect(void)
{
	struct ftpad_ops patch = { .func = to_g, .flags = FTPAD_OPS_FL_IPMODIFY };
	struct ftpad_ops other = { .func = to_g, .flags = FTPAD_OPS_FL_IPMODIFY };
	struct ftpad_ops plain = { .func = to_g };
	struct ftpad_ops trace_g = { .func = note };
	long r;

	seen[0] = 0;
	must(ftpad_set_filter(&patch, "f", 1), "filter");
	must(ftpad_set_filter(&trace_g, "g", 1), "filter g");
	must(ftpad_register_ops(&patch), "register");
	must(ftpad_register_ops(&trace_g), "register g");
	set_ip_result = 1;
	r = f(6, 7);
	printf("redirected: f(6, 7)=%ld set_ip=%d seen=%s\n", r, set_ip_result, seen);
	must(ftpad_set_filter(&other, "f*", 1), "filter other");
	printf("second ipmodify: %d\n", ftpad_register_ops(&other));
	must(ftpad_set_filter(&other, "h", 1), "filter other h");
	must(ftpad_register_ops(&other), "register other on h");
	printf("refilter onto f: %d\n", ftpad_set_filter(&other, "f", 0));
	must(ftpad_unregister_ops(&other), "unregister other");
	must(ftpad_unregister_ops(&patch), "unregister");
	must(ftpad_unregister_ops(&trace_g), "unregister g");
	printf("restored: f(6, 7)=%ld\n", f(6, 7));
	must(ftpad_set_filter(&plain, "f", 1), "filter plain");
	must(ftpad_register_ops(&plain), "register plain");
	set_ip_result = 1;
	r = f(6, 7);
	printf("without IPMODIFY: f(6, 7)=%ld set_ip=%d\n", r, set_ip_result);
	must(ftpad_unregister_ops(&plain), "unregister plain");
}

static void misuse(void)
{
	struct ftpad_ops bad = { .func = note, .flags = 1ul << 20 };
	struct ftpad_ops inside = { .func = registers_inside };

	printf("unknown flag: %d\n", ftpad_register_ops(&bad));
	must(ftpad_set_filter(&inside, "f", 1), "filter inside");
	must(ftpad_register_ops(&inside), "register inside");
	f(1, 1);
	printf("from a callback: %d\n", nested_result);
	must(ftpad_unregister_ops(&inside), "unregister inside");
}

static void recursion(void)
{
	struct ftpad_ops ops = { .func = calls_f, .flags = FTPAD_OPS_FL_RECURSION };

	must(ftpad_set_filter(&ops, "f", 1), "filter recursion");
	must(ftpad_register_ops(&ops), "register recursion");
	f(1, 1);
	f(1, 1);
	must(ftpad_unregister_ops(&ops), "unregister recursion");
	printf("recursion: %d callbacks for 2 calls\n", recursing_calls);
}

int main(void)
{
	notrace();
	arguments();
	redirect();
	misuse();
	recursion();
	return 0;
}
