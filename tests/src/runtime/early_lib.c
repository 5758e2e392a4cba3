/* SPDX-License-Identifier: MIT */
/* early_lib.c - a padded library whose constructor calls a traced
 * function, before the program's constructors (and, linked with
 * libftpad.a, before libftpad's): tests/runtime/test_runtime_early.py. */
#include <stdio.h>

unsigned long early_mallocs(void);

__attribute__((noipa)) long e_lib_work(long x)
{
	return x + 1;
}

static volatile long sink;

__attribute__((noipa)) static void lib_init_calls(void)
{
	sink = e_lib_work(1); /* not a tail call: the caller stays lib_init_calls */
}

__attribute__((constructor)) static void lib_init(void)
{
	/* How many times malloc ran before this constructor. */
	printf("lib constructor: %lu mallocs before\n", early_mallocs());
	lib_init_calls();
}
