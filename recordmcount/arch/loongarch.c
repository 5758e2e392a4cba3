/* SPDX-License-Identifier: MIT */
/*
 * loongarch, 64- and 32-bit (little-endian only).  UNTESTED against a
 * compiler: there is no loongarch cross compiler on Debian 12.  It follows
 * the LoongArch ELF psABI and what Linux 6.12's scripts/recordmcount does,
 * and the tests only run it on hand-made objects.
 *
 * With the psABI's stack-machine relocations (binutils < 2.40), `bl _mcount`
 * is relocated by R_LARCH_SOP_PUSH_PLT_PCREL and a `la` of _mcount starts
 * with R_LARCH_MARK_LA: those are the call sites, as in Linux; any other
 * relocation against _mcount is not.  The newer R_LARCH_B26 form of `bl` is
 * not a call site for Linux either, so objects from binutils >= 2.40 get no
 * records from either tool (the kernel's DYNAMIC_FTRACE on loongarch uses
 * -fpatchable-function-entry, not recordmcount).  Calls in untraced sections
 * are left alone, as in Linux.
 */
#include <elf.h>

#include "../rmc.h"

static bool is_fake_mcount(const struct rmc_reloc *r, uint64_t prev_offset)
{
	(void)prev_offset;
	return r->type != R_LARCH_MARK_LA && r->type != R_LARCH_SOP_PUSH_PLT_PCREL;
}

const struct rmc_arch rmc_arch_loongarch64 = {
	.name = "loongarch64",
	.machine = EM_LOONGARCH,
	.elfclass = ELFCLASS64,
	.mcount = "_mcount",
	.mcount_adjust = 0,
	.abs_reloc = R_LARCH_64,
	.none_reloc = R_LARCH_NONE,
	.is_fake_mcount = is_fake_mcount,
};

const struct rmc_arch rmc_arch_loongarch32 = {
	.name = "loongarch32",
	.machine = EM_LOONGARCH,
	.elfclass = ELFCLASS32,
	.mcount = "_mcount",
	.mcount_adjust = 0,
	.abs_reloc = R_LARCH_32,
	.none_reloc = R_LARCH_NONE,
	.is_fake_mcount = is_fake_mcount,
};
