/* SPDX-License-Identifier: MIT */
/*
 * x86_64_encode.c - the x86_64 pad and what it becomes: checking it,
 * encoding the site's call, recognising a call at a site, and the
 * per-module stub page.  Writing them while threads run is x86_64.c's.
 *
 * Pad (docs/design.md "Pad layouts"):
 *      [before NOPs][ops slot: 8 bytes, 8-aligned][endbr64?][0f 1f 44 00 00]...
 * The site becomes `call rel32` to a stub near the module; the stub loads
 * the site's kind into r11 and jumps to the trampoline for that kind in
 * libftpad (trampoline_x86_64.S).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <cpuid.h>

#include "x86_64_encode.h"

const uint8_t ftpad_arch_id = FTPAD_ARCH_X86_64;
/* rel32 counts from the end of the call; keep a page of margin. */
const uintptr_t ftpad_arch_reach = 0x7fff0000ul;
const size_t ftpad_arch_site_len = sizeof(nop5);
/* The pad definition's empty slot (FTPAD_X86_64_SLOT_NOP, the 8-byte NOP),
 * read as a little-endian word. */
#define LE64(b0, b1, b2, b3, b4, b5, b6, b7)                                        \
	((uint64_t)(b0) | (uint64_t)(b1) << 8 | (uint64_t)(b2) << 16 |              \
	 (uint64_t)(b3) << 24 | (uint64_t)(b4) << 32 | (uint64_t)(b5) << 40 |       \
	 (uint64_t)(b6) << 48 | (uint64_t)(b7) << 56)
/* An extra step, so that the bytes' macro is expanded into eight arguments. */
#define LE64_OF(...) LE64(__VA_ARGS__)
const uint64_t ftpad_arch_slot_empty = LE64_OF(FTPAD_X86_64_SLOT_NOP);
const size_t ftpad_arch_stubs_size = EXIT_LITERAL + 8;
const size_t ftpad_arch_exit_stub_size = SITE_EXIT_STUB_SIZE;

/* trampoline_x86_64.S: one entry per kind, then the exits', in each
 * vector width. */
#define TRAMPOLINE_EXIT (KIND_REGS + 1)
#define TRAMPOLINES(w)                                                              \
	extern char ftpad_trampoline##w##_0[], ftpad_trampoline##w##_1[],           \
		ftpad_trampoline##w##_2_record[], ftpad_trampoline##w##_3_record[], \
		ftpad_trampoline##w##_regs[], ftpad_trampoline##w##_exit_site[] FTPAD_HIDDEN; \
	static const uintptr_t trampolines##w[TRAMPOLINE_EXIT + 1] = {              \
		(uintptr_t)ftpad_trampoline##w##_0, (uintptr_t)ftpad_trampoline##w##_1, \
		(uintptr_t)ftpad_trampoline##w##_2_record,                          \
		(uintptr_t)ftpad_trampoline##w##_3_record,                          \
		(uintptr_t)ftpad_trampoline##w##_regs,                              \
		(uintptr_t)ftpad_trampoline##w##_exit_site,                         \
	}
TRAMPOLINES();
TRAMPOLINES(_avx);
TRAMPOLINES(_avx512);

int ftpad_arch_site_init(const struct ftpad_site_record *rec,
			 struct ftpad_site *site, const char **why)
{
	if (ftpad_arch_pad_verdict(rec, site, ftpad_x86_64_pad_check, ftpad_x86_64_pad_reason,
				   why) != FTPAD_PAD_OK)
		return -EINVAL;
	site->kind = (rec->flags & FTPAD_SITE_ENDBR ? KIND_ENDBR : 0) |
		     (site->state & FTPAD_S_SLOT ? KIND_SLOT : 0);
	return 0;
}

int ftpad_arch_site_call(const struct ftpad_site *site, uintptr_t stubs, bool regs,
			 uint8_t *buf)
{
	uintptr_t addr = ftpad_site_addr(site);
	intptr_t rel = (intptr_t)stub_of(site, stubs, regs) - (intptr_t)(addr + 5);
	int32_t rel32 = (int32_t)rel;

	if (rel != rel32)
		return -ERANGE;
	buf[0] = 0xe8;
	memcpy(buf + 1, &rel32, sizeof(rel32));
	return 0;
}

void ftpad_arch_site_prep(const struct ftpad_site *site, uintptr_t *addr, uint8_t *buf)
{
	/* No x86_64 layout needs one. */
	(void)site, (void)buf;
	*addr = 0;
}

/*
 * The int3 protocol writes the opcode byte last, so an e8 there means the
 * rel32 behind it is whole, and that the slot was written before.  x86
 * keeps loads in order, so the slot read that follows sees it.
 */
bool ftpad_arch_site_calls(uintptr_t addr)
{
	return __atomic_load_n((const uint8_t *)addr, __ATOMIC_ACQUIRE) == 0xe8;
}

/*
 * The vector registers the OS saves for us (XCR0) as the CPU has them: the
 * trampolines that keep ymm0-7 with AVX, zmm0-7 with AVX-512F, xmm0-7
 * otherwise (trampoline_x86_64.S).  Chosen for each stub page; the answer
 * never changes.
 */
static const uintptr_t *vector_trampolines(void)
{
	enum { XCR0_SSE_AVX = 0x6, XCR0_AVX512 = 0xe6 };
	unsigned int a, b, c, d, lo, hi;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
		return trampolines;
	__asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	(void)hi;
	if ((lo & XCR0_SSE_AVX) != XCR0_SSE_AVX)
		return trampolines;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX512F) &&
	    (lo & XCR0_AVX512) == XCR0_AVX512)
		return trampolines_avx512;
	return trampolines_avx;
}

