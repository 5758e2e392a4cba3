/* SPDX-License-Identifier: MIT */
/*
 * exits.c - every way a C function leaves, for the exit-site tests
 * (tests/plugins/test_exit_sites.py): several returns, tail calls direct and
 * through a pointer, a leaf, struct/double/long double results, recursion,
 * a noreturn function and one that never returns normally (longjmp).
 * It prints what it computed; the output must not change with exit sites.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

struct pair {
	long a, b, c; /* three words: returned in memory on both machines */
};

int counter;
static jmp_buf escape;

__attribute__((noinline)) int leaf(int x)
{
	return x * 3 + 1;
}

/* Several return paths; shrink-wrapping gives the ones that call leaf() an
 * epilogue of their own. */
__attribute__((noinline)) int many_returns(int x)
{
	if (x > 100)
		return leaf(x) + leaf(x + 1);
	if (x < 0) {
		counter++;
		return -1;
	}
	if (x == 7)
		return counter;
	return x ? 5 : 9;
}

__attribute__((noinline)) int direct_tail(int x)
{
	return leaf(x + 2);
}

/* volatile: the compiler cannot see which function it calls, so the tail
 * call stays a jump through a register. */
int (*volatile tail_target)(int) = leaf;

__attribute__((noinline)) int pointer_tail(int x)
{
	return tail_target(x - 1);
}

__attribute__((noinline)) struct pair make_pair(long x)
{
	struct pair p = {x, x * 2, x * 3};
	return p;
}

__attribute__((noinline)) double average(double a, double b)
{
	return (a + b) / 2;
}

__attribute__((noinline)) long double scaled(long double x)
{
	return x * 1.5L;
}

__attribute__((noinline)) long fib(int n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

__attribute__((noreturn, noinline)) void fail(int code)
{
	printf("fail %d\n", code);
	fflush(stdout);
	exit(code);
}

/* Never returns normally: it leaves by longjmp, or by fail(). */
__attribute__((noinline)) void jump_out(int x)
{
	if (x > 1000)
		fail(3);
	longjmp(escape, x + 1);
}

int main(int argc, char **argv)
{
	(void)argv;
	struct pair p = make_pair(argc + 4);
	printf("%d %d %d %d %d\n", many_returns(101), many_returns(-3), many_returns(7),
	       many_returns(argc - 1), many_returns(2));
	printf("%d %d\n", direct_tail(argc), pointer_tail(argc + 10));
	printf("%ld %ld %ld %.2f %.2Lf %ld\n", p.a, p.b, p.c, average(argc, 4.0),
	       scaled(argc + 1), fib(argc + 14));
	int jumped = setjmp(escape);
	if (!jumped)
		jump_out(argc + 40);
	printf("jumped %d counter %d\n", jumped, counter);
	if (argc > 5)
		fail(argc);
	return 0;
}
