/* SPDX-License-Identifier: MIT */
/*
 * aarch64, both byte orders: `bl _mcount` (-pg), relocated by
 * R_AARCH64_CALL26 at the bl itself.  Any other relocation against _mcount
 * (an ADRP/ADD taking its address) is not a call site.  Instructions are
 * little-endian in both byte orders, so the bytes compared are the same.
 */
#include <elf.h>
#include <string.h>

#include "../rmc.h"

static bool is_fake_mcount(const struct rmc_reloc *r, uint64_t prev_offset)
{
	(void)prev_offset;
	return r->type != R_AARCH64_CALL26;
}

static bool make_nop(struct rmc_text *text, uint64_t offset)
{
	static const unsigned char bl0[4] = { 0x00, 0x00, 0x00, 0x94 };	/* bl . (unrelocated) */
	static const unsigned char nop[4] = { 0x1f, 0x20, 0x03, 0xd5 };

	if (offset + 4 > text->size || memcmp(text->bytes + offset, bl0, 4) != 0)
		return false;
	memcpy(text->bytes + offset, nop, 4);
	return true;
}

const struct rmc_arch rmc_arch_aarch64 = {
	.name = "aarch64",
	.machine = EM_AARCH64,
	.elfclass = ELFCLASS64,
	.mcount = "_mcount",
	.mcount_adjust = 0,
	.abs_reloc = R_AARCH64_ABS64,
	.none_reloc = R_AARCH64_NONE,
	.is_fake_mcount = is_fake_mcount,
	.make_nop = make_nop,
};
