/* SPDX-License-Identifier: MIT */
/*
 * trampoline_x86_64.S - the one trampoline every enabled x86_64 site reaches,
 * through `call rel32` to its module's stub, which jumps here with the site
 * kind in r11.
 *
 * On entry:  [rsp] = site + 5 (return into the traced function)
 *            [rsp + 8] = parent_ip (return into its caller)
 * The stack is realigned rather than assumed aligned: GCC's
 * -fipa-stack-alignment (on by default) lets a caller call a function it
 * knows needs no alignment with rsp misaligned, and such a function's site
 * then enters here with rsp = 8 mod 16.
 * It saves every register a callee may receive an argument in (rdi rsi rdx
 * rcx r8 r9, rax for varargs, r10 for the static chain, xmm0-7), calls
 * ftpad_trampoline_entry(ret, parent_ip, regs, kind) and restores them all
 * before returning into the function, or into where a callback redirected
 * it (regs->ip).  r11 and the flags are dead at a function's entry, so they
 * need no saving.
 *
 * The frame is struct ftpad_regs (arch/x86_64.c); keep the two in step.
 */
#define R_RDI 0
#define R_RSI 8
#define R_RDX 16
#define R_RCX 24
#define R_R8 32
#define R_R9 40
#define R_RAX 48
#define R_R10 56
#define R_SP 64
#define R_IP 72
#define R_XMM 80
#define FRAME 208 /* a multiple of 16: the call below sees an aligned stack */

	.text
	.globl ftpad_trampoline
	.hidden ftpad_trampoline
	.type ftpad_trampoline, @function
	.p2align 4
ftpad_trampoline:
	.cfi_startproc
	endbr64 /* reached by the stub's indirect jmp */
	pushq %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	movq %rsp, %rbp
	.cfi_def_cfa_register %rbp
	andq $-16, %rsp
	subq $FRAME, %rsp
	movq %rdi, R_RDI(%rsp)
	movq %rsi, R_RSI(%rsp)
	movq %rdx, R_RDX(%rsp)
	movq %rcx, R_RCX(%rsp)
	movq %r8, R_R8(%rsp)
	movq %r9, R_R9(%rsp)
	movq %rax, R_RAX(%rsp)
	movq %r10, R_R10(%rsp)
	leaq 16(%rbp), %rax       /* rsp at the function's entry */
	movq %rax, R_SP(%rsp)
	movq 8(%rbp), %rax        /* where to return: site + 5 */
	movq %rax, R_IP(%rsp)
	movaps %xmm0, R_XMM+0*16(%rsp)
	movaps %xmm1, R_XMM+1*16(%rsp)
	movaps %xmm2, R_XMM+2*16(%rsp)
	movaps %xmm3, R_XMM+3*16(%rsp)
	movaps %xmm4, R_XMM+4*16(%rsp)
	movaps %xmm5, R_XMM+5*16(%rsp)
	movaps %xmm6, R_XMM+6*16(%rsp)
	movaps %xmm7, R_XMM+7*16(%rsp)

	movq 8(%rbp), %rdi        /* ret: site + 5 */
	movq 16(%rbp), %rsi       /* parent_ip */
	movq %rsp, %rdx           /* regs */
	movq %r11, %rcx           /* kind, from the stub */
	call ftpad_trampoline_entry

	movaps R_XMM+0*16(%rsp), %xmm0
	movaps R_XMM+1*16(%rsp), %xmm1
	movaps R_XMM+2*16(%rsp), %xmm2
	movaps R_XMM+3*16(%rsp), %xmm3
	movaps R_XMM+4*16(%rsp), %xmm4
	movaps R_XMM+5*16(%rsp), %xmm5
	movaps R_XMM+6*16(%rsp), %xmm6
	movaps R_XMM+7*16(%rsp), %xmm7
	movq R_IP(%rsp), %r11     /* a callback may have redirected the function */
	movq %r11, 8(%rbp)
	movq R_R10(%rsp), %r10
	movq R_RAX(%rsp), %rax
	movq R_R9(%rsp), %r9
	movq R_R8(%rsp), %r8
	movq R_RCX(%rsp), %rcx
	movq R_RDX(%rsp), %rdx
	movq R_RSI(%rsp), %rsi
	movq R_RDI(%rsp), %rdi
	movq %rbp, %rsp
	.cfi_def_cfa_register %rsp
	popq %rbp
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbp
	ret
	.cfi_endproc
	.size ftpad_trampoline, .-ftpad_trampoline

	.section .note.GNU-stack, "", @progbits
