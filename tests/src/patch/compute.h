/* SPDX-License-Identifier: MIT */
/*
 * What patch1.c and patch2.cc replace, in each program they patch
 * (server.c, self.c, apply.c): a global and a static function, and the
 * static variable patch1.c counts its calls in through FTPAD_SYMBOL.
 * Never inlined nor cloned, so that every call goes through the pad.
 */
#ifndef PATCH_COMPUTE_H
#define PATCH_COMPUTE_H

static volatile long patched_calls;

__attribute__((noipa)) long global_compute(long x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

__attribute__((noipa)) static long static_compute(long x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3;
}

#endif
