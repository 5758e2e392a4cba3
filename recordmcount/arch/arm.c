/* SPDX-License-Identifier: MIT */
/*
 * arm (EABI, soft- and hard-float), ARM and Thumb-2 code, both byte orders.
 *
 * -pg calls `__gnu_mcount_nc` (older compilers: `mcount`) with a `bl`,
 * relocated by R_ARM_CALL (ARM), R_ARM_THM_CALL (Thumb) or R_ARM_PC24 (old
 * ARM objects) at the bl itself.  __gnu_mcount_nc pops the lr the caller
 * pushed right before the call:
 *
 *     ARM:     e52de004  push {lr}        Thumb-2:  b500       push {lr}
 *              ebfffffe  bl __gnu_mcount_nc         f7ff fffe  bl __gnu_mcount_nc
 *
 * so a disabled call site loses the push too: both ARM words become
 * `mov r0, r0` (e1a00000, the NOP every ARM core runs), the Thumb push and
 * both halves of the bl become `nop` (bf00).  An ARM `bl` without the push
 * (the old `mcount` ABI) becomes one `mov r0, r0`.
 *
 * The bl still holds the REL addend (-8 for ARM, -4 for Thumb), hence the
 * 0xfffffe patterns.  Objects keep instructions in the object's byte order
 * (a BE8 image is only swapped at link time), so the patterns are compared
 * in it.  Thumb function symbols carry the Thumb bit in st_value, so records
 * are never based on STT_FUNC symbols (avoid_func_syms).
 */
#include <elf.h>
#include <string.h>

#include "../rmc.h"

#ifndef R_ARM_THM_CALL
#define R_ARM_THM_CALL R_ARM_THM_PC22	/* glibc's elf.h has only the old name */
#endif

/* One ARM-state instruction or Thumb-state halfword, in host order. */
#define ARM_PUSH_LR	0xe52de004u	/* push {lr} (str lr, [sp, #-4]!) */
#define ARM_BL_REL	0xebfffffeu	/* bl . (addend -8, unrelocated) */
#define ARM_NOP		0xe1a00000u	/* mov r0, r0 */
#define THUMB_PUSH_LR	0xb500u		/* push {lr} */
#define THUMB_BL_HI	0xf7ffu		/* bl . (addend -4): first halfword */
#define THUMB_BL_LO	0xfffeu		/*                   second halfword */
#define THUMB_NOP	0xbf00u		/* nop */

static uint32_t get_word(const struct rmc_text *text, uint64_t at, int size)
{
	uint32_t v = 0;

	for (int i = 0; i < size; i++)
		v |= (uint32_t)text->bytes[at + i] << (8 * (text->big_endian ? size - 1 - i : i));
	return v;
}

static void put_word(struct rmc_text *text, uint64_t at, int size, uint32_t v)
{
	for (int i = 0; i < size; i++)
		text->bytes[at + i] = (unsigned char)(v >> (8 * (text->big_endian ? size - 1 - i : i)));
}

/* Only branch-and-link relocations are call sites; anything else takes mcount's address. */
static bool is_fake_mcount(const struct rmc_reloc *r, uint64_t prev_offset)
{
	(void)prev_offset;
	return r->type != R_ARM_CALL && r->type != R_ARM_THM_CALL && r->type != R_ARM_PC24;
}

/* `push {lr}; bl` (or a bare ARM `bl`) at @offset, the bl's offset. */
static bool nop_arm_call(struct rmc_text *text, uint64_t offset)
{
	uint64_t from = offset;

	if (offset + 4 > text->size || get_word(text, offset, 4) != ARM_BL_REL)
		return false;
	if (offset >= 4 && get_word(text, offset - 4, 4) == ARM_PUSH_LR)
		from = offset - 4;
	for (uint64_t at = from; at <= offset; at += 4)
		put_word(text, at, 4, ARM_NOP);
	return true;
}

static bool nop_thumb_call(struct rmc_text *text, uint64_t offset)
{
	if (offset < 2 || offset + 4 > text->size ||
	    get_word(text, offset - 2, 2) != THUMB_PUSH_LR ||
	    get_word(text, offset, 2) != THUMB_BL_HI || get_word(text, offset + 2, 2) != THUMB_BL_LO)
		return false;
	for (uint64_t at = offset - 2; at < offset + 4; at += 2)
		put_word(text, at, 2, THUMB_NOP);
	return true;
}

static bool make_nop(struct rmc_text *text, uint64_t offset)
{
	return nop_arm_call(text, offset) || nop_thumb_call(text, offset);
}

const struct rmc_arch rmc_arch_arm = {
	.name = "arm",
	.machine = EM_ARM,
	.elfclass = ELFCLASS32,
	.mcount = "mcount",
	.alt_mcount = "__gnu_mcount_nc",
	.avoid_func_syms = true,
	.mcount_adjust = 0,
	.abs_reloc = R_ARM_ABS32,
	.none_reloc = R_ARM_NONE,
	.is_fake_mcount = is_fake_mcount,
	.make_nop = make_nop,
};
