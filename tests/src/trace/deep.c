/* SPDX-License-Identifier: MIT */
/*
 * deep.c - a recursion as deep as its argument says (default 10), then a
 * leaf: main > deep x (N + 1) > leaf.  Recorded by tests/trace/test_trace_hostile.py
 * (a small trace to corrupt, and one 100,000 calls deep for `ftpad flame`)
 * and by bench/flame_deep.py.
 */
#include <stdlib.h>

__attribute__((noinline)) int leaf(int x)
{
	return x * 3 + 1;
}

__attribute__((noinline)) int deep(int n)
{
	return n ? deep(n - 1) + 1 : leaf(n);
}

int main(int argc, char **argv)
{
	return deep(argc > 1 ? atoi(argv[1]) : 10) < 0;
}
