/* SPDX-License-Identifier: MIT */
/*
 * x86_64_encode.h - what the encoding of x86_64 sites (x86_64_encode.c)
 * and the protocol that writes them while threads run (x86_64.c) share:
 * the pad's instructions, the kinds of site, and which stub a site calls.
 */
#ifndef FTPAD_ARCH_X86_64_ENCODE_H
#define FTPAD_ARCH_X86_64_ENCODE_H

#include "../arch.h"
#include "x86_64.h"

/* Bits of a site's kind, handed to the trampoline in r11 by its stub. */
enum {
	KIND_ENDBR = 1, /* endbr64 sits between the entry and the site */
	KIND_SLOT = 2,  /* the ops slot ends at the entry */
	KIND_REGS = 4,  /* the full register save (FTPAD_OPS_FL_SAVE_REGS) */
	KIND_COUNT = 8,
};

#define STUB_SIZE 16
#define STUB_LITERALS (KIND_COUNT * STUB_SIZE)
/* The exit sites' stub, behind the literals of the others, and its own
 * literal (the exit trampoline's address). */
#define EXIT_STUB (STUB_LITERALS + KIND_COUNT * 8)
#define EXIT_LITERAL (EXIT_STUB + 8)
/* Each exit site calls a stub of its own, which pushes its struct
 * ftpad_site and jumps to the page's exit stub (ftpad_arch_exit_stub_fill()). */
#define SITE_EXIT_STUB_SIZE 24

/* The pad's instructions and its check are pad/x86_64.{h,c}. */
static const uint8_t nop5[5] = { FTPAD_X86_64_SITE_NOP };
static const uint8_t endbr64[4] = { FTPAD_X86_64_ENDBR64 };

/* The stub site calls in the stub page at stubs. */
static inline uintptr_t stub_of(const struct ftpad_site *site, uintptr_t stubs, bool regs)
{
	unsigned int kind = site->kind | (regs ? KIND_REGS : 0);

	if (ftpad_site_is_exit(site))
		return stubs + ftpad_arch_stubs_size + site->exit_index * SITE_EXIT_STUB_SIZE;
	return stubs + kind * STUB_SIZE;
}

#endif /* FTPAD_ARCH_X86_64_ENCODE_H */
