/* SPDX-License-Identifier: MIT */
/*
 * x86_64 and i386.
 *
 * mcount: `call mcount` or `call __fentry__` (-mfentry), e8 rel32.  The
 * relocation sits on the rel32, one byte after the call (adjust -1).  In
 * sections ftrace does not trace, an unrelocated `e8 00 00 00 00` becomes
 * the 5-byte NOP the kernel itself uses for that width.
 *
 * Pads: the NOPs compilers put there, the ENDBR landing pad, the
 * mcount/fentry calls, and the ftpad layout (docs/format.md):
 *      [before][ops slot: 0f 1f 84 00 00 00 00 00] entry: [endbr64]
 *      site: [0f 1f 44 00 00][rest of after]
 * GCC's -fpatchable-function-entry emits single-byte NOPs: a thread
 * preempted between two of them would resume inside a half-written call,
 * so the site becomes one 5-byte NOP.
 */
#include <elf.h>
#include <string.h>

#include "../sites.h"
#include "x86_64.h"

/* libftpad's pad, from its one definition (pad/x86_64.h). */
static const unsigned char nop5[5] = { FTPAD_X86_64_SITE_NOP };
static const unsigned char nop5_llvm[5] = { FTPAD_X86_64_SITE_NOP_LLVM };
static const unsigned char slot_nop8[FTPAD_PAD_SLOT_LEN] = { FTPAD_X86_64_SLOT_NOP };
static const unsigned char endbr64[4] = { FTPAD_X86_64_ENDBR64 };
/* Linux's i386 5-byte NOP (recordmcount, ftrace): ds lea 0(%esi),%esi. */
static const unsigned char nop5_i386[5] = { 0x3e, 0x8d, 0x74, 0x26, 0x00 };
static const unsigned char endbr32[4] = { 0xf3, 0x0f, 0x1e, 0xfb };

/* The NOPs of GNU as and the Intel manual, by length, for filling. */
static const unsigned char fill_nops[8][8] = {
	{ 0x90 },
	{ 0x66, 0x90 },
	{ 0x0f, 0x1f, 0x00 },
	{ 0x0f, 0x1f, 0x40, 0x00 },
	{ FTPAD_X86_64_SITE_NOP },
	{ 0x66, FTPAD_X86_64_SITE_NOP },
	{ 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00 },
	{ FTPAD_X86_64_SLOT_NOP },
};

/* Bytes of a ModRM operand (ModRM, SIB, displacement), or 0 if truncated. */
static size_t modrm_len(const unsigned char *p, size_t size)
{
	unsigned mod = p[0] >> 6, rm = p[0] & 7;
	size_t n = 1;

	if (mod != 3 && rm == 4) {	/* a SIB byte follows */
		if (size < 2)
			return 0;
		if (mod == 0 && (p[1] & 7) == 5)
			n += 4;
		n++;
	} else if (mod == 0 && rm == 5) {	/* disp32 (rip-relative in 64-bit mode) */
		n += 4;
	}
	if (mod == 1)
		n += 1;
	else if (mod == 2)
		n += 4;
	return n <= size ? n : 0;
}

/*
 * 90, 66 90, and 0f 1f /0 with any operand and any number of 66 or 2e
 * prefixes: every NOP GCC, GNU as and LLVM emit.  An instruction is at most
 * 15 bytes.
 */
static size_t nop_len(const unsigned char *p, size_t size)
{
	size_t n = 0, operand;
	bool only_66 = true;

	while (n < size && n < 14 && (p[n] == 0x66 || p[n] == 0x2e)) {
		only_66 &= p[n] == 0x66;
		n++;
	}
	if (n < size && p[n] == 0x90)
		return only_66 ? n + 1 : 0;
	if (n + 2 >= size || p[n] != 0x0f || p[n + 1] != 0x1f || (p[n + 2] >> 3 & 7) != 0)
		return 0;
	operand = modrm_len(p + n + 2, size - n - 2);
	return operand && n + 2 + operand <= 15 ? n + 2 + operand : 0;
}

static size_t landing_pad_64(const unsigned char *p, size_t size, uint16_t *flag)
{
	*flag = FTPAD_SITE_ENDBR;
	return size >= 4 && memcmp(p, endbr64, 4) == 0 ? 4 : 0;
}

