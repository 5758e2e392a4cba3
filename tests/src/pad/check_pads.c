/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the pad definitions' checks (pad/x86_64.c, pad/aarch64.c),
 * run by tests/plugins/test_pad.py: one good pad of each layout, then one pad
 * broken in each way a check can reject it.  Each pad is handed over in a
 * buffer of exactly its size (the harness builds this with AddressSanitizer,
 * so a read past the bytes is caught).  Prints one line per case; exits 1
 * if any case got another verdict than the one expected.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aarch64.h"
#include "x86_64.h"

typedef enum ftpad_pad_verdict (*check_fn)(const struct ftpad_pad_site *, const uint8_t *, size_t);
typedef const char *(*reason_fn)(enum ftpad_pad_verdict);

static int failures;
static unsigned seen[2][FTPAD_PAD_NVERDICTS];

static void expect(int arch, check_fn check, reason_fn reason, const char *name,
		   const struct ftpad_pad_site *rec, const uint8_t *bytes, size_t size,
		   enum ftpad_pad_verdict want)
{
	uint8_t *copy = malloc(size ? size : 1);	/* exactly @size: ASan sees overreads */
	enum ftpad_pad_verdict got;
	const char *why;

	memcpy(copy, bytes, size);
	got = check(rec, copy, size);
	free(copy);
	why = reason(got);
	if (got != want || (got == FTPAD_PAD_OK) != (why == NULL)) {
		printf("FAIL %s: verdict %d (%s), expected %d\n", name, got, why ? why : "ok", want);
		failures++;
		return;
	}
	seen[arch][got]++;
	printf("ok %s: %s\n", name, why ? why : "patchable");
}

/* ---- x86_64 ---- */

/* Cases give their bytes in parentheses: (0x90, 0x90). */
#define UNPAREN(...) __VA_ARGS__

