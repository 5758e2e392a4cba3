/* SPDX-License-Identifier: MIT */
/*
 * aarch64_encode.c - the aarch64 pads and what they become: checking
 * them, encoding the site's BL (and its reach), recognising a branch at
 * a site, and the per-module stub page.  Writing them while threads run
 * is aarch64.c's.
 *
 * Pad (docs/format.md, docs/design.md "Pad layouts"):
 *      [before NOPs][ops slot: 2 NOPs, 8-aligned] entry: [bti c?]
 *      mov x9, x30 ; nop (the site) ; [rest of after]
 * The compiler already saved the return address in x9, so enabling a site
 * changes one instruction, NOP to `bl stub`, and disabling changes it back.
 * The stub, near the module, loads the site's kind into x16 and jumps to
 * the trampoline.  A record without FTPAD_SITE_MOV_X9 describes the kernel
 * layout, two NOPs, whose first gets the MOV once (ftpad_arch_site_prep()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "aarch64_encode.h"

#define INSN_BL 0x94000000u
#define INSN_B 0x14000000u
#define INSN_B_OR_BL_MASK 0x7c000000u /* B and BL differ in bit 31 only */
#define INSN_STP_X29_X30_PRE 0xa9bf7bfdu /* stp x29, x30, [sp, #-16]! */
#define INSN_LDP_X29_X30_POST 0xa8c17bfdu /* ldp x29, x30, [sp], #16 */
#define INSN_STP_X16_X17_PRE 0xa9bf47f0u /* stp x16, x17, [sp, #-16]! */
#define INSN_LDR_X17_LIT 0x58000011u /* ldr x17, <imm19 * 4 from here> */
#define INSN_MOVZ_X16 0xd2800010u    /* movz x16, #<imm16> */
#define INSN_BR_X17 0xd61f0220u
#define INSN_BRK 0xd4200000u
#define INSN_LDR_X16_LIT8 0x58000050u /* ldr x16, <8 bytes from here> */
#define INSN_BR_X16 0xd61f0200u

#define STUB_SIZE 16
#define STUB_LITERALS (KIND_COUNT * STUB_SIZE)
/* What every exit stub calls, behind the literals of the entry stubs. */
#define EXIT_COMMON (STUB_LITERALS + KIND_COUNT * 8)
#define EXIT_COMMON_SIZE 24
/* An exit site's own stub, and where it keeps its site's address. */
#define EXIT_STUB_SIZE 24
#define EXIT_STUB_SITE 16

const uint8_t ftpad_arch_id = FTPAD_ARCH_AARCH64;
/* BL reaches +-128 MiB from itself; keep a stub page of margin. */
const uintptr_t ftpad_arch_reach = 0x8000000ul - 0x10000ul;
const size_t ftpad_arch_site_len = FTPAD_AARCH64_SITE_LEN;
/* The two NOPs the compiler put in the slot, read as a little-endian word. */
const uint64_t ftpad_arch_slot_empty = (uint64_t)INSN_NOP << 32 | INSN_NOP;
const size_t ftpad_arch_stubs_size = EXIT_COMMON + EXIT_COMMON_SIZE;
const size_t ftpad_arch_exit_stub_size = EXIT_STUB_SIZE;

/* trampoline_aarch64.S */
extern char ftpad_trampoline[], ftpad_trampoline_regs[], ftpad_trampoline_exit[] FTPAD_HIDDEN;

/* B or BL (op) at from to to, into buf; -ERANGE when out of reach. */
static int branch(uint8_t *buf, uint32_t op, uintptr_t from, uintptr_t to)
{
	intptr_t rel = (intptr_t)to - (intptr_t)from;

	/* imm26 counts words: +-2^25 of them. */
	if (rel < -(1l << 27) || rel >= (1l << 27))
		return -ERANGE;
	put_insn(buf, op | ((uint32_t)(rel >> 2) & 0x3ffffffu));
	return 0;
}

int ftpad_arch_site_init(const struct ftpad_site_record *rec,
			 struct ftpad_site *site, const char **why)
{
	enum ftpad_pad_verdict v = ftpad_arch_pad_verdict(rec, site, ftpad_aarch64_pad_check,
							  ftpad_aarch64_pad_reason, why);

	if (v != FTPAD_PAD_OK && v != FTPAD_PAD_PREPARED)
		return -EINVAL;
	site->kind = (rec->flags & FTPAD_SITE_BTI ? KIND_BTI : 0) |
		     (site->state & FTPAD_S_SLOT ? KIND_SLOT : 0);
	/* The kernel layout, NOP NOP: the MOV is ours to write (or was).
	 * An exit site has no MOV: its B leaves x30 alone. */
	if (!(rec->flags & FTPAD_SITE_MOV_X9) && !ftpad_site_is_exit(site))
		site->state |= FTPAD_S_PREP | (v == FTPAD_PAD_PREPARED ? FTPAD_S_PREPARED : 0);
	return 0;
}

