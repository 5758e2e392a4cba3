/* SPDX-License-Identifier: MIT */
/*
 * x86_64.c - whether an x86_64 record's pad is one libftpad can patch
 * (x86_64.h).  The rule the runtime applies before patching and
 * recordmcount-ng --check applies to objects.
 */
#include <string.h>

#include "x86_64.h"

static const uint8_t site_nop[] = { FTPAD_X86_64_SITE_NOP };
static const uint8_t site_nop_llvm[] = { FTPAD_X86_64_SITE_NOP_LLVM };
static const uint8_t slot_nop[] = { FTPAD_X86_64_SLOT_NOP };
static const uint8_t endbr64[] = { FTPAD_X86_64_ENDBR64 };

/* Whether @bytes holds @want (@n bytes) at @at, all of it inside @size. */
static bool holds(const uint8_t *bytes, size_t size, uint64_t at, const uint8_t *want, size_t n)
{
	return at <= size && n <= size - at && memcmp(bytes + at, want, n) == 0;
}

static bool inside(const struct ftpad_pad_site *rec, size_t size)
{
	return rec->entry < size && rec->site <= size && rec->site_len <= size - rec->site &&
	       (!rec->has_ops || (rec->ops <= size && size - rec->ops >= sizeof(slot_nop)));
}

/* The site NOP, then the ops slot, which entry and exit sites share. */
static enum ftpad_pad_verdict check_site_and_slot(const struct ftpad_pad_site *rec,
						  const uint8_t *bytes, size_t size)
{
	if (!holds(bytes, size, rec->site, site_nop, sizeof(site_nop)) &&
	    !holds(bytes, size, rec->site, site_nop_llvm, sizeof(site_nop_llvm)))
		return FTPAD_PAD_SITE_NOT_NOP;
	if (rec->has_ops && rec->ops % FTPAD_PAD_SLOT_LEN)
		return FTPAD_PAD_SLOT_MISALIGNED;
	if (rec->has_ops && !holds(bytes, size, rec->ops, slot_nop, sizeof(slot_nop)))
		return FTPAD_PAD_SLOT_NOT_NOP;
	return FTPAD_PAD_OK;
}

enum ftpad_pad_verdict ftpad_x86_64_pad_check(const struct ftpad_pad_site *rec,
					      const uint8_t *bytes, size_t size)
{
	uint64_t expect = rec->entry;

	if (rec->site_len != FTPAD_X86_64_SITE_LEN)
		return FTPAD_PAD_SITE_LEN;
	if (!inside(rec, size))
		return FTPAD_PAD_OUTSIDE;
	if (rec->kind > FTPAD_SITE_KIND_TAIL_EXIT)
		return FTPAD_PAD_UNKNOWN_KIND;
	if (rec->kind != FTPAD_SITE_KIND_ENTRY)
		return rec->flags ? FTPAD_PAD_EXIT_FLAG : check_site_and_slot(rec, bytes, size);
	if (rec->flags & FTPAD_SITE_BTI)
		return FTPAD_PAD_FOREIGN_FLAG;
	if (rec->flags & FTPAD_SITE_ENDBR) {
		if (!holds(bytes, size, rec->entry, endbr64, sizeof(endbr64)))
			return FTPAD_PAD_NO_LANDING_PAD;
		expect += sizeof(endbr64);
	}
	/* The trampoline derives the ip from the return address: it must be exact. */
	if (rec->site != expect)
		return FTPAD_PAD_SITE_PLACE;
	return check_site_and_slot(rec, bytes, size);
}

const char *ftpad_x86_64_pad_reason(enum ftpad_pad_verdict v)
{
	static const char *const reasons[FTPAD_PAD_NVERDICTS] = {
		[FTPAD_PAD_OUTSIDE] = "the entry, the site or the ops slot lies outside the code",
		[FTPAD_PAD_SITE_LEN] = "site_len is not 5",
		[FTPAD_PAD_UNKNOWN_KIND] = "kind is not entry (0), exit (1) or tail exit (2)",
		[FTPAD_PAD_EXIT_FLAG] = "an exit site's record has flags",
		[FTPAD_PAD_FOREIGN_FLAG] = "flags has BTI on x86_64",
		[FTPAD_PAD_NO_LANDING_PAD] = "flags has ENDBR but the entry is not endbr64",
		[FTPAD_PAD_SITE_PLACE] = "the site does not follow the entry (or its endbr64)",
		[FTPAD_PAD_SITE_NOT_NOP] =
			"the site is not the 5-byte NOP 0f 1f 44 00 00 (or 0f 1f 44 00 08)",
		[FTPAD_PAD_SLOT_MISALIGNED] = "the ops slot is not 8-aligned",
		[FTPAD_PAD_SLOT_NOT_NOP] = "the ops slot is not the 8-byte NOP 0f 1f 84 00 00 00 00 00",
	};

	return (unsigned)v < FTPAD_PAD_NVERDICTS ? reasons[v] : NULL;
}