/*
 * The exit stub, at page + EXIT_STUB:   jmp *literal(%rip) ; int3 ; literal
 * (or jmp rel32 when the trampoline is within reach), which every exit
 * site's own stub jumps to with its struct ftpad_site pushed.  Unlike the
 * entry stubs they set no register: everything is live at an exit, r11
 * too (GCC and clang jump through it in indirect tail calls).
 */
static void fill_exit_stub(uint8_t *p, uintptr_t at, uintptr_t target)
{
	intptr_t direct = (intptr_t)target - (intptr_t)(at + 5);
	int32_t rel = EXIT_LITERAL - (EXIT_STUB + 6), d = (int32_t)direct;

	if (direct == d) {
		p[0] = 0xe9;
		memcpy(p + 1, &d, sizeof(d));
	} else {
		p[0] = 0xff, p[1] = 0x25;
		memcpy(p + 2, &rel, sizeof(rel));
	}
	memcpy(p + EXIT_LITERAL - EXIT_STUB, &target, sizeof(target));
}

/*
 * Stub k, at page + 16 * k:   mov $k, %r11d ; jmp *literal_k(%rip) ; int3...
 * and from page + 128 the absolute address of the trampoline of each kind;
 * `jmp rel32` instead of the indirect jump when the trampoline is within
 * reach (libftpad linked statically, or loaded near the module).
 * r11 is free at a function's entry (the psABI makes it call-clobbered and
 * unused for arguments), so the stub can hand the kind over in it.
 */
void ftpad_arch_stubs_fill(uint8_t *buf, uintptr_t page)
{
	const uintptr_t *width = vector_trampolines();
	uintptr_t targets[KIND_COUNT];

	for (int k = 0; k < KIND_COUNT; k++)
		targets[k] = width[k < KIND_REGS ? k : KIND_REGS];
	memset(buf, 0xcc, ftpad_arch_stubs_size);
	for (int k = 0; k < KIND_COUNT; k++) {
		uint8_t *p = buf + k * STUB_SIZE;
		intptr_t direct = (intptr_t)targets[k] - (intptr_t)(page + k * STUB_SIZE + 11);
		int32_t rel = STUB_LITERALS + 8 * k - (k * STUB_SIZE + 12);

		p[0] = 0x41, p[1] = 0xbb, p[2] = k, p[3] = p[4] = p[5] = 0;
		if (direct == (int32_t)direct) {
			/* libftpad within reach (linked statically, say): jmp rel32 */
			int32_t d = (int32_t)direct;

			p[6] = 0xe9;
			memcpy(p + 7, &d, sizeof(d));
		} else {
			p[6] = 0xff, p[7] = 0x25;
			memcpy(p + 8, &rel, sizeof(rel));
		}
	}
	memcpy(buf + STUB_LITERALS, targets, sizeof(targets));
	fill_exit_stub(buf + EXIT_STUB, page + EXIT_STUB, width[TRAMPOLINE_EXIT]);
}

/*
 * Exit site s's stub, at page + ftpad_arch_stubs_size + 24 * s->exit_index:
 *      push literal(%rip) ; jmp page + EXIT_STUB ; int3... ; literal: &s
 * so that the exit trampoline knows the site without looking its address
 * up (trampoline_x86_64.S "Fast recording").
 */
void ftpad_arch_exit_stub_fill(uint8_t *buf, uintptr_t at, const struct ftpad_site *site)
{
	enum { PUSH_LEN = 6, JMP_END = PUSH_LEN + 5, LITERAL = 16 };
	uintptr_t page = at - ftpad_arch_stubs_size - site->exit_index * SITE_EXIT_STUB_SIZE;
	int32_t push_rel = LITERAL - PUSH_LEN;
	int32_t jmp_rel = (int32_t)((intptr_t)(page + EXIT_STUB) - (intptr_t)(at + JMP_END));
	uintptr_t literal = (uintptr_t)site;

	memset(buf, 0xcc, SITE_EXIT_STUB_SIZE);
	buf[0] = 0xff, buf[1] = 0x35;
	memcpy(buf + 2, &push_rel, sizeof(push_rel));
	buf[PUSH_LEN] = 0xe9;
	memcpy(buf + PUSH_LEN + 1, &jmp_rel, sizeof(jmp_rel));
	memcpy(buf + LITERAL, &literal, sizeof(literal));
}

int ftpad_arch_jump_insn(const struct ftpad_site *s, uintptr_t target, uint8_t *buf)
{
	intptr_t rel = (intptr_t)(target - (ftpad_site_addr(s) + sizeof(nop5)));
	int32_t rel32 = (int32_t)rel;

	if (!target) {
		memcpy(buf, nop5, sizeof(nop5));
		return 0;
	}
	if (rel != rel32)
		return -ERANGE;
	buf[0] = 0xe9;
	memcpy(buf + 1, &rel32, sizeof(rel32));
	return 0;
}

void ftpad_arch_jump_stub(uint8_t *buf, uintptr_t fn)
{
	/* jmp *0(%rip); .quad fn; int3 int3 */
	memcpy(buf, (const uint8_t[]){ 0xff, 0x25, 0, 0, 0, 0 }, 6);
	memcpy(buf + 6, &fn, sizeof(fn));
	buf[14] = buf[15] = 0xcc;
}
