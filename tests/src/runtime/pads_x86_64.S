/* SPDX-License-Identifier: MIT */
/*
 * pads_x86_64.S - functions with exactly the pads and records the ftpad GCC
 * plugin emits on x86_64, written by hand so that the runtime can be tested
 * on its own, layout by layout.  Assemble with -DPREFIX=name_ to give every
 * function a prefix (one copy goes into a program, one into a library).
 *
 *         [filler][before NOPs][ops slot: 0f 1f 84 00 00 00 00 00]
 * func:   [endbr64?][site: 0f 1f 44 00 00][rest of after: NOPs]
 */
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define F(x) CAT(PREFIX, x)

/* PAD name, endbr, slot, named, before, after, bad: a padded entry + record. */
	.macro PAD name, endbr=0, slot=1, named=1, before=0, after=5, bad=0
	.text
	.p2align 4
	.if (\before) % 8
	.skip 8 - ((\before) % 8), 0x90
	.endif
	.if \before
	.skip \before, 0x90
	.endif
	.if \slot
.L\name\()_slot:
	.byte 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00
	.endif
	.globl \name
	.type \name, @function
\name:
.L\name:
	.if \endbr
	endbr64
	.endif
.L\name\()_site:
	.if \bad
	.byte 0x90, 0x90, 0x90, 0x90, 0x90
	.else
	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
	.endif
	.if (\after) - 5
	.skip (\after) - 5, 0x90
	.endif
	RECORD \name, \endbr, \slot, \named, \before, \after
	.endm

/* The record of .L<name> (its site at .L<name>_site, its slot at .L<name>_slot). */
	.macro RECORD name, endbr, slot, named, before, after
	.pushsection __ftpad_sites, "a", @progbits
	.p2align 3
.L\name\()_rec:
	.long .L\name - .L\name\()_rec
	.long .L\name\()_site - (.L\name\()_rec + 4)
	.if \slot
	.long .L\name\()_slot - (.L\name\()_rec + 8)
	.else
	.long 0
	.endif
	.if \named
	.long .L\name\()_str - (.L\name\()_rec + 12)
	.else
	.long 0
	.endif
	.byte 1, 1, \before, \after, 5, 0 /* version, arch, before, after, site_len */
	.short \endbr                      /* FTPAD_SITE_ENDBR */
	.popsection
	.if \named
	.pushsection __ftpad_names, "a", @progbits
.L\name\()_str:
	.asciz "\name"
	.popsection
	.endif
	.endm

/* A direct call that needs no PLT, even in a shared object. */
	.macro CALL_LOCAL name
	call .L\name
	.endm

	.macro END name
	.size \name, . - \name
	.endm

/* long add1(long x): x + 1 */
	PAD F(add1)
	lea 1(%rdi), %rax
	ret
	END F(add1)

/* long add1_endbr(long x): x + 2, behind endbr64 */
	PAD F(add1_endbr), endbr=1, before=2, after=9
	lea 2(%rdi), %rax
	ret
	END F(add1_endbr)

/* long noslot(long x): 2x, without an ops slot */
	PAD F(noslot), slot=0
	lea (%rdi,%rdi), %rax
	ret
	END F(noslot)

/* long noslot_endbr(long x): x + 3, no slot, no name record */
	PAD F(noslot_endbr), endbr=1, slot=0, named=0
	lea 3(%rdi), %rax
	ret
	END F(noslot_endbr)

/* long sum8(long a..h): a + ... + h, two of them on the stack; no name record */
	PAD F(sum8), named=0, before=3, after=8
	lea (%rdi,%rsi), %rax
	add %rdx, %rax
	add %rcx, %rax
	add %r8, %rax
	add %r9, %rax
	add 8(%rsp), %rax
	add 16(%rsp), %rax
	ret
	END F(sum8)

/* long calls_add1(long x): add1(add1(x)), a traced caller of a traced callee */
	PAD F(calls_add1)
	sub $8, %rsp
	CALL_LOCAL F(add1)
	mov %rax, %rdi
	CALL_LOCAL F(add1)
	add $8, %rsp
	ret
	END F(calls_add1)

/* void echo_regs(void *out): store every argument register but rdi into out */
	.macro ECHO_BODY
	mov %rsi, 0(%rdi)
	mov %rdx, 8(%rdi)
	mov %rcx, 16(%rdi)
	mov %r8, 24(%rdi)
	mov %r9, 32(%rdi)
	mov %rax, 40(%rdi)
	mov %r10, 48(%rdi)
	movdqu %xmm0, 56+0*16(%rdi)
	movdqu %xmm1, 56+1*16(%rdi)
	movdqu %xmm2, 56+2*16(%rdi)
	movdqu %xmm3, 56+3*16(%rdi)
	movdqu %xmm4, 56+4*16(%rdi)
	movdqu %xmm5, 56+5*16(%rdi)
	movdqu %xmm6, 56+6*16(%rdi)
	movdqu %xmm7, 56+7*16(%rdi)
	ret
	.endm

	PAD F(echo_regs)
	ECHO_BODY
	END F(echo_regs)

