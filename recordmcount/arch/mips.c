/* SPDX-License-Identifier: MIT */
/*
 * mips: 32- and 64-bit, both byte orders, as the kernel builds them
 * (-mno-abicalls -fno-pic -G 0; modules add -mlong-calls).
 *
 * The two call sites -pg gives, and what a disabled site becomes (the same
 * words arch/mips/kernel/ftrace.c writes for ftrace_make_nop()):
 *
 * core kernel:                               modules (-mlong-calls):
 *     move  at, ra                               lui   v1, %hi(_mcount)    R_MIPS_HI16 -> b 1f
 *     jal   _mcount   R_MIPS_26 -> nop           addiu v1, v1, %lo(_mcount)  R_MIPS_LO16 (fake)
 *     addiu sp, sp, -8          -> nop (o32)     move  at, ra
 *                                                [move t4, ...]  (-mmcount-ra-address)
 *                                                jalr  v1
 *                                                addiu sp, sp, -8 | nop
 *                                            1:
 *
 * Linux's recordmcount leaves mips calls in untraced sections alone; we
 * disable them (make_nop), because the kernel's _mcount falls through into
 * ftrace_caller once ftrace has started (docs/recordmcount-ng.md).
 *
 * o32's (and o64's) _mcount pops the 8 bytes its caller's delay slot
 * pushed, so a `jal` that is no longer taken takes its stack adjustment
 * with it.  The `b 1f`
 * lands right after the jalr's delay slot (4 instructions, 5 with
 * -mmcount-ra-address, found by looking for the jalr), and the addiu left in
 * its own delay slot only writes v1, which the sequence clobbers anyway.
 * Without -msym32 a 64-bit long call loads _mcount with four relocations
 * (HIGHEST, HI16, HIGHER, LO16) one word apart; the `b` skips them all.
 *
 * A long call has a second relocation against _mcount one word after the
 * first; like Linux, any mcount relocation 4 bytes after the previous one is
 * not a call site of its own (is_fake_mcount).
 *
 * MIPS64 objects keep r_info in a layout of their own: a 32-bit r_sym, then
 * r_ssym, r_type3, r_type2 and r_type bytes, in that order in the file, which
 * libelf does not translate (decode_r_info, encode_r_info).
 */
#include <elf.h>
#include <string.h>

#include "../rmc.h"

#define MIPS_NOP		0x00000000u
#define MIPS_JAL_REL		0x0c000000u	/* jal _mcount, unrelocated */
#define MIPS_LUI_V1		0x3c030000u	/* lui v1, 0 (HI16 addend 0) */
#define MIPS_JALR_V1		0x0060f809u	/* jalr v1 (ra link) */
#define MIPS_B			0x10000000u	/* beq zero, zero, offset: b */
#define MIPS_ADDIU_SP_M8	0x27bdfff8u	/* addiu sp, sp, -8: o32's push for _mcount */
#define MIPS_DADDIU_SP_M8	0x67bdfff8u	/* daddiu sp, sp, -8: the same for o64 */
#define MIPS_LONG_CALL_MAX	10		/* words from the lui to the jalr, at most */

