/* SPDX-License-Identifier: MIT */
/*
 * ftpad attach's loader stub, x86_64 (docs/design.md, "Attaching to a
 * running process").  Never run in the tool: the tool copies the bytes from
 * ftpad_attach_stub to ftpad_attach_stub_end into slack bytes of the
 * target's text, writes the return address into ftpad_attach_stub_slot's
 * copy, and points one stopped thread here with %rsp = %rbx = the block
 * (struct attach_block, cli/attach.h; 64-byte aligned, below the
 * thread's red zone).  Position independent: relative jumps and one
 * %rip-relative load only.
 *
 * It loads libftpad and calls ftpad_attach_start, leaves the results in the
 * block, and then restores by itself every register the thread had, so a
 * tool killed at any point after the one PTRACE_SETREGS never leaves the
 * thread with foreign registers.
 */
#include "attach_block.h"

	.section .rodata.ftpad_attach_stub, "a"
	.globl	ftpad_attach_stub, ftpad_attach_stub_slot, ftpad_attach_stub_end
	.hidden	ftpad_attach_stub, ftpad_attach_stub_slot, ftpad_attach_stub_end
	.balign	16
ftpad_attach_stub:
	/* %rsp is the block, 64-byte aligned: every call below is made with
	 * the 16-byte alignment the ABI wants. */
	mov	AB_START(%rbx), %rax
	test	%rax, %rax
	jnz	.Lcall_start		/* linked in (libftpad.a): no dlopen */
	mov	AB_PATH(%rbx), %rdi
	mov	$2, %esi		/* RTLD_NOW */
	call	*AB_DLOPEN(%rbx)
	test	%rax, %rax
	jz	.Lno_dlopen
	mov	%rax, %rdi
	mov	AB_SYMBOL(%rbx), %rsi
	call	*AB_DLSYM(%rbx)
	test	%rax, %rax
	jz	.Lno_dlsym
.Lcall_start:
	mov	AB_REQUEST(%rbx), %rdi
	call	*%rax
	movslq	%eax, %rax
	mov	%rax, AB_RESULT(%rbx)
	jmp	.Ldone
.Lno_dlsym:
	movq	$AB_RESULT_NO_DLSYM, AB_RESULT(%rbx)
	jmp	.Lerror_text
.Lno_dlopen:
	movq	$AB_RESULT_NO_DLOPEN, AB_RESULT(%rbx)
.Lerror_text:
	/* dlerror()'s text into the block (zeroed by the tool), so the tool
	 * can say why. */
	call	*AB_DLERROR(%rbx)
	test	%rax, %rax
	jz	.Ldone
	lea	AB_ERRTEXT(%rbx), %rdi
	mov	$(AB_ERRTEXT_SIZE - 1), %ecx
1:	movzbl	(%rax), %edx
	test	%edx, %edx
	jz	.Ldone
	mov	%dl, (%rdi)
	inc	%rax
	inc	%rdi
	dec	%ecx
	jnz	1b
.Ldone:
	movq	$1, AB_DONE(%rbx)
	/* The results live below the thread's stack pointer, which the
	 * thread reuses as soon as it is back: wait until the tool (or its
	 * guardian) says it has read them, a bounded number of rounds so
	 * that a dead tool costs little.  sched_yield, not nanosleep: the
	 * latter resets the kernel's restart record, which a thread stopped
	 * in nanosleep needs for its restart_syscall. */
	mov	AB_WAIT_ROUNDS(%rbx), %r12
2:	cmpq	$0, AB_ACK(%rbx)
	jne	.Lrestore
	test	%r12, %r12
	jz	.Lrestore
	dec	%r12
	mov	$24, %eax		/* sched_yield() */
	syscall
	pause
	jmp	2b
.Lrestore:
	mov	AB_XSTATE(%rbx), %rcx
	mov	AB_XFEATURES(%rbx), %eax
	mov	AB_XFEATURES + 4(%rbx), %edx
	xrstor64 (%rcx)
	pushq	AB_REGS + AB_RFLAGS(%rbx)
	popfq				/* no instruction below changes a flag */
	mov	AB_REGS + AB_RAX(%rbx), %rax
	mov	AB_REGS + AB_RCX(%rbx), %rcx
	mov	AB_REGS + AB_RDX(%rbx), %rdx
	mov	AB_REGS + AB_RSI(%rbx), %rsi
	mov	AB_REGS + AB_RDI(%rbx), %rdi
	mov	AB_REGS + AB_RBP(%rbx), %rbp
	mov	AB_REGS + AB_R8(%rbx), %r8
	mov	AB_REGS + AB_R9(%rbx), %r9
	mov	AB_REGS + AB_R10(%rbx), %r10
	mov	AB_REGS + AB_R11(%rbx), %r11
	mov	AB_REGS + AB_R12(%rbx), %r12
	mov	AB_REGS + AB_R13(%rbx), %r13
	mov	AB_REGS + AB_R14(%rbx), %r14
	mov	AB_REGS + AB_R15(%rbx), %r15
	mov	AB_REGS + AB_RSP(%rbx), %rsp
	mov	AB_REGS + AB_RBX(%rbx), %rbx
	jmp	*ftpad_attach_stub_slot(%rip)
	.balign	8
ftpad_attach_stub_slot:
	.quad	0			/* the thread's own %rip, written by the tool */
ftpad_attach_stub_end:

	.section .note.GNU-stack, "", @progbits
