/* SPDX-License-Identifier: MIT */
/*
 * trampoline_x86_64.S - the trampolines every enabled x86_64 site reaches,
 * through `call rel32` to its module's stub, which jumps here with the site
 * kind in r11 (arch/x86_64.c: ENDBR 1, SLOT 2, REGS 4).
 *
 * On entry:  [rsp] = site + 5 (return into the traced function)
 *            [rsp + 8] = parent_ip (return into its caller)
 * The stack is realigned rather than assumed aligned: GCC's
 * -fipa-stack-alignment (on by default) lets a caller call a function it
 * knows needs no alignment with rsp misaligned, and such a function's site
 * then enters here with rsp = 8 mod 16.
 *
 * Every trampoline saves what a callee may receive an argument in (rdi rsi
 * rdx rcx r8 r9, rax for varargs, r10 for the static chain, xmm0-7) and
 * restores it all before returning into the function, or where a callback
 * redirected it (regs->pt.rip).  r11 and the flags are dead at a function's
 * entry, so they need no saving (the stub uses r11 for the kind).
 *
 *  - ftpad_trampoline_2 and _3, sites with an ops slot (the common case),
 *    dispatch in assembly: enter (one add to this thread's slot word),
 *    check that the site is still a call, take its struct ftpad_site from
 *    the slot and call ops->internal.call(ip, parent_ip, ops, regs) with
 *    errno kept, and exit (one sub, then a writer waiting for a grace
 *    period is woken if the slot says one sleeps, as internal.h's
 *    ftpad_exit() does).  Anything unusual (no slot claimed yet, nested
 *    or busy, the site mid-patch) goes to the C path below instead.
 *  - ftpad_trampoline_0 and _1 (no ops slot) and those fallbacks call
 *    ftpad_trampoline_entry() in C.
 *  - ftpad_trampoline_regs (FTPAD_OPS_FL_SAVE_REGS) saves and restores
 *    every general register and the flags too, then goes to C.
 *
 * The frame is struct ftpad_regs (internal.h, ftpad.h's ftpad_pt_regs),
 * then what the fast path keeps over its call and the kind; arch/x86_64.c
 * checks the offsets.
 */
#define R_R15 0
#define R_R14 8
#define R_R13 16
#define R_R12 24
#define R_RBP 32
#define R_RBX 40
#define R_R11 48
#define R_R10 56
#define R_R9 64
#define R_R8 72
#define R_RAX 80
#define R_RCX 88
#define R_RDX 96
#define R_RSI 104
#define R_RDI 112
#define R_RIP 120
#define R_FLAGS 128
#define R_RSP 136
#define R_OPS 144
#define R_FULL 152
#define R_XMM 160
#define R_ERRNO 288     /* after struct ftpad_regs: the fast path's errno */
#define R_KIND 296      /* the stub's kind, for the full save's C call */
#define FRAME 304       /* a multiple of 16: the calls below see an aligned stack */

#define T_ERRNO 8       /* struct ftpad_thread_slot: errno_ptr */
#define T_WAITERS 28    /* struct ftpad_thread_slot: waiters */
#define OPS_CALL 56     /* struct ftpad_ops: internal.call */
#define ENTER 0x1000001 /* an outermost dispatch: FTPAD_GEN_ONE + 1 */
#define NOT_FAST 0xffffff /* FTPAD_BUSY_MASK | FTPAD_DEPTH_MASK */

	.text

/* The frame, and the argument registers in it. */
	.macro PROLOGUE flags=0
	.cfi_startproc
	endbr64 /* reached by the stub's indirect jmp */
	pushq %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	movq %rsp, %rbp
	.cfi_def_cfa_register %rbp
	.if \flags
	pushfq                    /* at -8(%rbp), before anything changes them */
	.endif
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
	movaps %xmm0, R_XMM+0*16(%rsp)
	movaps %xmm1, R_XMM+1*16(%rsp)
	movaps %xmm2, R_XMM+2*16(%rsp)
	movaps %xmm3, R_XMM+3*16(%rsp)
	movaps %xmm4, R_XMM+4*16(%rsp)
	movaps %xmm5, R_XMM+5*16(%rsp)
	movaps %xmm6, R_XMM+6*16(%rsp)
	movaps %xmm7, R_XMM+7*16(%rsp)
	movq 8(%rbp), %rdi        /* site + 5 */
	movq %rdi, R_RIP(%rsp)
	leaq 16(%rbp), %rax       /* rsp at the function's entry */
	movq %rax, R_RSP(%rsp)
	.endm

/* Back into the function, or where a callback sent it. */
	.macro EPILOGUE
	movq R_RIP(%rsp), %rax
	movq %rax, 8(%rbp)
	movaps R_XMM+0*16(%rsp), %xmm0
	movaps R_XMM+1*16(%rsp), %xmm1
	movaps R_XMM+2*16(%rsp), %xmm2
	movaps R_XMM+3*16(%rsp), %xmm3
	movaps R_XMM+4*16(%rsp), %xmm4
	movaps R_XMM+5*16(%rsp), %xmm5
	movaps R_XMM+6*16(%rsp), %xmm6
	movaps R_XMM+7*16(%rsp), %xmm7
	movq R_R10(%rsp), %r10
	movq R_RAX(%rsp), %rax
	movq R_R9(%rsp), %r9
	movq R_R8(%rsp), %r8
	movq R_RCX(%rsp), %rcx
	movq R_RDX(%rsp), %rdx
	movq R_RSI(%rsp), %rsi
	movq R_RDI(%rsp), %rdi
	movq %rbp, %rsp
	.cfi_remember_state
	.cfi_def_cfa_register %rsp
	popq %rbp
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbp
	ret
	.cfi_restore_state
	.endm

