/* SPDX-License-Identifier: MIT */
/*
 * trampoline_aarch64.S - the one trampoline every enabled aarch64 site
 * reaches, through `bl` to its module's stub, which branches here with
 * `br x17` and the site kind in x16.
 *
 * On entry:  x30 = site + 4 (return into the traced function)
 *            x9  = parent_ip: the function's `mov x9, x30` saved it
 *            x16 = kind (arch/aarch64.c)
 * It saves every register a callee may receive something in: x0-x7 and
 * q0-q7 (arguments), x8 (the indirect result address of a struct return),
 * x18 (GCC's static chain for nested functions; the callbacks are C and may
 * use it), and x9.  It calls ftpad_trampoline_entry(ret, parent_ip, regs,
 * kind), restores them all and returns to site + 4 (or where a callback
 * redirected the function, regs->ip) with x30 = x9 again, exactly as the
 * function would have run on from its NOP.  x10-x17 are dead
 * at a function's entry and the flags are not preserved across calls, so
 * they need no saving; sp is always 16-aligned on aarch64.
 *
 * The frame is a frame record (x29, site + 4) then struct ftpad_regs
 * (arch/aarch64.c); keep the two in step.  The CFI takes x16 as the return
 * column so that an unwinder sees both return addresses: this frame returns
 * to site + 4, and the traced function's x30, its own return address, is
 * the saved x9.
 */
#define R 16           /* struct ftpad_regs, after the frame record */
#define R_X0 (R + 0)
#define R_X8 (R + 64)  /* x8, then x18 */
#define R_SP (R + 80)  /* sp at entry, then parent_ip */
#define R_PARENT (R + 88)
#define R_IP (R + 96)  /* then a pad */
#define R_Q (R + 112)
#define FRAME (R + 240) /* a multiple of 16 */

	.text
	.globl ftpad_trampoline
	.hidden ftpad_trampoline
	.type ftpad_trampoline, %function
	.p2align 4
ftpad_trampoline:
	.cfi_startproc
	.cfi_return_column x16
	.cfi_register x16, x30
	.cfi_register x30, x9
	hint 38 /* bti jc: reached by the stub's br x17 */
	stp x29, x30, [sp, #-FRAME]!
	.cfi_def_cfa_offset FRAME
	.cfi_offset x29, -FRAME
	.cfi_offset x16, -FRAME + 8
	mov x29, sp
	stp x0, x1, [sp, #R_X0]
	stp x2, x3, [sp, #R_X0 + 16]
	stp x4, x5, [sp, #R_X0 + 32]
	stp x6, x7, [sp, #R_X0 + 48]
	stp x8, x18, [sp, #R_X8]
	add x17, sp, #FRAME       /* sp at the function's entry */
	stp x17, x9, [sp, #R_SP]
	.cfi_offset x30, R_PARENT - FRAME
	str x30, [sp, #R_IP]
	stp q0, q1, [sp, #R_Q]
	stp q2, q3, [sp, #R_Q + 32]
	stp q4, q5, [sp, #R_Q + 64]
	stp q6, q7, [sp, #R_Q + 96]

	mov x0, x30               /* ret: site + 4 */
	mov x1, x9                /* parent_ip */
	add x2, sp, #R            /* regs */
	mov x3, x16               /* kind, from the stub */
	bl ftpad_trampoline_entry

	ldp q0, q1, [sp, #R_Q]
	ldp q2, q3, [sp, #R_Q + 32]
	ldp q4, q5, [sp, #R_Q + 64]
	ldp q6, q7, [sp, #R_Q + 96]
	ldp x0, x1, [sp, #R_X0]
	ldp x2, x3, [sp, #R_X0 + 16]
	ldp x4, x5, [sp, #R_X0 + 32]
	ldp x6, x7, [sp, #R_X0 + 48]
	ldp x8, x18, [sp, #R_X8]
	ldr x9, [sp, #R_PARENT]
	.cfi_register x30, x9
	ldr x16, [sp, #R_IP]      /* a callback may have redirected the function */
	.cfi_same_value x16
	ldp x29, x17, [sp], #FRAME
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	mov x30, x9
	.cfi_same_value x30
	ret x16
	.cfi_endproc
	.size ftpad_trampoline, .-ftpad_trampoline

	.section .note.GNU-stack, "", %progbits

#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
/*
 * GNU_PROPERTY_AARCH64_FEATURE_1_AND: this file has its landing pad, so a
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