static size_t landing_pad_32(const unsigned char *p, size_t size, uint16_t *flag)
{
	*flag = FTPAD_SITE_ENDBR;
	return size >= 4 && memcmp(p, endbr32, 4) == 0 ? 4 : 0;
}

/*
 * `call rel32` (e8) has its relocation one byte in; `call *sym@GOTPCREL(%rip)`
 * (ff 15, what -pg -mfentry gives in a PIE) and i386's `call *sym@GOT(%ebx)`
 * (ff 93) two bytes in.
 */
static bool call_insn(const unsigned char *text, size_t size, const struct rmc_reloc *r,
		      uint64_t *start, uint64_t *len)
{
	uint64_t off = r->offset;

	if (off + 4 > size)
		return false;
	if (off >= 2 && text[off - 2] == 0xff && (text[off - 1] == 0x15 || text[off - 1] == 0x93)) {
		*start = off - 2;
		*len = 6;
		return true;
	}
	if (off >= 1 && text[off - 1] == 0xe8) {
		*start = off - 1;
		*len = 5;
		return true;
	}
	return false;
}

static bool is_nop_site(const unsigned char *p, size_t size)
{
	return size >= 5 && (memcmp(p, nop5, 5) == 0 || memcmp(p, nop5_llvm, 5) == 0 ||
			     memcmp(p, nop5_i386, 5) == 0);
}

static void fill(unsigned char *p, size_t len)
{
	while (len) {
		size_t n = len < 8 ? len : 8;

		memcpy(p, fill_nops[n - 1], n);
		p += n;
		len -= n;
	}
}

/* Both 5-byte NOPs are sites libftpad accepts; anything else is rewritten. */
static bool is_site_nop(const unsigned char *p)
{
	return memcmp(p, nop5, 5) == 0 || memcmp(p, nop5_llvm, 5) == 0;
}

static uint64_t make_site(unsigned char *p, size_t len, bool *changed)
{
	*changed = !is_site_nop(p) || (len > 5 && !nop_len(p + 5, len - 5));
	if (*changed) {
		memcpy(p, nop5, 5);
		fill(p + 5, len - 5);
	}
	return FTPAD_X86_64_SITE_OFFSET;
}

/* `call __fentry__` (5 bytes) or its GOT form (6) becomes the 5-byte NOP (+ 90). */
static bool disable_call(unsigned char *p, size_t len)
{
	if (len < 5)
		return false;
	memcpy(p, nop5, 5);
	fill(p + 5, len - 5);
	return true;
}

static void make_slot(unsigned char *p)
{
	memcpy(p, slot_nop8, FTPAD_PAD_SLOT_LEN);
}

/* ---- mcount ---- */

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
	return replace_call(text, offset, nop5);
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
	.ftpad_arch = FTPAD_ARCH_X86_64,
	.unit = FTPAD_X86_64_UNIT,
	.site_len = FTPAD_X86_64_SITE_LEN,
	.min_after = FTPAD_X86_64_MIN_AFTER * FTPAD_X86_64_UNIT,
	.pc32_reloc = R_X86_64_PC32,
	.nop_len = nop_len,
	.landing_pad = landing_pad_64,
	.call_insn = call_insn,
	.is_nop_site = is_nop_site,
	.fill = fill,
	.make_site = make_site,
	.disable_call = disable_call,
	.make_slot = make_slot,
	.pad_check = ftpad_x86_64_pad_check,
	.pad_reason = ftpad_x86_64_pad_reason,
};

/* i386: ftpad records exist for x86_64 and aarch64 only; --list and --check know its pads. */
const struct rmc_arch rmc_arch_i386 = {
	.name = "i386",
	.machine = EM_386,
	.elfclass = ELFCLASS32,
	.mcount = "mcount",
	.mcount_adjust = -1,
	.abs_reloc = R_386_32,
	.none_reloc = R_386_NONE,
	.make_nop = make_nop_i386,
	.unit = 1,
	.nop_len = nop_len,
	.landing_pad = landing_pad_32,
	.call_insn = call_insn,
	.is_nop_site = is_nop_site,
	.fill = fill,
};
