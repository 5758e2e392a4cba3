/* SPDX-License-Identifier: MIT */
/*
 * asm_offsets.h - how arch/asm_offsets_<arch>.c hands C's numbers to
 * trampoline_<arch>.S, as Linux's asm-offsets do: compiled with -S, each
 * ASM_OFFSET() leaves the line "->NAME VALUE" in the assembly, which
 * asm_offsets.cmake turns into "#define NAME VALUE" in the generated
 * ftpad_asm_offsets.h that the .S includes.  So an offset follows the
 * struct, and no number is written twice.
 */
#ifndef FTPAD_ASM_OFFSETS_H
#define FTPAD_ASM_OFFSETS_H

#include <stddef.h>

/* %c: the bare number, without x86_64's '$' or aarch64's '#'. */
#define ASM_OFFSET(name, value) __asm__ volatile("\n.ascii \"->" #name " %c0\"" : : "i"(value))

/* The member's size, for a .S that steps through an array. */
#define ASM_MEMBER_SIZE(type, member) sizeof(((type *)0)->member)

#endif /* FTPAD_ASM_OFFSETS_H */
