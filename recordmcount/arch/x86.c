/* SPDX-License-Identifier: MIT */
/*
 * x86_64 and i386: `call mcount` or `call __fentry__` (-mfentry), e8 rel32.
 * The relocation sits on the rel32, one byte after the call (adjust -1).
 * In sections ftrace does not trace, an unrelocated `e8 00 00 00 00` becomes
 * the 5-byte NOP the kernel itself uses for that width.
 */
#include <elf.h>
#include <string.h>

#include "../rmc.h"

static const unsigned char nop5_x86_64[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };	/* nopl 0(%rax,%rax,1) */
static const unsigned char nop5_i386[5] = { 0x3e, 0x8d, 0x74, 0x26, 0x00 };	/* ds lea 0(%esi),%esi */

/*
 * Only a call whose rel32 is still zero is ours to rewrite.  An i386 REL
 * object keeps its addend (-4) in the rel32, so, as in Linux, its calls are
 * left alone.
 */
static bool replace_call(struct rmc_text *text, uint64_t offset, const unsigned char nop[5])
{
	static const unsigned char call0[5] = { 0xe8, 0, 0, 0, 0 };

	if (offset < 1 || offset + 4 > text->size || memcmp(text->bytes + offset - 1, call0, 5) != 0)
		return false;
	memcpy(text->bytes + offset - 1, nop, 5);
	return true;
}

static bool make_nop_x86_64(struct rmc_text *text, uint64_t offset)
{
	return replace_call(text, offset, nop5_x86_64);
}

static bool make_nop_i386(struct rmc_text *text, uint64_t offset)
{
	return replace_call(text, offset, nop5_i386);
}

const struct rmc_arch rmc_arch_x86_64 = {
	.name = "x86_64",
	.machine = EM_X86_64,
	.elfclass = ELFCLASS64,
	.mcount = "mcount",
	.mcount_adjust = -1,
	.abs_reloc = R_X86_64_64,
	.none_reloc = R_X86_64_NONE,
	.make_nop = make_nop_x86_64,
};

const struct rmc_arch rmc_arch_i386 = {
	.name = "i386",
	.machine = EM_386,
	.elfclass = ELFCLASS32,
	.mcount = "mcount",
	.mcount_adjust = -1,
	.abs_reloc = R_386_32,
	.none_reloc = R_386_NONE,
	.make_nop = make_nop_i386,
};
