/* SPDX-License-Identifier: MIT */
/*
 * aarch64, both byte orders (instructions are little-endian in both, so
 * the bytes compared are the same).
 *
 * mcount: `bl _mcount` (-pg), relocated by R_AARCH64_CALL26 at the bl
 * itself.  Any other relocation against _mcount (an ADRP/ADD taking its
 * address) is not a call site.
 *
 * Pads: the NOPs, the `bti c` landing pad, `bl _mcount`, and the ftpad
 * layouts (docs/format.md):
 *      [before][ops slot: 2 NOPs] entry: [bti c] [mov x9, x30 | nop] site: [nop] ...
 * -fpatchable-function-entry=2 gives NOP NOP: the record has no MOV_X9 flag
 * and libftpad writes the MOV into the first NOP itself; the site is the
 * second.
 */
#include <elf.h>
#include <string.h>

#include "../sites.h"
#include "aarch64.h"

/* libftpad's pad, from its one definition (pad/aarch64.h). */
#define INSN_NOP FTPAD_AARCH64_NOP
#define INSN_BTI_C FTPAD_AARCH64_BTI_C
#define INSN_BL_MASK 0xfc000000u
#define INSN_BL 0x94000000u

static void put_insn(unsigned char *p, uint32_t v)
{
	p[0] = v & 0xff, p[1] = v >> 8 & 0xff, p[2] = v >> 16 & 0xff, p[3] = v >> 24;
}

static size_t nop_len(const unsigned char *p, size_t size)
{
	return size >= 4 && ftpad_aarch64_insn(p) == INSN_NOP ? 4 : 0;
}

static size_t landing_pad(const unsigned char *p, size_t size, uint16_t *flag)
{
	*flag = FTPAD_SITE_BTI;
	return size >= 4 && ftpad_aarch64_insn(p) == INSN_BTI_C ? 4 : 0;
}

/* `bl _mcount`: R_AARCH64_CALL26 on the BL itself. */
static bool call_insn(const unsigned char *text, size_t size, const struct rmc_reloc *r,
		      uint64_t *start, uint64_t *len)
{
	if (r->offset % 4 || r->offset + 4 > size ||
	    (ftpad_aarch64_insn(text + r->offset) & INSN_BL_MASK) != INSN_BL)
		return false;
	*start = r->offset;
	*len = 4;
	return true;
}

static bool is_nop_site(const unsigned char *p, size_t size)
{
	return nop_len(p, size) != 0;
}

static void fill(unsigned char *p, size_t len)
{
	for (size_t i = 0; i + 4 <= len; i += 4)
		put_insn(p + i, INSN_NOP);
}

/* Two NOPs or more: the first becomes libftpad's MOV, the second the site. */
static uint64_t make_site(unsigned char *p, size_t len, bool *changed)
{
	(void)p, (void)len;
	*changed = false;
	return FTPAD_AARCH64_SITE_OFFSET;
}

/* The slot is the two NOPs that are already there. */
static void make_slot(unsigned char *p)
{
	fill(p, FTPAD_PAD_SLOT_LEN);
}

/* ---- mcount ---- */

static bool is_fake_mcount(const struct rmc_reloc *r, uint64_t prev_offset)
{
	(void)prev_offset;
	return r->type != R_AARCH64_CALL26;
}

static bool make_nop(struct rmc_text *text, uint64_t offset)
{
	static const unsigned char bl0[4] = { 0x00, 0x00, 0x00, 0x94 };	/* bl . (unrelocated) */

	if (offset + 4 > text->size || memcmp(text->bytes + offset, bl0, 4) != 0)
		return false;
	put_insn(text->bytes + offset, INSN_NOP);
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
	.ftpad_arch = FTPAD_ARCH_AARCH64,
	.unit = FTPAD_AARCH64_UNIT,
	.site_len = FTPAD_AARCH64_SITE_LEN,
	.min_after = FTPAD_AARCH64_MIN_AFTER * FTPAD_AARCH64_UNIT,
	.pc32_reloc = R_AARCH64_PREL32,
	.nop_len = nop_len,
	.landing_pad = landing_pad,
	.call_insn = call_insn,
	.is_nop_site = is_nop_site,
	.fill = fill,
	.make_site = make_site,
	.make_slot = make_slot,
	.pad_check = ftpad_aarch64_pad_check,
	.pad_reason = ftpad_aarch64_pad_reason,
};
