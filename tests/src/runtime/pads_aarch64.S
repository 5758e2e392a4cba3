/* SPDX-License-Identifier: MIT */
/*
 * pads_aarch64.S - aarch64 functions with hand-made pads and records, so
 * that the runtime is tested layout by layout independently of the
 * compilers: the user layout (the compiler's `mov x9, x30`, flag MOV_X9)
 * and the kernel layout (NOP NOP, no MOV_X9: what -fpatchable-function-entry
 * =2 or =4,2 and the clang pass give; the runtime writes the MOV), with and
 * without bti c and an ops slot (docs/format.md).
 *
 *         [ops slot: 2 NOPs, 8-aligned]
 * func:   [bti c?] [mov x9, x30 | nop] [site: nop] body...
 */
#define FLAG_BTI 2
#define FLAG_MOV_X9 4
#define FLAG_KERNEL 8

/* PAD name, bti, slot, mov, kernel: a padded entry and its record
 * (align=0: where the code is, not 8-aligned, for slot=0 only). */
	.macro PAD name, bti=0, slot=1, mov=1, kernel=0, align=1
	.text
	.if \align
	.p2align 3
	.endif
	.if \slot
.L\name\()_slot:
	nop
	nop
	.endif
	.globl \name
	.type \name, %function
\name:
.L\name:
	.if \bti
	hint 34 /* bti c */
	.endif
	.if \mov
	mov x9, x30
	.else
	nop
	.endif
.L\name\()_site:
	nop

	.pushsection __ftpad_sites, "a", %progbits
	.p2align 3
.L\name\()_rec:
	.long .L\name - .L\name\()_rec
	.long .L\name\()_site - (.L\name\()_rec + 4)
	.if \slot
	.long .L\name\()_slot - (.L\name\()_rec + 8)
	.else
	.long 0
	.endif
	.long .L\name\()_str - (.L\name\()_rec + 12)
	.byte 1, 2, 0, 2, 4, 0   /* version, arch aarch64, before, after, site_len */
	.short (\bti * FLAG_BTI) | (\mov * FLAG_MOV_X9) | (\kernel * FLAG_KERNEL)
	.popsection
	.pushsection __ftpad_names, "a", %progbits
.L\name\()_str:
	.asciz "\name"
	.popsection
	.endm

	.macro END name
	.size \name, . - \name
	.endm

/* long add1(long x): x + 1, the user layout */
	PAD add1
	add x0, x0, #1
	ret
	END add1

/* long kadd2(long x): x + 2, NOP NOP with an ops slot (=4,2, CALL_OPS) */
	PAD kadd2, mov=0, kernel=1
	add x0, x0, #2
	ret
	END kadd2

/* long kadd3_bti(long x): x + 3, bti c then NOP NOP, ops slot */
	PAD kadd3_bti, bti=1, mov=0, kernel=1
	add x0, x0, #3
	ret
	END kadd3_bti

/* long kdouble(long x): 2x, NOP NOP without a slot (=2); no KERNEL flag,
 * as the clang pass's user layout has it */
	PAD kdouble, slot=0, mov=0
	add x0, x0, x0
	ret
	END kdouble

/* long ksum10(long a..j): a + 2b + ... + 10j, two of them on the stack */
	PAD ksum10, mov=0, kernel=1
	mov x10, x0
	add x10, x10, x1, lsl #1
	mov x11, #3
	madd x10, x2, x11, x10
	add x10, x10, x3, lsl #2
	mov x11, #5
	madd x10, x4, x11, x10
	mov x11, #6
	madd x10, x5, x11, x10
	mov x11, #7
	madd x10, x6, x11, x10
	add x10, x10, x7, lsl #3
	ldp x12, x13, [sp]
	mov x11, #9
	madd x10, x12, x11, x10
	mov x11, #10
	madd x0, x13, x11, x10
	ret
	END ksum10

