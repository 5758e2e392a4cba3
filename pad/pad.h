/* SPDX-License-Identifier: MIT */
/*
 * pad.h - what every architecture's pad definition (pad/<arch>.h and .c)
 * shares: a record's pad as the check sees it, and the check's verdicts.
 *
 * A pad definition is the one place that says which bytes a pad holds and
 * whether a record's site is one libftpad can patch.  libftpad runs the
 * check on the code in memory before it patches a site
 * (runtime/arch/<arch>.c, ftpad_arch_site_init), recordmcount-ng on the
 * object's section for --check (recordmcount/arch/<arch>.c), and the
 * plugins emit the same bytes.  So this code is C11 with nothing beyond
 * <stdint.h>, <stddef.h> and memcmp: the runtime calls it with its locks
 * held and never allocates, and the C++ plugins include the headers.
 *
 * An exit site (kind EXIT or TAIL_EXIT) is one site NOP in front of a
 * return or a tail call's jump, anywhere in the function: its record's
 * flags are 0, its before and after 0, and its ops the function's slot
 * (or 0).  The check asks that the site be the machine's site NOP (and
 * 4-aligned on aarch64), and the slot, when there is one, an empty slot.
 */
#ifndef FTPAD_PAD_H
#define FTPAD_PAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "a, b, c" -> ".byte a, b, c": the bytes below, for a plugin's assembly. */
#define FTPAD_PAD_STR_(...) #__VA_ARGS__
#define FTPAD_PAD_ASM_BYTES(...) ".byte " FTPAD_PAD_STR_(__VA_ARGS__)

/*
 * The ops slot: 8 bytes right before the entry, 8-aligned, so that
 * libftpad stores an ops pointer into it with one aligned write.
 */
#define FTPAD_PAD_SLOT_LEN 8

/*
 * One record's pad, with its addresses turned into offsets into the bytes
 * the check reads.  Those bytes must start at an 8-aligned address (a
 * section's start, or libftpad's address rounded down), so that offsets
 * keep the alignment of what they point at.
 */
struct ftpad_pad_site {
	uint64_t entry;		/* the function's entry */
	uint64_t site;		/* the patchable instruction */
	uint64_t ops;		/* the ops slot, if has_ops */
	bool has_ops;
	uint8_t site_len;	/* the record's site_len */
	uint8_t kind;		/* the record's kind: enum ftpad_site_kind */
	uint16_t flags;		/* the record's flags: enum ftpad_site_flags */
};

/* What the check found: the first thing wrong, in the order below. */
enum ftpad_pad_verdict {
	FTPAD_PAD_OK = 0,
	/*
	 * aarch64, a record without FTPAD_SITE_MOV_X9: libftpad's own
	 * `mov x9, x30` is in the first NOP already.  libftpad patches such a
	 * site (it wrote the MOV); an object's file never holds one.
	 */
	FTPAD_PAD_PREPARED,
	FTPAD_PAD_SITE_LEN,		/* site_len is not the machine's */
	FTPAD_PAD_OUTSIDE,		/* an instruction the record names lies outside the bytes */
	FTPAD_PAD_UNKNOWN_KIND,		/* kind is not an enum ftpad_site_kind */
	FTPAD_PAD_EXIT_FLAG,		/* an exit site's record has a landing-pad, MOV or kernel flag */
	FTPAD_PAD_FOREIGN_FLAG,		/* the other machine's landing-pad flag */
	FTPAD_PAD_MISALIGNED,		/* aarch64: the entry or the site is not 4-aligned */
	FTPAD_PAD_NO_LANDING_PAD,	/* the flags promise endbr64 / bti c; the entry has none */
	FTPAD_PAD_SITE_PLACE,		/* the site is not where the layout puts it */
	FTPAD_PAD_NO_MOV,		/* FTPAD_SITE_MOV_X9, but no mov x9, x30 before the site */
	FTPAD_PAD_NO_MOV_ROOM,		/* no FTPAD_SITE_MOV_X9, and no NOP before the site for it */
	FTPAD_PAD_SITE_NOT_NOP,		/* the site is not the machine's site NOP */
	FTPAD_PAD_SLOT_MISALIGNED,	/* the ops slot is not 8-aligned */
	FTPAD_PAD_SLOT_NOT_NOP,		/* the ops slot is not the empty slot's NOPs */
	FTPAD_PAD_NVERDICTS
};

#endif /* FTPAD_PAD_H */
