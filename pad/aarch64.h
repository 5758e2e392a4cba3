/* SPDX-License-Identifier: MIT */
/*
 * aarch64.h - the aarch64 pads (docs/format.md), instructions little-endian
 * in either byte order:
 *      [before NOPs][ops slot: 2 NOPs, 8-aligned] entry: [bti c]
 *      [mov x9, x30 | nop] site: [nop] [rest of after]
 * With FTPAD_SITE_MOV_X9 the compiler put the MOV there; without it (the
 * kernel layout, NOP NOP) libftpad writes the MOV into the first NOP once,
 * before the site first calls.  The site toggles between NOP and BL.
 */
#ifndef FTPAD_PAD_AARCH64_H
#define FTPAD_PAD_AARCH64_H

#include "ftpad_site.h"
#include "pad.h"

#define FTPAD_AARCH64_NOP 0xd503201fu
#define FTPAD_AARCH64_BTI_C 0xd503245fu
#define FTPAD_AARCH64_MOV_X9_X30 0xaa1e03e9u	/* orr x9, xzr, x30 */

/* A NOP unit, as a record's before and after count them: one instruction. */
#define FTPAD_AARCH64_UNIT 4
#define FTPAD_AARCH64_SITE_LEN 4
/* The site's offset behind the entry's landing pad: after the mov x9, x30. */
#define FTPAD_AARCH64_SITE_OFFSET 4
/* The fewest units after the landing pad that hold a site: the MOV and the site. */
#define FTPAD_AARCH64_MIN_AFTER 2

/* The instruction at @p, which need not be aligned. */
static inline uint32_t ftpad_aarch64_insn(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#ifdef __cplusplus
extern "C" {
#endif

/* Whether @rec's pad in @bytes (of @size) is one libftpad can patch. */
enum ftpad_pad_verdict ftpad_aarch64_pad_check(const struct ftpad_pad_site *rec,
					       const uint8_t *bytes, size_t size);
/* What @v means on aarch64, for a message: "the site is not a NOP", ... */
const char *ftpad_aarch64_pad_reason(enum ftpad_pad_verdict v);

#ifdef __cplusplus
}
#endif

#endif /* FTPAD_PAD_AARCH64_H */