/* long kcalls(long x): kadd2(kadd2(x)), a traced caller of a traced callee */
	PAD kcalls, mov=0, kernel=1
	stp x29, x30, [sp, #-16]!
	mov x29, sp
	bl kadd2
	bl kadd2
	ldp x29, x30, [sp], #16
	ret
	END kcalls

/*
 * long kf0(long x) .. kf63(long x): x + n, 64 NOP NOP pads with an ops
 * slot, for the stress test that writes their MOVs while threads run
 * them, a few at a time; kf_table holds their addresses in order.
 */
	.macro KF n
	PAD kf\n, mov=0, kernel=1
	add x0, x0, #\n
	ret
	END kf\n
	.endm

	.irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	KF \n
	.endr
	.irp n, 32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63
	KF \n
	.endr

	.section .data.rel.ro, "aw"
	.p2align 3
	.globl kf_table
	.type kf_table, %object
kf_table:
	.irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
	.quad kf\n
	.endr
	.irp n, 32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63
	.quad kf\n
	.endr
	.size kf_table, . - kf_table

/*
 * long kpage(long x): x + 2, a NOP NOP pad (no slot) whose first NOP is the
 * last word of a page and whose site is the first word of the next, and
 * kpage_spin, 500 adds to x10 that fall through into it.  qemu-user
 * translates at most 512 instructions into one block, never across a page,
 * and takes signals only where a block starts: a thread looping over
 * kpage_spin spends nearly all its time in the block that ends with
 * kpage's first NOP, so a signal almost always finds it at kpage's site,
 * right between the two NOPs (tests/runtime/test_runtime_aarch64.py, "between").
 */
	.text
	.p2align 12
	.skip 4096 - 4 - 500 * 4
	.globl kpage_spin
	.type kpage_spin, %function
kpage_spin:
	.rept 500
	add x10, x10, #1
	.endr
	.size kpage_spin, . - kpage_spin
	PAD kpage, slot=0, mov=0, kernel=1, align=0
	add x0, x0, #2
	ret
	END kpage

/*
 * void spin_victim(volatile int *stop, volatile long *result): x9 =
 * 0x5a5a5a5a5a5a5a5a, then until *stop: *result = kpage_spin(40), that
 * is kpage(40).  Nothing here or in kpage writes x9, so a thread caught
 * between kpage's NOPs holds the poison in x9 unless something sets it;
 * spin_victim_ret is the return address kpage's callers have.
 */
	.text
	.p2align 2
	.globl spin_victim
	.type spin_victim, %function
spin_victim:
	stp x29, x30, [sp, #-32]!
	mov x29, sp
	stp x19, x20, [sp, #16]
	mov x19, x0
	mov x20, x1
	movz x9, #0x5a5a
	movk x9, #0x5a5a, lsl #16
	movk x9, #0x5a5a, lsl #32
	movk x9, #0x5a5a, lsl #48
1:	mov x0, #40
	bl kpage_spin
	.globl spin_victim_ret
spin_victim_ret:
	str x0, [x20]
	ldr w1, [x19]
	cbz w1, 1b
	ldp x19, x20, [sp, #16]
	ldp x29, x30, [sp], #32
	ret
	.size spin_victim, . - spin_victim

/* long regs_probe(void): the carry flag at its entry, 0 or 1 */
	PAD regs_probe
	cset x0, cs
	ret
	END regs_probe

/*
 * void call_regs_probe(unsigned long out[12]): not padded.  Sets x19-x28
 * to 0x19..0x28 repeated and the carry flag, calls regs_probe, and stores
 * x19-x28, x0 and x29 as they come back, so a callback of an ops with
 * FTPAD_OPS_FL_SAVE_REGS can be seen to read and change them.
 */
	.text
	.globl call_regs_probe
	.type call_regs_probe, %function
	.p2align 2
call_regs_probe:
	stp x29, x30, [sp, #-112]!
	mov x29, sp
	stp x19, x20, [sp, #16]
	stp x21, x22, [sp, #32]
	stp x23, x24, [sp, #48]
	stp x25, x26, [sp, #64]
	stp x27, x28, [sp, #80]
	str x0, [sp, #96]
	mov x19, #0x1919
	mov x20, #0x2020
	mov x21, #0x2121
	mov x22, #0x2222
	mov x23, #0x2323
	mov x24, #0x2424
	mov x25, #0x2525
	mov x26, #0x2626
	mov x27, #0x2727
	mov x28, #0x2828
	mov x0, #0x20000000 /* C */
	msr nzcv, x0
	bl regs_probe
	ldr x1, [sp, #96]
	stp x19, x20, [x1]
	stp x21, x22, [x1, #16]
	stp x23, x24, [x1, #32]
	stp x25, x26, [x1, #48]
	stp x27, x28, [x1, #64]
	stp x0, x29, [x1, #80]
	ldp x19, x20, [sp, #16]
	ldp x21, x22, [sp, #32]
	ldp x23, x24, [sp, #48]
	ldp x25, x26, [sp, #64]
	ldp x27, x28, [sp, #80]
	ldp x29, x30, [sp], #112
	ret
	.size call_regs_probe, . - call_regs_probe

	.section .note.GNU-stack, "", %progbits
