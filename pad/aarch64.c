/* SPDX-License-Identifier: MIT */
/*
 * aarch64.c - whether an aarch64 record's pad is one libftpad can patch
 * (aarch64.h).  The rule the runtime applies before patching and
 * recordmcount-ng --check applies to objects.
 */
#include "aarch64.h"

/* Whether the instruction at @at, inside @size, is @insn. */
static bool holds(const uint8_t *bytes, size_t size, uint64_t at, uint32_t insn)
{
	return at <= size && size - at >= 4 && ftpad_aarch64_insn(bytes + at) == insn;
}

static bool inside(const struct ftpad_pad_site *rec, size_t size)
{
	return rec->entry < size && rec->site <= size && rec->site_len <= size - rec->site &&
	       (!rec->has_ops || (rec->ops <= size && size - rec->ops >= FTPAD_PAD_SLOT_LEN));
}

/*
 * The instruction before the site: the compiler's MOV (FTPAD_SITE_MOV_X9),
 * or a NOP for libftpad to write it into, or the MOV libftpad wrote.
 */
static enum ftpad_pad_verdict check_mov(const struct ftpad_pad_site *rec, const uint8_t *bytes,
					size_t size, uint64_t mov)
{
	if (rec->flags & FTPAD_SITE_MOV_X9)
		return holds(bytes, size, mov, FTPAD_AARCH64_MOV_X9_X30) ? FTPAD_PAD_OK
									 : FTPAD_PAD_NO_MOV;
	if (holds(bytes, size, mov, FTPAD_AARCH64_MOV_X9_X30))
		return FTPAD_PAD_PREPARED;
	return holds(bytes, size, mov, FTPAD_AARCH64_NOP) ? FTPAD_PAD_OK : FTPAD_PAD_NO_MOV_ROOM;
}

/* The site NOP, then the ops slot, which entry and exit sites share. */
static enum ftpad_pad_verdict check_site_and_slot(const struct ftpad_pad_site *rec,
						  const uint8_t *bytes, size_t size)
{
	if (!holds(bytes, size, rec->site, FTPAD_AARCH64_NOP))
		return FTPAD_PAD_SITE_NOT_NOP;
	if (rec->has_ops && rec->ops % FTPAD_PAD_SLOT_LEN)
		return FTPAD_PAD_SLOT_MISALIGNED;
	if (rec->has_ops && (!holds(bytes, size, rec->ops, FTPAD_AARCH64_NOP) ||
			     !holds(bytes, size, rec->ops + 4, FTPAD_AARCH64_NOP)))
		return FTPAD_PAD_SLOT_NOT_NOP;
	return FTPAD_PAD_OK;
}

/*
 * An exit site: one NOP, which becomes a B (not a BL: x30 still holds the
 * return address there) to a stub of its own; docs/format.md.
 */
static enum ftpad_pad_verdict check_exit(const struct ftpad_pad_site *rec, const uint8_t *bytes,
					 size_t size)
{
	if (rec->flags)
		return FTPAD_PAD_EXIT_FLAG;
	if (rec->entry % 4 || rec->site % 4)
		return FTPAD_PAD_MISALIGNED;
	return check_site_and_slot(rec, bytes, size);
}

enum ftpad_pad_verdict ftpad_aarch64_pad_check(const struct ftpad_pad_site *rec,
					       const uint8_t *bytes, size_t size)
{
	uint64_t mov = rec->entry;
	enum ftpad_pad_verdict before_site, v;

	if (rec->site_len != FTPAD_AARCH64_SITE_LEN)
		return FTPAD_PAD_SITE_LEN;
	if (!inside(rec, size))
		return FTPAD_PAD_OUTSIDE;
	if (rec->kind > FTPAD_SITE_KIND_TAIL_EXIT)
		return FTPAD_PAD_UNKNOWN_KIND;
	if (rec->kind != FTPAD_SITE_KIND_ENTRY)
		return check_exit(rec, bytes, size);
	if (rec->flags & FTPAD_SITE_ENDBR)
		return FTPAD_PAD_FOREIGN_FLAG;
	if (rec->entry % 4 || rec->site % 4)
		return FTPAD_PAD_MISALIGNED;
	if (rec->flags & FTPAD_SITE_BTI) {
		if (!holds(bytes, size, rec->entry, FTPAD_AARCH64_BTI_C))
			return FTPAD_PAD_NO_LANDING_PAD;
		mov += 4;
	}
	/* The trampoline derives the ip from the return address: it must be exact. */
	if (rec->site != mov + FTPAD_AARCH64_SITE_OFFSET)
		return FTPAD_PAD_SITE_PLACE;
	before_site = check_mov(rec, bytes, size, mov);
	if (before_site != FTPAD_PAD_OK && before_site != FTPAD_PAD_PREPARED)
		return before_site;
	v = check_site_and_slot(rec, bytes, size);
	return v != FTPAD_PAD_OK ? v : before_site;
}

const char *ftpad_aarch64_pad_reason(enum ftpad_pad_verdict v)
{
	static const char *const reasons[FTPAD_PAD_NVERDICTS] = {
		[FTPAD_PAD_PREPARED] =
			"without MOV_X9 a NOP must precede the site, for libftpad's mov x9, x30",
		[FTPAD_PAD_OUTSIDE] = "the entry, the site or the ops slot lies outside the code",
		[FTPAD_PAD_SITE_LEN] = "site_len is not 4",
		[FTPAD_PAD_UNKNOWN_KIND] = "kind is not entry (0), exit (1) or tail exit (2)",
		[FTPAD_PAD_EXIT_FLAG] = "an exit site's record has flags",
		[FTPAD_PAD_FOREIGN_FLAG] = "flags has ENDBR on aarch64",
		[FTPAD_PAD_MISALIGNED] = "the entry or the site is not 4-aligned",
		[FTPAD_PAD_NO_LANDING_PAD] = "flags has BTI but the entry is not bti c",
		[FTPAD_PAD_SITE_PLACE] =
			"the site is not the second instruction after the entry (or its bti c)",
		[FTPAD_PAD_NO_MOV] = "flags has MOV_X9 but mov x9, x30 does not precede the site",
		[FTPAD_PAD_NO_MOV_ROOM] =
			"without MOV_X9 a NOP must precede the site, for libftpad's mov x9, x30",
		[FTPAD_PAD_SITE_NOT_NOP] = "the site is not a NOP",
		[FTPAD_PAD_SLOT_MISALIGNED] = "the ops slot is not 8-aligned",
		[FTPAD_PAD_SLOT_NOT_NOP] = "the ops slot is not two NOPs",
	};

	return (unsigned)v < FTPAD_PAD_NVERDICTS ? reasons[v] : NULL;
}