/* ftpad_trampoline_entry(ret, parent_ip, regs, kind) */
	.macro CALL_C kind=%r11
	movq R_RIP(%rsp), %rdi
	movq 16(%rbp), %rsi
	movq %rsp, %rdx
	movq \kind, %rcx
	call ftpad_trampoline_entry
	.endm

	.macro FUNC name
	.globl \name
	.hidden \name
	.type \name, @function
	.p2align 4
\name:
	.endm

/* Sites without an ops slot: C finds the site by address. */
FUNC ftpad_trampoline_0
FUNC ftpad_trampoline_1
	PROLOGUE
	movq $0, R_FULL(%rsp)
	CALL_C %r11
	EPILOGUE
	.cfi_endproc
	.size ftpad_trampoline_0, .-ftpad_trampoline_0
	.size ftpad_trampoline_1, .-ftpad_trampoline_1

/* Sites with an ops slot; endbr: 4 when endbr64 precedes the site, kind
 * the stub's (ENDBR 1, SLOT 2). */
	.macro FAST name, endbr, kind
FUNC \name
	PROLOGUE
	movq $0, R_FULL(%rsp)
	movq ftpad_slot@gottpoff(%rip), %rax
	movq %fs:(%rax), %r11     /* this thread's struct ftpad_thread_slot */
	testq %r11, %r11
	jz 2f
	movq (%r11), %rax
	testl $NOT_FAST, %eax     /* busy, or nested in a callback: C decides */
	jnz 2f
	addq $ENTER, (%r11)       /* one instruction: signal-safe */
	cmpb $0xe8, -5(%rdi)      /* still a call: the slot is whole */
	jne 1f
	movq -13-\endbr(%rdi), %rdx /* the slot: our struct ftpad_site */
	movq (%rdx), %rdx         /* its ops */
	testq %rdx, %rdx
	jz 3f
	movq %rdx, R_OPS(%rsp)
	movq T_ERRNO(%r11), %rax  /* errno, kept over the call */
	movl (%rax), %eax
	movl %eax, R_ERRNO(%rsp)
	leaq -5-\endbr(%rdi), %rdi /* ip: the function's entry */
	movq 16(%rbp), %rsi       /* parent_ip */
	movq %rsp, %rcx           /* regs */
	call *OPS_CALL(%rdx)
	movq ftpad_slot@gottpoff(%rip), %rax
	movq %fs:(%rax), %r11
	movq T_ERRNO(%r11), %rax
	movl R_ERRNO(%rsp), %edx
	movl %edx, (%rax)
3:	subq $1, (%r11)
	cmpl $0, T_WAITERS(%r11)  /* a writer sleeps until we are out: grace.c */
	jne 4f
	EPILOGUE
4:	movq %r11, %rdi
	call ftpad_grace_wake
	EPILOGUE
1:	subq $1, (%r11)           /* mid-patch: C takes the site by address */
	cmpl $0, T_WAITERS(%r11)
	je 2f
	movq %r11, %rdi
	call ftpad_grace_wake
2:	CALL_C $\kind
	EPILOGUE
	.cfi_endproc
	.size \name, .-\name
	.endm

	FAST ftpad_trampoline_2, 0, 2
	FAST ftpad_trampoline_3, 4, 3

/* FTPAD_OPS_FL_SAVE_REGS: every register, restored from the frame. */
FUNC ftpad_trampoline_regs
	PROLOGUE flags=1
	movq %r11, R_KIND(%rsp)
	movq -8(%rbp), %rax
	movq %rax, R_FLAGS(%rsp)
	movq %r15, R_R15(%rsp)
	movq %r14, R_R14(%rsp)
	movq %r13, R_R13(%rsp)
	movq %r12, R_R12(%rsp)
	movq %rbx, R_RBX(%rsp)
	movq 0(%rbp), %rax        /* the function's rbp, pushed above */
	movq %rax, R_RBP(%rsp)
	movq $0, R_R11(%rsp)      /* the stub used it for the kind */
	movq $1, R_FULL(%rsp)
	CALL_C R_KIND(%rsp)
	movq R_RBP(%rsp), %rax    /* popped by the epilogue */
	movq %rax, 0(%rbp)
	movq R_R15(%rsp), %r15
	movq R_R14(%rsp), %r14
	movq R_R13(%rsp), %r13
	movq R_R12(%rsp), %r12
	movq R_RBX(%rsp), %rbx
	movq R_R11(%rsp), %r11
	pushq R_FLAGS(%rsp)
	popfq                     /* nothing below changes the flags */
	EPILOGUE
	.cfi_endproc
	.size ftpad_trampoline_regs, .-ftpad_trampoline_regs

	.section .note.GNU-stack, "", @progbits