int ftpad_arch_site_call(const struct ftpad_site *site, uintptr_t stubs, bool regs,
			 uint8_t *buf)
{
	unsigned int kind = site->kind | (regs ? KIND_REGS : 0);
	bool exit = ftpad_site_is_exit(site);
	uintptr_t stub = exit ? stubs + ftpad_arch_stubs_size + site->exit_index * EXIT_STUB_SIZE
			      : stubs + kind * STUB_SIZE;

	return branch(buf, exit ? INSN_B : INSN_BL, ftpad_site_addr(site), stub);
}

void ftpad_arch_site_prep(const struct ftpad_site *site, uintptr_t *addr, uint8_t *buf)
{
	*addr = ftpad_site_addr(site) - 4;
	put_insn(buf, INSN_MOV_X9_X30);
}

/*
 * The site is a BL (an entry site) or a B (an exit site).  The slot (and
 * a prep MOV) were written, and the kernel's cache maintenance ran a DSB,
 * before the BL was; the acquire keeps this thread's later loads of the
 * slot after this one.
 */
bool ftpad_arch_site_calls(uintptr_t addr)
{
	uint32_t insn = __atomic_load_n((const uint32_t *)addr, __ATOMIC_ACQUIRE);

	return (insn & INSN_B_OR_BL_MASK) == INSN_B;
}

/*
 * What every exit stub calls, at page + EXIT_COMMON:
 *     stp x16, x17, [sp, #-16]! ; ldr x17, literal ; br x17 ; brk ; literal
 * x16 and x17 may be live at a tail exit (an indirect tail call branches
 * through them): they are saved before the jump to the trampoline, which
 * gives them back.  The trampoline starts with `bti jc`.
 */
static void fill_exit_common(uint8_t *p)
{
	uintptr_t target = (uintptr_t)ftpad_trampoline_exit;

	put_insn(p, INSN_STP_X16_X17_PRE);
	put_insn(p + 4, INSN_LDR_X17_LIT | (12 / 4) << 5);
	put_insn(p + 8, INSN_BR_X17);
	put_insn(p + 12, INSN_BRK);
	memcpy(p + 16, &target, sizeof(target));
}

/*
 * Stub k, at page + 16 * k:   ldr x17, literal_k ; movz x16, #k ; br x17 ; brk
 * and from page + 128 the absolute address of the trampoline of each kind,
 * which may be anywhere in the address space.  x16 and x17 (IP0, IP1) are
 * free at a function's entry: the AAPCS64 lets any veneer between caller
 * and callee clobber them.  A BR through x16 or x17 is also what `bti c`
 * or `bti jc` accepts, should libftpad's pages be guarded.
 */
void ftpad_arch_stubs_fill(uint8_t *buf, uintptr_t page)
{
	(void)page; /* the stubs are position independent */
	for (size_t off = 0; off < STUB_LITERALS; off += 4)
		put_insn(buf + off, INSN_BRK);
	for (int k = 0; k < KIND_COUNT; k++) {
		uint8_t *p = buf + k * STUB_SIZE;
		uint32_t imm19 = (STUB_LITERALS + 8 * k - k * STUB_SIZE) / 4;
		uintptr_t target = (uintptr_t)(k & KIND_REGS ? ftpad_trampoline_regs : ftpad_trampoline);

		put_insn(p, INSN_LDR_X17_LIT | imm19 << 5);
		put_insn(p + 4, INSN_MOVZ_X16 | (uint32_t)k << 5);
		put_insn(p + 8, INSN_BR_X17);
		memcpy(buf + STUB_LITERALS + 8 * k, &target, sizeof(target));
	}
	fill_exit_common(buf + EXIT_COMMON);
}

/*
 * Exit site s's own stub, at `at` (its B lands here; x30 holds the
 * function's return address, every argument register may be live):
 *     stp x29, x30, [sp, #-16]! ; bl exit_common ; ldp x29, x30, [sp], #16 ;
 *     b site + 4 ; .quad site
 * The trampoline finds the site in the literal, 8 bytes after the return
 * address of the BL; sp stays 16-aligned.
 */
void ftpad_arch_exit_stub_fill(uint8_t *buf, uintptr_t at, const struct ftpad_site *s)
{
	uintptr_t site = ftpad_site_addr(s), page = at - ftpad_arch_stubs_size -
						    s->exit_index * EXIT_STUB_SIZE;

	put_insn(buf, INSN_STP_X29_X30_PRE);
	/* Within the page: always in reach. */
	branch(buf + 4, INSN_BL, at + 4, page + EXIT_COMMON);
	put_insn(buf + 8, INSN_LDP_X29_X30_POST);
	/* The site reaches the stub: the stub reaches back. */
	branch(buf + 12, INSN_B, at + 12, site + 4);
	memcpy(buf + EXIT_STUB_SITE, &site, sizeof(site));
}

int ftpad_arch_jump_insn(const struct ftpad_site *s, uintptr_t target, uint8_t *buf)
{
	if (!target) {
		put_insn(buf, INSN_NOP);
		return 0;
	}
	return branch(buf, INSN_B, ftpad_site_addr(s), target);
}

void ftpad_arch_jump_stub(uint8_t *buf, uintptr_t fn)
{
	uint64_t v = fn;

	put_insn(buf, INSN_LDR_X16_LIT8);
	put_insn(buf + 4, INSN_BR_X16);
	memcpy(buf + 8, &v, sizeof(v));
}
