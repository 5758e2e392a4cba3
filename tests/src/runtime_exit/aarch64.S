/* SPDX-License-Identifier: MIT */
/*
 * aarch64.S - functions with exit sites and their records written by hand,
 * as docs/format.md "Exit sites (version 2)" defines them, for
 * tests/runtime/test_runtime_exit.py: the same functions as x86_64.S.  The entry
 * is the user layout (ops slot, [bti c,] mov x9, x30, site NOP);
 * -DV1ONLY: entry records only; -DV3: one record of version 3 more.
 */
#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define BTI 1
#else
#define BTI 0
#endif
	.text

/* The record of one site: version 1 (entry) or 2 (exits), kind. */
	.macro RECORD fn, site, version, after, kind, flags
	.pushsection __ftpad_sites, "a", %progbits
	.p2align 3
	.long .L\fn\()_entry - .
	.long \site - .
	.long .L\fn\()_ops - .
	.long .L\fn\()_name - .
	.byte \version, 2, 0, \after, 4, \kind
	.short \flags
	.popsection
	.endm

	.macro FUNC fn
	.pushsection __ftpad_names, "a", %progbits
.L\fn\()_name:
	.string "\fn"
	.popsection
	.p2align 4
	nop
	nop
.L\fn\()_ops:
	nop
	nop
	.globl \fn
	.type \fn, %function
\fn:
.L\fn\()_entry:
	.if BTI
	hint 34 /* bti c */
	RECORD \fn, .L\fn\()_site, 1, 2, 0, 6 /* BTI | MOV_X9 */
	.else
	RECORD \fn, .L\fn\()_site, 1, 2, 0, 4 /* MOV_X9 */
	.endif
	mov x9, x30
.L\fn\()_site:
	nop
	.endm

/* An exit site (kind 1) or tail exit site (kind 2) here. */
	.macro EXIT fn, kind=1
#ifndef V1ONLY
	RECORD \fn, 99f, 2, 0, \kind, 0
99:	nop
#endif
	.endm

	.globl text_start
text_start:

/* int ret_int(int x): three returns, -1, 0, 2 * x. */
	FUNC ret_int
	cmp w0, #0
	b.lt 1f
	b.eq 2f
	add w0, w0, w0
	EXIT ret_int
	ret
1:	mov w0, #-1
	EXIT ret_int
	ret
2:	mov w0, #0
	EXIT ret_int
	ret
	.size ret_int, .-ret_int

/* double ret_double(double x): 2 * x */
	FUNC ret_double
	fadd d0, d0, d0
	EXIT ret_double
	ret
	.size ret_double, .-ret_double

/* long double ret_ldouble(const long double *p): *p, in q0 */
	FUNC ret_ldouble
	ldr q0, [x0]
	EXIT ret_ldouble
	ret
	.size ret_ldouble, .-ret_ldouble

/* complex long double ret_cld(const long double *re, const long double *im) */
	FUNC ret_cld
	ldr q0, [x0]
	ldr q1, [x1]
	EXIT ret_cld
	ret
	.size ret_cld, .-ret_cld

/* struct pair { long a, b; } ret_pair(long a, long b): in x0, x1 */
	FUNC ret_pair
	EXIT ret_pair
	ret
	.size ret_pair, .-ret_pair

/* void tail_caller(long a..f, double d0..d7): x7 and x8 set, then a tail
 * call through x16 to tail_target, with every argument live. */
	FUNC tail_caller
	mov x7, #0x1010
	mov x8, #8
	adrp x16, tail_target
	add x16, x16, :lo12:tail_target
	EXIT tail_caller, 2
	br x16
	.size tail_caller, .-tail_caller

/* int noexit_fn(int x): x + 1, an entry record only. */
	FUNC noexit_fn
	add w0, w0, #1
	ret
	.size noexit_fn, .-noexit_fn

	.globl text_end
text_end:

/* What tail_target saw: x0-x5, x7, x8, x16, d0-d7 (the same slots as
 * x86_64.S's rdi rsi rdx rcx r8 r9 r10 rax r11, xmm0-7). */
	.globl tail_target
	.type tail_target, %function
	.p2align 2
tail_target:
	hint 34 /* bti c: reached by br x16 */
	adrp x9, tail_seen
	add x9, x9, :lo12:tail_seen
	stp x0, x1, [x9]
	stp x2, x3, [x9, #16]
	stp x4, x5, [x9, #32]
	stp x7, x8, [x9, #48]
	str x16, [x9, #64]
	stp d0, d1, [x9, #72]
	stp d2, d3, [x9, #88]
	stp d4, d5, [x9, #104]
	stp d6, d7, [x9, #120]
	ret
	.size tail_target, .-tail_target

/* void clobber(void): every call-clobbered register to junk, as a callback may. */
	.globl clobber
	.type clobber, %function
	.p2align 2
clobber:
	hint 34
	.irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17
	mov x\n, #-1
	.endr
	.irp n, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
	movi v\n\().2d, #0xffffffffffffffff
	.endr
	ret
	.size clobber, .-clobber

#ifdef V3
	.pushsection __ftpad_sites, "a", %progbits
	.p2align 3
	.long .Lret_int_entry - .
	.long .Lret_int_site - .
	.long 0
	.long 0
	.byte 3, 2, 0, 2, 4, 0
	.short 4
	.popsection
#endif

	.bss
	.p2align 4
	.globl tail_seen
tail_seen:
	.zero 136
	.section .note.GNU-stack, "", %progbits