static uint32_t get_insn(const struct rmc_text *text, uint64_t at)
{
	const unsigned char *p = text->bytes + at;

	return text->big_endian ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
				: (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static void put_insn(struct rmc_text *text, uint64_t at, uint32_t insn)
{
	unsigned char *p = text->bytes + at;

	for (int i = 0; i < 4; i++)
		p[text->big_endian ? 3 - i : i] = (unsigned char)(insn >> (8 * i));
}

/* The second word of a lui/addiu pair (or the rest of a 64-bit load) is not a call. */
static bool is_fake_mcount(const struct rmc_reloc *r, uint64_t prev_offset)
{
	return prev_offset != UINT64_MAX && r->offset - prev_offset == 4;
}

/* `jal _mcount` and, if it is the stack push _mcount pops (o32, o64), its delay slot. */
static bool nop_jal(struct rmc_text *text, uint64_t offset)
{
	uint32_t slot;

	if (offset + 8 > text->size)
		return false;
	slot = get_insn(text, offset + 4);
	put_insn(text, offset, MIPS_NOP);
	if (slot == MIPS_ADDIU_SP_M8 || slot == MIPS_DADDIU_SP_M8)
		put_insn(text, offset + 4, MIPS_NOP);
	return true;
}

/* `lui v1, %hi(_mcount)` ... `jalr v1; slot` -> `b` past the slot. */
static bool branch_over_long_call(struct rmc_text *text, uint64_t offset)
{
	for (uint64_t n = 1; n <= MIPS_LONG_CALL_MAX; n++) {
		uint64_t at = offset + 4 * n;

		if (at + 8 > text->size)
			return false;
		if (get_insn(text, at) == MIPS_JALR_V1) {
			/* The target is the word after the jalr's delay slot, n + 2; the offset counts from the b's slot. */
			put_insn(text, offset, MIPS_B | (uint32_t)(n + 1));
			return true;
		}
	}
	return false;
}

static bool make_nop(struct rmc_text *text, uint64_t offset)
{
	uint32_t insn;

	if (offset + 4 > text->size)
		return false;
	insn = get_insn(text, offset);
	if (insn == MIPS_JAL_REL)
		return nop_jal(text, offset);
	if (insn == MIPS_LUI_V1)
		return branch_over_long_call(text, offset);
	return false;
}

/*
 * MIPS64 r_info: the file holds r_sym (4 bytes, file order), r_ssym,
 * r_type3, r_type2, r_type.  gelf hands over those 8 bytes read as one word
 * of the file's byte order.  @type keeps every byte so that a rewrite of the
 * symbol keeps them: r_type in bits 0-7, r_type2 8-15, r_type3 16-23, r_ssym
 * 24-31 (which is also what a big-endian word's low half reads as).
 */
static void decode_r_info(uint64_t info, bool big_endian, uint32_t *sym, uint32_t *type)
{
	if (big_endian) {
		*sym = (uint32_t)(info >> 32);
		*type = (uint32_t)info;
		return;
	}
	*sym = (uint32_t)info;
	*type = (uint32_t)(info >> 56) | (uint32_t)(info >> 48 & 0xff) << 8 |
		(uint32_t)(info >> 40 & 0xff) << 16 | (uint32_t)(info >> 32 & 0xff) << 24;
}

static uint64_t encode_r_info(uint32_t sym, uint32_t type, bool big_endian)
{
	if (big_endian)
		return (uint64_t)sym << 32 | type;
	return sym | (uint64_t)(type & 0xff) << 56 | (uint64_t)(type >> 8 & 0xff) << 48 |
	       (uint64_t)(type >> 16 & 0xff) << 40 | (uint64_t)(type >> 24 & 0xff) << 32;
}

const struct rmc_arch rmc_arch_mips32 = {
	.name = "mips",
	.machine = EM_MIPS,
	.elfclass = ELFCLASS32,
	.mcount = "_mcount",
	.mcount_adjust = 0,
	.abs_reloc = R_MIPS_32,
	.none_reloc = R_MIPS_NONE,
	.is_fake_mcount = is_fake_mcount,
	.make_nop = make_nop,
};

const struct rmc_arch rmc_arch_mips64 = {
	.name = "mips64",
	.machine = EM_MIPS,
	.elfclass = ELFCLASS64,
	.mcount = "_mcount",
	.mcount_adjust = 0,
	.abs_reloc = R_MIPS_64,		/* with r_type2 = r_type3 = R_MIPS_NONE, as Linux writes it */
	.none_reloc = R_MIPS_NONE,
	.is_fake_mcount = is_fake_mcount,
	.make_nop = make_nop,
	.decode_r_info = decode_r_info,
	.encode_r_info = encode_r_info,
};
