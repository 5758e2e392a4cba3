/* SPDX-License-Identifier: MIT */
/* lib.c - a library built with the plugin and exit sites, dlopen'ed by
 * trees: lib_fn() calls lib_leaf(). */
#ifdef __clang__
#define TRACED __attribute__((noinline))
#else
#define TRACED __attribute__((noinline, noclone))
#endif

TRACED int lib_leaf(int x)
{
	return x * 5;
}

TRACED int lib_fn(int x)
{
	int r = lib_leaf(x);

	__asm__ volatile("" : "+r"(r));
	return r + 1;
}
