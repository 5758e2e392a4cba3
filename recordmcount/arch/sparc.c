/* SPDX-License-Identifier: MIT */
/*
 * sparc64 (EM_SPARCV9, 64-bit, big-endian): -pg gives `call _mcount`
 * (R_SPARC_WDISP30 on the call) right after the `save`, with a `nop` or an
 * instruction of the function in its delay slot.  The record is the call,
 * adjust 0.
 *
 * 32-bit sparc (EM_SPARC, EM_SPARC32PLUS) is not served, as in Linux.
 * No fixups: Linux leaves calls in untraced sections alone; the kernel
 * itself writes its `nop` (0x01000000) over each recorded call.
 */
#include <elf.h>

#include "../rmc.h"

const struct rmc_arch rmc_arch_sparc64 = {
	.name = "sparc64",
	.machine = EM_SPARCV9,
	.elfclass = ELFCLASS64,
	.mcount = "_mcount",
	.mcount_adjust = 0,
	.abs_reloc = R_SPARC_64,
	.none_reloc = R_SPARC_NONE,
};
