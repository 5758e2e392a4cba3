/* SPDX-License-Identifier: MIT */
/*
 * asm_offsets_aarch64.c - the numbers trampoline_aarch64.S takes from C's
 * structs: its frame, struct ftpad_regs.  Compiled with -S only
 * (asm_offsets.h); never linked.
 */
#include "../internal.h"
#include "asm_offsets.h"

void ftpad_asm_offsets(void);

void ftpad_asm_offsets(void)
{
	ASM_OFFSET(PT_X0, offsetof(struct ftpad_regs, pt.regs));
	ASM_OFFSET(PT_SP, offsetof(struct ftpad_regs, pt.sp));
	ASM_OFFSET(PT_PC, offsetof(struct ftpad_regs, pt.pc));
	ASM_OFFSET(PT_PSTATE, offsetof(struct ftpad_regs, pt.pstate));
	ASM_OFFSET(REGS_FULL, offsetof(struct ftpad_regs, full));
	ASM_OFFSET(REGS_VEC, offsetof(struct ftpad_regs, vec));
	ASM_OFFSET(REGS_SIZE, sizeof(struct ftpad_regs));
}
