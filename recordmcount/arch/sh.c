/* SPDX-License-Identifier: MIT */
/*
 * sh (SuperH, 32-bit, either byte order): -pg loads the address of
 * `mcount` (no underscore on sh) from a literal pool word right after the
 * call: `mov.l 1f,r1; ...; jmp @r1 (or jsr); ...; 1: .long mcount`.  The
 * only relocation against mcount is that word's R_SH_DIR32, so the record,
 * with adjust 0 as in Linux, is the literal's address.  That is what the
 * kernel's sh ftrace wants: it disables a site by rewriting the literal to
 * point past the call, never by touching an instruction.
 *
 * No fixups: Linux leaves calls in untraced sections alone.
 */
#include <elf.h>

#include "../rmc.h"

const struct rmc_arch rmc_arch_sh = {
	.name = "sh",
	.machine = EM_SH,
	.elfclass = ELFCLASS32,
	.mcount = "mcount",
	.mcount_adjust = 0,
	.abs_reloc = R_SH_DIR32,
	.none_reloc = R_SH_NONE,
};