/* The same without an ops slot: the trampolines' path through C. */
	PAD F(echo_regs_noslot), slot=0
	ECHO_BODY
	END F(echo_regs_noslot)

/* long regs_probe(void): the carry flag at its entry, 0 or 1 */
	PAD F(regs_probe)
	setc %al
	movzbl %al, %eax
	ret
	END F(regs_probe)

/* long bad(void): its record claims a NOP site that is not there */
	PAD F(bad), bad=1
	xor %eax, %eax
	ret
	END F(bad)

/*
 * A record of a "function" in .data, after the records of real ones: the
 * runtime must refuse it (not code), even with the code segment of the
 * record before it at hand.
 */
	.macro STRAY name
	.data
	.p2align 4
.L\name:
.L\name\()_site:
	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
	RECORD \name, endbr=0, slot=0, named=1, before=0, after=5
	.text
	.endm

/*
 * void check_regs(void *out, void *echo): not padded.  Loads regs_expected
 * into the argument registers, rax, r10 and xmm0-7, and calls echo(out)
 * (echo_regs or echo_regs_noslot), so the caller can check that the
 * trampoline gave every one of them back.
 */
	.text
	.globl F(check_regs)
	.type F(check_regs), @function
F(check_regs):
	push %rsi
	lea .Lregs_expected(%rip), %r11
	mov 0(%r11), %rsi
	mov 8(%r11), %rdx
	mov 16(%r11), %rcx
	mov 24(%r11), %r8
	mov 32(%r11), %r9
	mov 40(%r11), %rax
	mov 48(%r11), %r10
	movdqu 56+0*16(%r11), %xmm0
	movdqu 56+1*16(%r11), %xmm1
	movdqu 56+2*16(%r11), %xmm2
	movdqu 56+3*16(%r11), %xmm3
	movdqu 56+4*16(%r11), %xmm4
	movdqu 56+5*16(%r11), %xmm5
	movdqu 56+6*16(%r11), %xmm6
	movdqu 56+7*16(%r11), %xmm7
	call *(%rsp)
	add $8, %rsp
	ret
	.size F(check_regs), . - F(check_regs)

/*
 * void call_regs_probe(unsigned long out[8]): not padded.  Sets rbx, rbp
 * and r12-r15 to known values and the carry flag, calls regs_probe, and
 * stores rbx, rbp, r12-r15 and rax as they come back, so that a callback
 * of an ops with FTPAD_OPS_FL_SAVE_REGS can be seen to read and change them.
 */
	.globl F(call_regs_probe)
	.type F(call_regs_probe), @function
F(call_regs_probe):
	push %rbx
	push %rbp
	push %r12
	push %r13
	push %r14
	push %r15
	push %rdi
	movabs $0x0b0b0b0b0b0b0b0b, %rbx
	movabs $0x0c0c0c0c0c0c0c0c, %rbp
	movabs $0x1212121212121212, %r12
	movabs $0x1313131313131313, %r13
	movabs $0x1414141414141414, %r14
	movabs $0x1515151515151515, %r15
	stc
	CALL_LOCAL F(regs_probe)
	pop %rdi
	mov %rbx, 0(%rdi)
	mov %rbp, 8(%rdi)
	mov %r12, 16(%rdi)
	mov %r13, 24(%rdi)
	mov %r14, 32(%rdi)
	mov %r15, 40(%rdi)
	mov %rax, 48(%rdi)
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbp
	pop %rbx
	ret
	.size F(call_regs_probe), . - F(call_regs_probe)

	.section .rodata
	.p2align 4
	.globl F(regs_expected)
	.type F(regs_expected), @object
F(regs_expected):
.Lregs_expected:
	.quad 0x1111111111111111, 0x2222222222222222, 0x3333333333333333
	.quad 0x4444444444444444, 0x5555555555555555, 0x0000000000000007
	.quad 0x7777777777777777
	.quad 0xa0a0a0a0a0a0a0a0, 0xa1a1a1a1a1a1a1a1, 0xb0b0b0b0b0b0b0b0, 0xb1b1b1b1b1b1b1b1
	.quad 0xc0c0c0c0c0c0c0c0, 0xc1c1c1c1c1c1c1c1, 0xd0d0d0d0d0d0d0d0, 0xd1d1d1d1d1d1d1d1
	.quad 0xe0e0e0e0e0e0e0e0, 0xe1e1e1e1e1e1e1e1, 0xf0f0f0f0f0f0f0f0, 0xf1f1f1f1f1f1f1f1
	.quad 0x0102030405060708, 0x1112131415161718, 0x2122232425262728, 0x3132333435363738
	.size F(regs_expected), . - F(regs_expected)

	STRAY F(stray)

	.section .note.GNU-stack, "", @progbits
