/* SPDX-License-Identifier: MIT */
/*
 * aarch64_encode.h - what the encoding of aarch64 sites (aarch64_encode.c)
 * and the protocol that writes them while threads run (aarch64.c) share:
 * the pad's instructions, the kinds of site, reading and putting a word.
 */
#ifndef FTPAD_ARCH_AARCH64_ENCODE_H
#define FTPAD_ARCH_AARCH64_ENCODE_H

#include <string.h>

#include "../arch.h"
#include "aarch64.h"

/* Bits of a site's kind, handed to the dispatcher in x16 by its stub. */
enum {
	KIND_BTI = 1,  /* bti c sits between the entry and mov x9, x30 */
	KIND_SLOT = 2, /* the ops slot ends at the entry */
	KIND_REGS = 4, /* the full register save (FTPAD_OPS_FL_SAVE_REGS) */
	KIND_COUNT = 8,
};

/* The pad's instructions and its check are pad/aarch64.{h,c}. */
#define INSN_NOP FTPAD_AARCH64_NOP
#define INSN_MOV_X9_X30 FTPAD_AARCH64_MOV_X9_X30

static inline uint32_t insn_at(uintptr_t addr)
{
	uint32_t v;

	memcpy(&v, (const void *)addr, sizeof(v));
	return v;
}

static inline void put_insn(uint8_t *buf, uint32_t insn)
{
	memcpy(buf, &insn, sizeof(insn));
}

#endif /* FTPAD_ARCH_AARCH64_ENCODE_H */
