/* SPDX-License-Identifier: MIT */
/*
 * Exit sites (docs/format.md "Exit sites"): every kind of way out of a
 * function.  tests/plugins/test_exit_sites.py checks that each return and
 * each tail call's jump of every padded function has its site and record,
 * and that the program prints what it prints without the plugin.
 * No switch: a jump table's indirect jump looks like a tail call in bytes.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

struct pair { long a, b; };
struct big { long v[4]; };

int sink;

NOINLINE int leaf(int x) { return x * 3 + 1; }

/* Several returns, each after its own epilogue or a shared one. */
NOINLINE int several(int x)
{
	if (x < 0)
		return -1;
	if (x == 0) {
		sink++;
		return 0;
	}
	if (x > 100) {
		printf("big %d\n", x);
		return 100;
	}
	return leaf(x) + x;
}

NOINLINE int direct_tail(int x) { return leaf(x + 1); }

int (*volatile indirect)(int) = leaf;

/* The target stays in its register: the site must not touch it. */
NOINLINE int pointer_tail(int x) { return indirect(x + 2); }

/* x86 -Os makes "jne leaf" of this (a conditional tail call). */
NOINLINE int cond_tail(int x)
{
	if (x)
		return leaf(x);
	return 7;
}

NOINLINE struct pair ret_pair(long x) { return (struct pair){x, -x}; }

NOINLINE struct big ret_big(long x) { return (struct big){{x, x + 1, x + 2, x + 3}}; }

NOINLINE double ret_double(double x) { return x * 0.5; }

NOINLINE long double ret_ldouble(long double x) { return x / 4; }

NOINLINE long fact(long n) { return n <= 1 ? 1 : n * fact(n - 1); }

NOINLINE unsigned fib(unsigned n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

/* Never return: no exit site. */
__attribute__((noreturn)) NOINLINE void fail(const char *why)
{
	fprintf(stderr, "fail: %s\n", why);
	exit(3);
}

static jmp_buf env;

__attribute__((noreturn)) NOINLINE void jump_out(int v) { longjmp(env, v); }

/* Returns normally only on one path; leaves by longjmp on the other. */
NOINLINE int maybe_jump(int v)
{
	if (v > 1)
		jump_out(v);
	return v + 10;
}

NOINLINE int catch_jump(int v)
{
	int got = setjmp(env);
	if (got)
		return got * 100;
	return maybe_jump(v);
}

int main(int argc, char **argv)
{
	(void)argv;
	if (argc > 5)
		fail("too many arguments");
	int n = argc; /* 1 */
	struct pair p = ret_pair(n + 4);
	struct big b = ret_big(n);
	printf("several %d %d %d %d\n", several(-n), several(n - 1), several(n), several(n + 200));
	printf("tail %d %d %d %d\n", direct_tail(n), pointer_tail(n), cond_tail(n - 1), cond_tail(n));
	printf("pair %ld %ld big %ld\n", p.a, p.b, b.v[0] + b.v[3]);
	printf("double %.2f ldouble %.2Lf\n", ret_double(n + 2), ret_ldouble((long double)n + 7));
	printf("fact %ld fib %u\n", fact(n + 9), fib(n + 14));
	printf("jump %d %d\n", catch_jump(n), catch_jump(n + 2));
	printf("sink %d\n", sink);
	return 0;
}
