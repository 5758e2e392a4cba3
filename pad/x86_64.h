/* SPDX-License-Identifier: MIT */
/*
 * x86_64.h - the x86_64 pad (docs/format.md):
 *      [before NOPs][ops slot: 0f 1f 84 00 00 00 00 00, 8-aligned]
 *      entry: [endbr64] site: [0f 1f 44 00 00][rest of after]
 * The site becomes `call rel32` and goes back to the 5-byte NOP.
 */
#ifndef FTPAD_PAD_X86_64_H
#define FTPAD_PAD_X86_64_H

#include "ftpad_site.h"
#include "pad.h"

/* The site: GCC's 5-byte NOP, nopl 0(%rax,%rax,1).  Disabling writes it. */
#define FTPAD_X86_64_SITE_NOP 0x0f, 0x1f, 0x44, 0x00, 0x00
/*
 * LLVM's 5-byte NOP, nopl 8(%rax,%rax,1): clang's patchable-function-entry
 * emits it, and the clang pass cannot choose another encoding
 * (docs/clang-pass.md).  A site may hold it until first enabled.
 */
#define FTPAD_X86_64_SITE_NOP_LLVM 0x0f, 0x1f, 0x44, 0x00, 0x08
/* The empty ops slot: the 8-byte NOP nopl 0(%rax,%rax,1) with a disp32. */
#define FTPAD_X86_64_SLOT_NOP 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00
/* The landing pad at the entry, with FTPAD_SITE_ENDBR. */
#define FTPAD_X86_64_ENDBR64 0xf3, 0x0f, 0x1e, 0xfa

/* A NOP unit, as a record's before and after count them: one byte. */
#define FTPAD_X86_64_UNIT 1
#define FTPAD_X86_64_SITE_LEN 5
/* The site's offset behind the entry's landing pad: it comes first. */
#define FTPAD_X86_64_SITE_OFFSET 0
/* The fewest units after the landing pad that hold a site: the 5-byte NOP. */
#define FTPAD_X86_64_MIN_AFTER 5

#ifdef __cplusplus
extern "C" {
#endif

/* Whether @rec's pad in @bytes (of @size) is one libftpad can patch. */
enum ftpad_pad_verdict ftpad_x86_64_pad_check(const struct ftpad_pad_site *rec,
					      const uint8_t *bytes, size_t size);
/* What @v means on x86_64, for a message: "the site is not the 5-byte NOP ...". */
const char *ftpad_x86_64_pad_reason(enum ftpad_pad_verdict v);

#ifdef __cplusplus
}
#endif

#endif /* FTPAD_PAD_X86_64_H */
