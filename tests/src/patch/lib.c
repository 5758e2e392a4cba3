/* SPDX-License-Identifier: MIT */
/* A padded shared library whose function libpatch.c replaces: it lies
 * within a jmp's reach of the patch, so the pad jumps there directly. */
__attribute__((noipa)) long lib_compute(long x)
{
	__asm__ volatile("" ::: "memory");
	return x + 5;
}
