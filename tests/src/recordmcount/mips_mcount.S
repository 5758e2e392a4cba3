/* SPDX-License-Identifier: MIT */
/*
 * A trivial _mcount for mips_prog.c that counts its calls.  The -pg call
 * sequence hands it the function's own return address in $at; o32 callers
 * also push 8 bytes in the call's delay slot, which _mcount pops (the
 * kernel's arch/mips/kernel/mcount.S does the same).  It clobbers only $t1
 * and $t2 ($9, $10 in o32, $13, $14 in n64), as the kernel's does.
 */
	.text
	.set	noreorder
	.set	noat
	.globl	_mcount
	.type	_mcount, @function
	.ent	_mcount
_mcount:
#if _MIPS_SIM == _ABIO32
	la	$9, mcount_calls
	lw	$10, 0($9)
	addiu	$10, $10, 1
	sw	$10, 0($9)
	addiu	$sp, $sp, 8		/* the caller's delay-slot push */
#else
	dla	$13, mcount_calls
	ld	$14, 0($13)
	daddiu	$14, $14, 1
	sd	$14, 0($13)
#endif
	jr	$ra			/* back into the function ... */
	move	$ra, $1			/* ... with its own return address again */
	.end	_mcount
	.size	_mcount, . - _mcount

	.data
	.globl	mcount_calls
	.type	mcount_calls, @object
#if _MIPS_SIM == _ABIO32
	.align	2
mcount_calls:
	.word	0
#else
	.align	3
mcount_calls:
	.dword	0
#endif
	.size	mcount_calls, . - mcount_calls
