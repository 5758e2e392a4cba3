/* SPDX-License-Identifier: MIT */
/*
 * trampoline_aarch64.S - the trampolines every enabled aarch64 site
 * reaches, through `bl` to its module's stub, which branches here with
 * `br x17` and the site kind in x16 (arch/aarch64.c: BTI 1, SLOT 2, REGS 4).
 *
 * On entry:  x30 = site + 4 (return into the traced function)
 *            x9  = parent_ip: the function's `mov x9, x30` saved it
 *            x16 = kind
 *
 * ftpad_trampoline saves every register a callee may receive something in:
 * x0-x7 and q0-q7 (arguments), x8 (the indirect result address of a
 * struct return), x18 (GCC's static chain for nested functions; the
 * callbacks are C and may use it), and x9.  It calls
 * ftpad_trampoline_entry(ret, parent_ip, regs, kind), restores them all
 * and returns to site + 4 (or where a callback redirected the function,
 * regs->pt.pc) with x30 = x9 = parent_ip again, exactly as the function
 * would have run on from its NOP.  x10-x17 are dead at a function's entry,
 * so they need no saving; the flags are not preserved across calls either,
 * but NZCV is kept all the same (two instructions), so that what a function
 * finds in them never depends on the code of the callbacks and of
 * libftpad; sp is always 16-aligned on aarch64.
 *
 * ftpad_trampoline_regs (FTPAD_OPS_FL_SAVE_REGS) saves x0-x30, sp and NZCV
 * into struct ftpad_pt_regs and restores x0-x30 and NZCV from there, so
 * that a callback may change any of them (x16 and x17 excepted: the stub
 * and this code use them).
 *
 * ftpad_trampoline_exit is what every enabled exit site reaches
 * (docs/runtime.md "Exit sites"): the site's `b` goes to a stub of its own
 * in the module's stub page, which saves x29 and x30 (the function's
 * return address) and `bl`s the page's common exit code, which saves x16
 * and x17 (the target of an indirect tail call) and branches here with
 * `br x17`.  So on entry:
 *            x30 = the exit stub + 8, whose literal at x30 + 8 is the site
 *            [sp] = the function's x16, x17; [sp + 16] = its x29, x30
 * It keeps x0-x18 (the return value in x0-x1, or x8's memory; at a tail
 * exit every argument register and the branch target), q0-q7 whole, and
 * calls ftpad_trampoline_at_exit(site, parent_ip = the function's x30,
 * regs) with regs->full = 2 (FTPAD_REGS_EXIT).  It returns to the stub,
 * which restores x29 and x30 and branches to site + 4: an exit callback
 * cannot change where the function returns.  The flags are not kept (dead
 * at a return and at a branch to a function).
 *
 * The frame is a frame record (x29, site + 4) then struct ftpad_regs
 * (internal.h), whose offsets are generated from it (PT_*, REGS_*:
 * arch/asm_offsets_aarch64.c).  The CFI takes x16 as
 * the return column so that an unwinder sees both return addresses: this
 * frame returns to site + 4, and the traced function's x30, its own return
 * address, is the saved x9 (pt.regs[30]).
 */
#include "ftpad_asm_offsets.h"

#define R 16                    /* struct ftpad_regs, after the frame record */
#define R_X(n) (R + PT_X0 + 8 * (n))
#define R_SP (R + PT_SP)
#define R_PC (R + PT_PC)
#define R_PSTATE (R + PT_PSTATE)
#define R_FULL (R + REGS_FULL)
#define R_Q (R + REGS_VEC)
#define FRAME (R + REGS_SIZE)
	.if FRAME % 16
	.error "the frame must stay a multiple of 16 bytes"
	.endif

	.macro ENTRY name
	.globl \name
	.hidden \name
	.type \name, %function
	.p2align 4
