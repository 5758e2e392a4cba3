/* SPDX-License-Identifier: MIT */
/* filters_noexit.c - built without exit=1: a function with entries only. */
volatile unsigned long noexit_sink;

__attribute__((noinline, noclone)) void noexit_leaf(void)
{
	noexit_sink++;
}