/* One case of machine @arch (0 x86_64, 1 aarch64), whose functions start ftpad_@prefix. */
#define CASE(arch, prefix, name, want, bytes_, ...)                                        \
	do {                                                                               \
		static const uint8_t b[] = { UNPAREN bytes_ };                             \
		struct ftpad_pad_site r = { __VA_ARGS__ };                                 \
		expect(arch, ftpad_##prefix##_pad_check, ftpad_##prefix##_pad_reason,      \
		       #prefix " " name, &r, b, sizeof(b), want);                          \
	} while (0)
#define X(...) CASE(0, x86_64, __VA_ARGS__)
#define A(...) CASE(1, aarch64, __VA_ARGS__)

#define SLOT FTPAD_X86_64_SLOT_NOP
#define NOP5 FTPAD_X86_64_SITE_NOP
#define NOP5_LLVM FTPAD_X86_64_SITE_NOP_LLVM
#define ENDBR FTPAD_X86_64_ENDBR64
#define L5 .site_len = 5

static void x86_64(void)
{
	X("plain", FTPAD_PAD_OK, (NOP5), .entry = 0, .site = 0, L5);
	X("clang's NOP", FTPAD_PAD_OK, (NOP5_LLVM), .entry = 0, .site = 0, L5);
	X("slot, endbr64", FTPAD_PAD_OK, (SLOT, ENDBR, NOP5), .ops = 0, .has_ops = true, .entry = 8,
	  .site = 12, .flags = FTPAD_SITE_ENDBR, L5);
	X("site_len 4", FTPAD_PAD_SITE_LEN, (NOP5), .entry = 0, .site = 0, .site_len = 4);
	X("site past the end", FTPAD_PAD_OUTSIDE, (NOP5), .entry = 0, .site = 1, L5);
	X("slot past the end", FTPAD_PAD_OUTSIDE, (NOP5), .entry = 0, .site = 0, .ops = 1,
	  .has_ops = true, L5);
	X("BTI flag", FTPAD_PAD_FOREIGN_FLAG, (NOP5), .entry = 0, .site = 0, .flags = FTPAD_SITE_BTI, L5);
	X("ENDBR flag, no endbr64", FTPAD_PAD_NO_LANDING_PAD, (0x90, 0x90, 0x90, 0x90, NOP5),
	  .entry = 0, .site = 4, .flags = FTPAD_SITE_ENDBR, L5);
	X("ENDBR flag, entry at the end", FTPAD_PAD_NO_LANDING_PAD, (NOP5, 0xf3), .entry = 5, .site = 0,
	  .flags = FTPAD_SITE_ENDBR, L5);
	X("endbr64 without the flag", FTPAD_PAD_SITE_PLACE, (ENDBR, NOP5), .entry = 0, .site = 4, L5);
	X("site after a NOP", FTPAD_PAD_SITE_PLACE, (0x90, NOP5), .entry = 0, .site = 1, L5);
	X("site of 1-byte NOPs", FTPAD_PAD_SITE_NOT_NOP, (0x90, 0x90, 0x90, 0x90, 0x90), .entry = 0,
	  .site = 0, L5);
	X("site is a call", FTPAD_PAD_SITE_NOT_NOP, (0xe8, 0, 0, 0, 0), .entry = 0, .site = 0, L5);
	X("slot misaligned", FTPAD_PAD_SLOT_MISALIGNED, (0x90, 0x90, 0x90, 0x90, SLOT, NOP5),
	  .ops = 4, .has_ops = true, .entry = 12, .site = 12, L5);
	X("slot of 1-byte NOPs", FTPAD_PAD_SLOT_NOT_NOP, (0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	  0x90, NOP5), .ops = 0, .has_ops = true, .entry = 8, .site = 8, L5);
	/* Exit sites: a NOP anywhere after the entry, in front of a ret (c3). */
	X("exit", FTPAD_PAD_OK, (SLOT, ENDBR, NOP5, 0x90, NOP5, 0xc3), .ops = 0, .has_ops = true,
	  .entry = 8, .site = 18, .kind = FTPAD_SITE_KIND_EXIT, L5);
	X("tail exit, no slot", FTPAD_PAD_OK, (0x90, NOP5_LLVM), .entry = 0, .site = 1,
	  .kind = FTPAD_SITE_KIND_TAIL_EXIT, L5);
	X("kind 3", FTPAD_PAD_UNKNOWN_KIND, (NOP5), .entry = 0, .site = 0, .kind = 3, L5);
	X("exit with ENDBR flag", FTPAD_PAD_EXIT_FLAG, (ENDBR, NOP5), .entry = 0, .site = 4,
	  .kind = FTPAD_SITE_KIND_EXIT, .flags = FTPAD_SITE_ENDBR, L5);
	X("exit is a ret", FTPAD_PAD_SITE_NOT_NOP, (NOP5, 0xc3, 0, 0, 0, 0), .entry = 0, .site = 5,
	  .kind = FTPAD_SITE_KIND_EXIT, L5);
	X("exit, slot of 1-byte NOPs", FTPAD_PAD_SLOT_NOT_NOP, (0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
	  0x90, 0x90, NOP5, NOP5), .ops = 0, .has_ops = true, .entry = 8, .site = 13,
	  .kind = FTPAD_SITE_KIND_EXIT, L5);
}

/* ---- aarch64: instructions as little-endian bytes ---- */

#define I(insn) (insn) & 0xff, (insn) >> 8 & 0xff, (insn) >> 16 & 0xff, (insn) >> 24 & 0xff
#define NOP I(FTPAD_AARCH64_NOP)
#define BTI I(FTPAD_AARCH64_BTI_C)
#define MOV I(FTPAD_AARCH64_MOV_X9_X30)
#define BL I(0x94000000u)
#define L4 .site_len = 4

static void aarch64(void)
{
	A("kernel layout, NOP NOP", FTPAD_PAD_OK, (NOP, NOP), .entry = 0, .site = 4, L4);
	A("user layout, MOV NOP", FTPAD_PAD_OK, (MOV, NOP), .entry = 0, .site = 4,
	  .flags = FTPAD_SITE_MOV_X9, L4);
	A("slot, bti c", FTPAD_PAD_OK, (NOP, NOP, BTI, MOV, NOP), .ops = 0, .has_ops = true,
	  .entry = 8, .site = 16, .flags = FTPAD_SITE_BTI | FTPAD_SITE_MOV_X9, L4);
	A("NOP NOP, MOV written by libftpad", FTPAD_PAD_PREPARED, (MOV, NOP), .entry = 0, .site = 4, L4);
	A("site_len 5", FTPAD_PAD_SITE_LEN, (NOP, NOP), .entry = 0, .site = 4, .site_len = 5);
	A("site past the end", FTPAD_PAD_OUTSIDE, (NOP, NOP), .entry = 0, .site = 8, L4);
	A("ENDBR flag", FTPAD_PAD_FOREIGN_FLAG, (NOP, NOP), .entry = 0, .site = 4,
	  .flags = FTPAD_SITE_ENDBR, L4);
	A("entry misaligned", FTPAD_PAD_MISALIGNED, (0, 0, NOP, NOP, 0, 0), .entry = 2, .site = 6, L4);
	A("BTI flag, no bti c", FTPAD_PAD_NO_LANDING_PAD, (NOP, NOP, NOP), .entry = 0, .site = 8,
	  .flags = FTPAD_SITE_BTI, L4);
	A("site is the first instruction", FTPAD_PAD_SITE_PLACE, (NOP, NOP), .entry = 0, .site = 0, L4);
	A("MOV_X9 flag, NOP", FTPAD_PAD_NO_MOV, (NOP, NOP), .entry = 0, .site = 4,
	  .flags = FTPAD_SITE_MOV_X9, L4);
	A("no room for the MOV", FTPAD_PAD_NO_MOV_ROOM, (BL, NOP), .entry = 0, .site = 4, L4);
	A("site is a BL", FTPAD_PAD_SITE_NOT_NOP, (NOP, BL), .entry = 0, .site = 4, L4);
	A("MOV written, site is a BL", FTPAD_PAD_SITE_NOT_NOP, (MOV, BL), .entry = 0, .site = 4, L4);
	A("slot misaligned", FTPAD_PAD_SLOT_MISALIGNED, (NOP, NOP, NOP, NOP, NOP), .ops = 4,
	  .has_ops = true, .entry = 12, .site = 16, L4);
	A("slot holds a BL", FTPAD_PAD_SLOT_NOT_NOP, (NOP, BL, NOP, NOP), .ops = 0, .has_ops = true,
	  .entry = 8, .site = 12, L4);
	/* Exit sites: one NOP, no MOV in front of it, anywhere after the entry. */
	A("exit", FTPAD_PAD_OK, (NOP, NOP, BTI, MOV, NOP, BL, NOP), .ops = 0, .has_ops = true,
	  .entry = 8, .site = 24, .kind = FTPAD_SITE_KIND_EXIT, L4);
	A("tail exit, no slot", FTPAD_PAD_OK, (BL, NOP), .entry = 0, .site = 4,
	  .kind = FTPAD_SITE_KIND_TAIL_EXIT, L4);
	A("kind 7", FTPAD_PAD_UNKNOWN_KIND, (NOP, NOP), .entry = 0, .site = 4, .kind = 7, L4);
	A("exit with MOV_X9 flag", FTPAD_PAD_EXIT_FLAG, (MOV, NOP), .entry = 0, .site = 4,
	  .kind = FTPAD_SITE_KIND_EXIT, .flags = FTPAD_SITE_MOV_X9, L4);
	A("exit misaligned", FTPAD_PAD_MISALIGNED, (NOP, 0, 0, NOP, 0, 0), .entry = 0, .site = 6,
	  .kind = FTPAD_SITE_KIND_EXIT, L4);
	A("exit is a BL", FTPAD_PAD_SITE_NOT_NOP, (NOP, BL), .entry = 0, .site = 4,
	  .kind = FTPAD_SITE_KIND_EXIT, L4);
	A("exit, slot holds a BL", FTPAD_PAD_SLOT_NOT_NOP, (NOP, BL, NOP, NOP), .ops = 0,
	  .has_ops = true, .entry = 8, .site = 12, .kind = FTPAD_SITE_KIND_EXIT, L4);
}

/* Every verdict a machine can give was given by some case. */
static void every_verdict(int arch, const char *name, unsigned skip)
{
	for (int v = 0; v < FTPAD_PAD_NVERDICTS; v++)
		if (!(skip & 1u << v) && !seen[arch][v]) {
			printf("FAIL %s: no case gave verdict %d\n", name, v);
			failures++;
		}
}

int main(void)
{
	x86_64();
	aarch64();
	every_verdict(0, "x86_64", 1u << FTPAD_PAD_PREPARED | 1u << FTPAD_PAD_MISALIGNED |
					   1u << FTPAD_PAD_NO_MOV | 1u << FTPAD_PAD_NO_MOV_ROOM);
	every_verdict(1, "aarch64", 0);
	printf("%d failure%s\n", failures, failures == 1 ? "" : "s");
	return failures != 0;
}
