/* SPDX-License-Identifier: MIT */
/*
 * powerpc (32-bit, big-endian) and powerpc64 (big-endian ELFv1 and
 * little-endian ELFv2; one e_machine for both).
 *
 * -pg gives `bl _mcount` (R_PPC_REL24 / R_PPC64_REL24, or R_PPC_PLTREL24
 * under -fPIC) on the bl itself, so the record is the relocation's offset.
 * On ELFv1 the bl is followed by a `nop` the linker may turn into the TOC
 * restore `ld r2,40(r1)`; with -mcall-aixdesc (Linux's ELFv1 flags) the call
 * names the dot symbol `._mcount`, whose leading '.' the generic name match
 * ignores, as Linux does.  On ELFv2 the function symbols carry a local
 * entry point in st_other; records are section-relative, so it does not
 * matter to them.
 *
 * No fixups: Linux leaves calls in untraced sections alone on powerpc, and
 * the kernel itself turns each recorded `bl` into a `nop` at boot (or, on
 * ELFv1 modules, into `b +8` over the TOC restore).
 */
#include <elf.h>

#include "../rmc.h"

const struct rmc_arch rmc_arch_powerpc = {
	.name = "powerpc",
	.machine = EM_PPC,
	.elfclass = ELFCLASS32,
	.mcount = "_mcount",
	.mcount_adjust = 0,
	.abs_reloc = R_PPC_ADDR32,
	.none_reloc = R_PPC_NONE,
};

const struct rmc_arch rmc_arch_powerpc64 = {
	.name = "powerpc64",
	.machine = EM_PPC64,
	.elfclass = ELFCLASS64,
	.mcount = "_mcount",
	.mcount_adjust = 0,
	.abs_reloc = R_PPC64_ADDR64,
	.none_reloc = R_PPC64_NONE,
};
