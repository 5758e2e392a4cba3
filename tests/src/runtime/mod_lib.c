/* SPDX-License-Identifier: MIT */
/*
 * A library of MOD_HUNDREDS * 100 small functions, for
 * tests/runtime/test_runtime_modules.py.  Built with the plugin it is module A (one
 * site per function); built without, module B: the same names, no pads, so
 * that A's sites fall inside B's code when B is loaded where A was.  With
 * MOD_CTOR, its constructor registers an ops of its own and its destructor
 * unregisters it, as a tracing plugin would.
 */
/* B: read-only data as large as A's site records and names, so that both
 * span the same pages and B can be loaded exactly where A was. */
#ifdef MOD_FILL
const char mod_fill[MOD_FILL] = { 1 };
#endif

#ifndef MOD_HUNDREDS
#define MOD_HUNDREDS 1
#endif

#define F(n) __attribute__((noinline)) int mod_f##n(int x) { return x * (n + 3) + 1; }
#define F10(n) F(n##0) F(n##1) F(n##2) F(n##3) F(n##4) F(n##5) F(n##6) F(n##7) F(n##8) F(n##9)
#define F100(n) F10(n##0) F10(n##1) F10(n##2) F10(n##3) F10(n##4) \
		F10(n##5) F10(n##6) F10(n##7) F10(n##8) F10(n##9)
#define C(n) s += mod_f##n(x);
#define C10(n) C(n##0) C(n##1) C(n##2) C(n##3) C(n##4) C(n##5) C(n##6) C(n##7) C(n##8) C(n##9)
#define C100(n) C10(n##0) C10(n##1) C10(n##2) C10(n##3) C10(n##4) \
		C10(n##5) C10(n##6) C10(n##7) C10(n##8) C10(n##9)

F100(1)
#if MOD_HUNDREDS > 1
F100(2) F100(3) F100(4) F100(5)
#endif

/* The sum over every function: x * (n + 3) + 1 for each n. */
int mod_call_all(int x)
{
	int s = 0;

	C100(1)
#if MOD_HUNDREDS > 1
	C100(2) C100(3) C100(4) C100(5)
#endif
	return s;
}

#ifdef MOD_CTOR
#include "ftpad.h"

static void own(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
}

static struct ftpad_ops own_ops = { .func = own };

__attribute__((constructor)) static void up(void)
{
	if (ftpad_set_filter(&own_ops, "mod_f1*", 1) || ftpad_register_ops(&own_ops))
		__builtin_trap();
}

__attribute__((destructor)) static void down(void)
{
	if (ftpad_unregister_ops(&own_ops))
		__builtin_trap();
}
#endif
