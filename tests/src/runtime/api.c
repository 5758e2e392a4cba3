/* SPDX-License-Identifier: MIT */
/*
 * api.c - the calls a callback makes on regs, notrace lists and the
 * IPMODIFY rules, on functions compiled with the GCC plugin.  Prints one
 * line per check; tests/runtime/test_runtime_api.py compares them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
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

/* Without FTPAD_OPS_FL_RECURSION the callback sees the calls it makes
 * itself, and must stop on its own. */
static int unprotected_calls, unprotected_depth;

static void calls_f_unprotected(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
				struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	unprotected_calls++;
	if (unprotected_depth < 3) {
		unprotected_depth++;
		f(2, 2);
		unprotected_depth--;
	}
}

/* ... or with the guard FTPAD_OPS_FL_RECURSION uses. */
static int guarded_calls, guarded_blocked;

static void calls_f_guarded(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
			    struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	if (ftpad_recursion_trylock()) {
		guarded_blocked++;
		return;
	}
	guarded_calls++;
	f(2, 2);
	ftpad_recursion_unlock();
}

/* A signal handler interrupting a callback: recursion, for the guard. */
static int handler_calls;
static volatile sig_atomic_t in_usr1;

static void on_usr1(int sig)
{
	(void)sig;
	in_usr1 = 1;
	f(3, 3);
	in_usr1 = 0;
}

static void raises(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		   struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)regs, (void)ops;
	handler_calls++;
	/* The handler's call of f comes back here: raise only from outside. */
	if (!in_usr1 && handler_calls < 10)
		raise(SIGUSR1);
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
	printf("strerror: %s | %s\n", ftpad_strerror(-EDEADLK), ftpad_strerror(-EPERM));
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

	ops.func = calls_f_unprotected;
	ops.flags = 0;
	must(ftpad_register_ops(&ops), "register unprotected");
	f(1, 1);
	f(1, 1);
	must(ftpad_unregister_ops(&ops), "unregister unprotected");
	printf("no recursion flag: %d callbacks for 2 calls\n", unprotected_calls);

	ops.func = calls_f_guarded;
	must(ftpad_register_ops(&ops), "register guarded");
	f(1, 1);
	f(1, 1);
	must(ftpad_unregister_ops(&ops), "unregister guarded");
	printf("trylock: %d callbacks, %d blocked\n", guarded_calls, guarded_blocked);
}

static void signal_in_callback(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	struct ftpad_ops ops = { .func = raises };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	must(ftpad_set_filter(&ops, "f", 1), "filter signal");
	must(ftpad_register_ops(&ops), "register signal");
	f(1, 1);
	must(ftpad_unregister_ops(&ops), "unregister signal");
	printf("signal in a callback: %d callbacks\n", handler_calls);
	handler_calls = 0;
	ops.flags = FTPAD_OPS_FL_RECURSION;
	must(ftpad_register_ops(&ops), "register signal protected");
	f(1, 1);
	must(ftpad_unregister_ops(&ops), "unregister signal protected");
	printf("signal in a protected callback: %d callbacks\n", handler_calls);
}

int main(void)
{
	notrace();
	arguments();
	redirect();
	misuse();
	recursion();
	signal_in_callback();
	return 0;
}
