/* SPDX-License-Identifier: MIT */
/*
 * asm_offsets_x86_64.c - the numbers trampoline_x86_64.S takes from C's
 * structs: its frame (struct ftpad_regs), the thread slot, the ops, and
 * the fast recording path's site word, thread and chunk (record.h).
 * Compiled with -S only (asm_offsets.h); never linked.
 */
#include "../internal.h"
#include "../record.h"
#include "asm_offsets.h"

/* The stubs' sites are read as (site): their ops first. */
_Static_assert(offsetof(struct ftpad_site, ops) == 0, "trampoline_x86_64.S reads site->ops");

void ftpad_asm_offsets(void);

void ftpad_asm_offsets(void)
{
	/* struct ftpad_regs: the trampolines' frame */
	ASM_OFFSET(R_R15, offsetof(struct ftpad_regs, pt.r15));
	ASM_OFFSET(R_R14, offsetof(struct ftpad_regs, pt.r14));
	ASM_OFFSET(R_R13, offsetof(struct ftpad_regs, pt.r13));
	ASM_OFFSET(R_R12, offsetof(struct ftpad_regs, pt.r12));
	ASM_OFFSET(R_RBP, offsetof(struct ftpad_regs, pt.rbp));
	ASM_OFFSET(R_RBX, offsetof(struct ftpad_regs, pt.rbx));
	ASM_OFFSET(R_R11, offsetof(struct ftpad_regs, pt.r11));
	ASM_OFFSET(R_R10, offsetof(struct ftpad_regs, pt.r10));
	ASM_OFFSET(R_R9, offsetof(struct ftpad_regs, pt.r9));
	ASM_OFFSET(R_R8, offsetof(struct ftpad_regs, pt.r8));
	ASM_OFFSET(R_RAX, offsetof(struct ftpad_regs, pt.rax));
	ASM_OFFSET(R_RCX, offsetof(struct ftpad_regs, pt.rcx));
	ASM_OFFSET(R_RDX, offsetof(struct ftpad_regs, pt.rdx));
	ASM_OFFSET(R_RSI, offsetof(struct ftpad_regs, pt.rsi));
	ASM_OFFSET(R_RDI, offsetof(struct ftpad_regs, pt.rdi));
	ASM_OFFSET(R_RIP, offsetof(struct ftpad_regs, pt.rip));
	ASM_OFFSET(R_FLAGS, offsetof(struct ftpad_regs, pt.eflags));
	ASM_OFFSET(R_RSP, offsetof(struct ftpad_regs, pt.rsp));
	ASM_OFFSET(R_OPS, offsetof(struct ftpad_regs, ops));
	ASM_OFFSET(R_FULL, offsetof(struct ftpad_regs, full));
	ASM_OFFSET(R_VEC, offsetof(struct ftpad_regs, vec));
	ASM_OFFSET(VEC_STRIDE, ASM_MEMBER_SIZE(struct ftpad_regs, vec[0]));
	ASM_OFFSET(REGS_SIZE, sizeof(struct ftpad_regs));

	/* struct ftpad_thread_slot, struct ftpad_ops, the slot word */
	ASM_OFFSET(T_ERRNO, offsetof(struct ftpad_thread_slot, errno_ptr));
	ASM_OFFSET(T_WAITERS, offsetof(struct ftpad_thread_slot, waiters));
	ASM_OFFSET(OPS_CALL, offsetof(struct ftpad_ops, internal.call));
	ASM_OFFSET(ENTER, FTPAD_GEN_ONE + 1);
	ASM_OFFSET(NOT_FAST, FTPAD_BUSY_MASK | FTPAD_DEPTH_MASK);

	/* The fast recording path: struct ftpad_site, struct rthread and
	 * struct chunk (record.h) */
	ASM_OFFSET(SITE_WHAT, offsetof(struct ftpad_site, trace_what));
	ASM_OFFSET(RT_CUR, offsetof(struct rthread, cur));
	ASM_OFFSET(RT_BUSY, offsetof(struct rthread, busy));
	ASM_OFFSET(RT_FAST, offsetof(struct rthread, fast_events));
	ASM_OFFSET(RT_PENDING, offsetof(struct rthread, pending));
	ASM_OFFSET(CH_N, offsetof(struct chunk, n));
	ASM_OFFSET(CH_EV, offsetof(struct chunk, ev));
}