\name:
	.cfi_startproc
	.cfi_return_column x16
	.cfi_register x16, x30
	.cfi_register x30, x9
	hint 38 /* bti jc: reached by the stub's br x17 */
	stp x29, x30, [sp, #-FRAME]!
	.cfi_def_cfa_offset FRAME
	.cfi_offset x29, -FRAME
	.cfi_offset x16, -FRAME + 8
	.endm

/* q0-q7 whole, and back with x0-x7. */
	.macro SAVE_Q
	stp q0, q1, [sp, #R_Q]
	stp q2, q3, [sp, #R_Q + 32]
	stp q4, q5, [sp, #R_Q + 64]
	stp q6, q7, [sp, #R_Q + 96]
	.endm

	.macro RESTORE_Q_X0_X7
	ldp q0, q1, [sp, #R_Q]
	ldp q2, q3, [sp, #R_Q + 32]
	ldp q4, q5, [sp, #R_Q + 64]
	ldp q6, q7, [sp, #R_Q + 96]
	ldp x0, x1, [sp, #R_X(0)]
	ldp x2, x3, [sp, #R_X(2)]
	ldp x4, x5, [sp, #R_X(4)]
	ldp x6, x7, [sp, #R_X(6)]
	.endm

/* The argument registers, sp, pc, and x9 as the function's x30. */
	.macro SAVE_ARGS
	stp x0, x1, [sp, #R_X(0)]
	stp x2, x3, [sp, #R_X(2)]
	stp x4, x5, [sp, #R_X(4)]
	stp x6, x7, [sp, #R_X(6)]
	stp x8, x9, [sp, #R_X(8)]
	str x18, [sp, #R_X(18)]
	str x9, [sp, #R_X(30)]
	.cfi_offset x30, R_X(30) - FRAME
	add x17, sp, #FRAME       /* sp at the function's entry */
	stp x17, x30, [sp, #R_SP] /* sp, then pc: site + 4 */
	SAVE_Q
	.endm

	.macro CALL_C
	mov x0, x30               /* ret: site + 4 */
	mov x1, x9                /* parent_ip */
	add x2, sp, #R            /* regs */
	mov x3, x16               /* kind, from the stub */
	bl ftpad_trampoline_entry
	.endm

	.macro RESTORE_ARGS
	RESTORE_Q_X0_X7
	ldr x8, [sp, #R_X(8)]
	ldr x18, [sp, #R_X(18)]
	.endm

/* Back to pc with x30 = pt.regs[30]: as from the site's NOP, or a redirect. */
	.macro RETURN
	ldr x30, [sp, #R_X(30)]
	.cfi_same_value x30
	ldr x16, [sp, #R_PC]
	.cfi_same_value x16
	ldp x29, x17, [sp], #FRAME
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	ret x16
	.cfi_endproc
	.endm

	.text
	ENTRY ftpad_trampoline
	mov x29, sp
	SAVE_ARGS
	str xzr, [sp, #R_FULL]
	mrs x17, nzcv              /* kept, so that the function never sees */
	str x17, [sp, #R_PSTATE]   /* flags that depend on what C code did */
	CALL_C
	ldr x17, [sp, #R_PSTATE]
	msr nzcv, x17
	RESTORE_ARGS
	ldr x9, [sp, #R_X(30)]
	RETURN
	.size ftpad_trampoline, .-ftpad_trampoline

	ENTRY ftpad_trampoline_regs
	SAVE_ARGS
	stp x10, x11, [sp, #R_X(10)]
	stp x12, x13, [sp, #R_X(12)]
	stp x14, x15, [sp, #R_X(14)]
	stp x16, x17, [sp, #R_X(16)]
	stp x19, x20, [sp, #R_X(19)]
	stp x21, x22, [sp, #R_X(21)]
	stp x23, x24, [sp, #R_X(23)]
	stp x25, x26, [sp, #R_X(25)]
	stp x27, x28, [sp, #R_X(27)]
	str x29, [sp, #R_X(29)]
	mov x29, sp
	mrs x17, nzcv
	str x17, [sp, #R_PSTATE]
	mov x17, #1
	str x17, [sp, #R_FULL]
	CALL_C
	ldr x17, [sp, #R_X(29)]   /* the function's x29, from the frame record */
	str x17, [sp]
	ldr x17, [sp, #R_PSTATE]
	msr nzcv, x17
	RESTORE_ARGS
	ldr x9, [sp, #R_X(9)]
	ldp x10, x11, [sp, #R_X(10)]
	ldp x12, x13, [sp, #R_X(12)]
	ldp x14, x15, [sp, #R_X(14)]
	ldp x19, x20, [sp, #R_X(19)]
	ldp x21, x22, [sp, #R_X(21)]
	ldp x23, x24, [sp, #R_X(23)]
	ldp x25, x26, [sp, #R_X(25)]
	ldp x27, x28, [sp, #R_X(27)]
	RETURN
	.size ftpad_trampoline_regs, .-ftpad_trampoline_regs

	.globl ftpad_trampoline_exit
	.hidden ftpad_trampoline_exit
	.type ftpad_trampoline_exit, %function
	.p2align 4
ftpad_trampoline_exit:
	.cfi_startproc
	hint 38 /* bti jc: reached by the exit code's br x17 */
	stp x29, x30, [sp, #-FRAME]!
	.cfi_def_cfa_offset FRAME
	.cfi_offset x29, -FRAME
	.cfi_offset x30, -FRAME + 8
	mov x29, sp
	stp x0, x1, [sp, #R_X(0)]
	stp x2, x3, [sp, #R_X(2)]
	stp x4, x5, [sp, #R_X(4)]
	stp x6, x7, [sp, #R_X(6)]
	stp x8, x9, [sp, #R_X(8)]
	stp x10, x11, [sp, #R_X(10)]
	stp x12, x13, [sp, #R_X(12)]
	stp x14, x15, [sp, #R_X(14)]
	ldp x16, x17, [sp, #FRAME]      /* the function's, saved by the exit code */
	stp x16, x17, [sp, #R_X(16)]
	str x18, [sp, #R_X(18)]
	ldr x9, [sp, #FRAME + 24]       /* its x30: parent_ip */
	str x9, [sp, #R_X(30)]
	add x10, sp, #FRAME + 32        /* sp at the exit site */
	ldr x0, [x30, #8]               /* the site, from the exit stub's literal */
	add x11, x0, #4
	stp x10, x11, [sp, #R_SP]       /* sp, then pc: site + 4 */
	mov x12, #2                     /* FTPAD_REGS_EXIT */
	str x12, [sp, #R_FULL]
	SAVE_Q
	mov x1, x9
	add x2, sp, #R
	bl ftpad_trampoline_at_exit
	RESTORE_Q_X0_X7
	ldp x8, x9, [sp, #R_X(8)]
	ldp x10, x11, [sp, #R_X(10)]
	ldp x12, x13, [sp, #R_X(12)]
	ldp x14, x15, [sp, #R_X(14)]
	ldr x18, [sp, #R_X(18)]
	ldp x29, x30, [sp], #FRAME
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
	ldp x16, x17, [sp], #16
	ret
	.cfi_endproc
	.size ftpad_trampoline_exit, .-ftpad_trampoline_exit

	.section .note.GNU-stack, "", %progbits

#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
/*
 * GNU_PROPERTY_AARCH64_FEATURE_1_AND: this file has its landing pads, so a
 * library built with -mbranch-protection keeps BTI.  PAC is not claimed:
 * the return address saved above is not signed.
 */
	.pushsection .note.gnu.property, "a"
	.p2align 3
	.long 4                   /* name size */
	.long 16                  /* descriptor size */
	.long 5                   /* NT_GNU_PROPERTY_TYPE_0 */
	.asciz "GNU"
	.long 0xc0000000          /* GNU_PROPERTY_AARCH64_FEATURE_1_AND */
	.long 4
	.long 1                   /* BTI */
	.long 0
	.popsection
#endif
