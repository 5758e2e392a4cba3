/* SPDX-License-Identifier: MIT */
/*
 * x86_64.S - functions with exit sites and their records written by hand,
 * as docs/format.md "Exit sites (version 2)" defines them, for
 * tests/runtime/test_runtime_exit.py (the plugins' exit=1 is not used: the
 * runtime is tested on its own).  -DV1ONLY: entry records only (an
 * object built without exit=1).  -DV3: one record of version 3 more.
 */
	.text

/* The record of one site: version 1 (entry) or 2 (exits), kind. */
	.macro RECORD fn, site, version, after, kind
	.pushsection __ftpad_sites, "a", @progbits
	.balign 8
	.long .L\fn\()_entry - .
	.long \site - .
	.long .L\fn\()_ops - .
	.long .L\fn\()_name - .
	.byte \version, 1, 0, \after, 5, \kind
	.short 0
	.popsection
	.endm

/* A padded function's entry: the 8-byte ops slot, then the site NOP. */
	.macro FUNC fn
	.pushsection __ftpad_names, "a", @progbits
.L\fn\()_name:
	.string "\fn"
	.popsection
	.p2align 4
	.byte 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00
.L\fn\()_ops:
	.byte 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00
	.globl \fn
	.type \fn, @function
\fn:
.L\fn\()_entry:
	RECORD \fn, .L\fn\()_site, 1, 5, 0
.L\fn\()_site:
	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
	.endm

/* An exit site (kind 1) or tail exit site (kind 2) here. */
	.macro EXIT fn, kind=1
#ifndef V1ONLY
	RECORD \fn, 99f, 2, 0, \kind
99:	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
#endif
	.endm

	.globl text_start
text_start:

/* int ret_int(int x): three returns, -1, 0, 2 * x. */
	FUNC ret_int
	testl %edi, %edi
	js 1f
	jz 2f
	leal (%rdi,%rdi), %eax
	EXIT ret_int
	ret
1:	movl $-1, %eax
	EXIT ret_int
	ret
2:	xorl %eax, %eax
	EXIT ret_int
	ret
	.size ret_int, .-ret_int

/* double ret_double(double x): 2 * x */
	FUNC ret_double
	addsd %xmm0, %xmm0
	EXIT ret_double
	ret
	.size ret_double, .-ret_double

/* long double ret_ldouble(const long double *p): *p, in st(0) */
	FUNC ret_ldouble
	fldt (%rdi)
	EXIT ret_ldouble
	ret
	.size ret_ldouble, .-ret_ldouble

/* complex long double ret_cld(const long double *re, const long double *im) */
	FUNC ret_cld
	fldt (%rsi)
	fldt (%rdi)
	EXIT ret_cld
	ret
	.size ret_cld, .-ret_cld

/* struct pair { long a, b; } ret_pair(long a, long b): in rax, rdx */
	FUNC ret_pair
	movq %rdi, %rax
	movq %rsi, %rdx
	EXIT ret_pair
	ret
	.size ret_pair, .-ret_pair

/* void tail_caller(long a..f, double d0..d7): r10, rax and r11 set, then
 * a tail call through r11 to tail_target, with every argument live. */
	FUNC tail_caller
	movq $0x1010, %r10
	movq $8, %rax
	leaq tail_target(%rip), %r11
	EXIT tail_caller, 2
	jmp *%r11
	.size tail_caller, .-tail_caller

/* int noexit_fn(int x): x + 1, an entry record only. */
	FUNC noexit_fn
	leal 1(%rdi), %eax
	ret
	.size noexit_fn, .-noexit_fn

	.globl text_end
text_end:

/* What tail_target saw: rdi rsi rdx rcx r8 r9 r10 rax r11, xmm0-7 (low 8). */
	.globl tail_seen
	.type tail_target, @function
tail_target:
	movq %rdi, tail_seen+0(%rip)
	movq %rsi, tail_seen+8(%rip)
	movq %rdx, tail_seen+16(%rip)
	movq %rcx, tail_seen+24(%rip)
	movq %r8, tail_seen+32(%rip)
	movq %r9, tail_seen+40(%rip)
	movq %r10, tail_seen+48(%rip)
	movq %rax, tail_seen+56(%rip)
	movq %r11, tail_seen+64(%rip)
	movsd %xmm0, tail_seen+72(%rip)
	movsd %xmm1, tail_seen+80(%rip)
	movsd %xmm2, tail_seen+88(%rip)
	movsd %xmm3, tail_seen+96(%rip)
	movsd %xmm4, tail_seen+104(%rip)
	movsd %xmm5, tail_seen+112(%rip)
	movsd %xmm6, tail_seen+120(%rip)
	movsd %xmm7, tail_seen+128(%rip)
	ret
	.size tail_target, .-tail_target
	.globl tail_target

/* void clobber(void): every call-clobbered register to junk, as a callback may. */
	.globl clobber
	.type clobber, @function
clobber:
	movq $-1, %rax
	movq $-1, %rcx
	movq $-1, %rdx
	movq $-1, %rsi
	movq $-1, %rdi
	movq $-1, %r8
	movq $-1, %r9
	movq $-1, %r10
	movq $-1, %r11
	pcmpeqd %xmm0, %xmm0
	.irp n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15
	movdqa %xmm0, %xmm\n
	.endr
	ret
	.size clobber, .-clobber

#ifdef V3
	.pushsection __ftpad_sites, "a", @progbits
	.balign 8
	.long .Lret_int_entry - .
	.long .Lret_int_site - .
	.long 0
	.long 0
	.byte 3, 1, 0, 5, 5, 0
	.short 0
	.popsection
#endif

	.bss
	.p2align 4
tail_seen:
	.zero 136
	.section .note.GNU-stack, "", @progbits
