/* SPDX-License-Identifier: MIT */
/*
 * ftpad attach's loader stub, aarch64 (docs/design.md, "Attaching to a
 * running process").  Never run in the tool: the tool copies the bytes from
 * ftpad_attach_stub to ftpad_attach_stub_end into slack bytes of the
 * target's text, writes the thread's pc into ftpad_attach_stub_slot's copy
 * (a record only: the stub never reads it), and points one stopped thread
 * here with sp = x19 = the block (struct attach_block, cli/attach.h;
 * 64-byte aligned, so every call is made with the 16-byte alignment
 * AAPCS64 wants).  Position independent: pc-relative branches
 * only.
 *
 * It loads libftpad and calls ftpad_attach_start, leaves the results in the
 * block, and then restores by itself every register the thread had, so a
 * tool killed at any point after the one PTRACE_SETREGSET never leaves the
 * thread with foreign registers.  A branch back would need a register of
 * its own, so the restore is the kernel's: rt_sigreturn on the signal frame
 * at AB_XSTATE, which the tool filled with x0-x30, sp, pc, pstate and the
 * FP/SIMD registers (cli/arch/attach_aarch64.c).
 *
 * The bytes reach the target through /proc/PID/mem, whose write path
 * (access_remote_vm, copy_to_user_page) cleans the D-cache and invalidates
 * the I-cache for an executable mapping: the thread, let go afterwards,
 * fetches these instructions, not stale ones, with no cache maintenance
 * here.
 */
#include "attach_block.h"

#define SYS_sigaltstack		132
#define SYS_rt_sigprocmask	135
#define SYS_rt_sigreturn	139
#define SYS_sched_yield		124
#define SIG_BLOCK		0
#define RTLD_NOW		2

	.section .rodata.ftpad_attach_stub, "a"
	.globl	ftpad_attach_stub, ftpad_attach_stub_slot, ftpad_attach_stub_end
	.hidden	ftpad_attach_stub, ftpad_attach_stub_slot, ftpad_attach_stub_end
	.balign	16
ftpad_attach_stub:
	/* A landing pad for a guarded page; a nop elsewhere.  The thread
	 * comes here with BTYPE 0 (not by a branch), so it is not needed
	 * today; it costs nothing if the way in ever changes. */
	hint	#34			/* bti c */
	ldr	x9, [x19, #AB_START]
	cbnz	x9, .Lcall_start	/* linked in (libftpad.a): no dlopen */
	ldr	x0, [x19, #AB_PATH]
	mov	x1, #RTLD_NOW
	ldr	x9, [x19, #AB_DLOPEN]
	blr	x9
	cbz	x0, .Lno_dlopen
	ldr	x1, [x19, #AB_SYMBOL]
	ldr	x9, [x19, #AB_DLSYM]
	blr	x9
	cbz	x0, .Lno_dlsym
	mov	x9, x0
.Lcall_start:
	ldr	x0, [x19, #AB_REQUEST]
	blr	x9
	sxtw	x0, w0
	str	x0, [x19, #AB_RESULT]
	b	.Ldone
.Lno_dlsym:
	mov	x0, #AB_RESULT_NO_DLSYM
	str	x0, [x19, #AB_RESULT]
	b	.Lerror_text
.Lno_dlopen:
	mov	x0, #AB_RESULT_NO_DLOPEN
	str	x0, [x19, #AB_RESULT]
.Lerror_text:
	/* dlerror()'s text into the block (zeroed by the tool), so the tool
	 * can say why. */
	ldr	x9, [x19, #AB_DLERROR]
	blr	x9
	cbz	x0, .Ldone
	add	x1, x19, #AB_ERRTEXT
	mov	x2, #(AB_ERRTEXT_SIZE - 1)
1:	ldrb	w3, [x0], #1
	cbz	w3, .Ldone
	strb	w3, [x1], #1
	subs	x2, x2, #1
	b.ne	1b
.Ldone:
	/* The results before the mark: the tool reads them once it sees it. */
	mov	x0, #1
	add	x1, x19, #AB_DONE
	stlr	x0, [x1]
	/* The results live below the thread's stack pointer, which the
	 * thread reuses as soon as it is back: wait until the tool (or its
	 * guardian) says it has read them, a bounded number of rounds so
	 * that a dead tool costs little.  sched_yield, not nanosleep: the
	 * latter resets the kernel's restart record. */
	ldr	x20, [x19, #AB_WAIT_ROUNDS]
2:	ldr	x0, [x19, #AB_ACK]
	cbnz	x0, .Lrestore
	cbz	x20, .Lrestore
	sub	x20, x20, #1
	mov	x8, #SYS_sched_yield
	svc	#0
	yield
	b	2b
.Lrestore:
	/* The frame's signal mask and alternate stack are the thread's as
	 * they are now (what libftpad left, as on x86_64, where the stub
	 * does not touch them), so that rt_sigreturn changes neither. */
	ldr	x21, [x19, #AB_XSTATE]
	mov	x0, #SIG_BLOCK
	mov	x1, #0
	add	x2, x21, #AB_A64_UC_SIGMASK
	mov	x3, #8
	mov	x8, #SYS_rt_sigprocmask
	svc	#0
	mov	x0, #0
	add	x1, x21, #AB_A64_UC_STACK
	mov	x8, #SYS_sigaltstack
	svc	#0
	/* Every register, sp, pc, pstate, FP/SIMD from the frame: the
	 * thread is where it was, with what it had (a call it was in made
	 * again from its svc). */
	mov	sp, x21
	mov	x8, #SYS_rt_sigreturn
	svc	#0
	brk	#0x3ff			/* never: rt_sigreturn does not return here */
	.balign	8
ftpad_attach_stub_slot:
	.quad	0			/* the thread's own pc, written by the tool */
ftpad_attach_stub_end:

	.section .note.GNU-stack, "", @progbits
