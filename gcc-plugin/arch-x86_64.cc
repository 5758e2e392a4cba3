// SPDX-License-Identifier: MIT
// arch-x86_64.cc - the x86_64 layouts.  The user layout (docs/design.md "Pad
// layouts"):
//
//         [filler][before: B bytes of 0x90][ops slot: 8 bytes, 8-aligned]
// func:   [endbr64 where -fcf-protection asks for it]
//         [site: ONE 5-byte NOP 0f 1f 44 00 00][rest of after, multi-byte NOPs]
//
// One 5-byte NOP, never five 0x90s: a thread preempted between single-byte
// NOPs would resume inside a half-written call once the site is patched.
//
// The kernel layout is what -pg -mfentry -mrecord-mcount -mnop-mcount gives,
// plus -fpatchable-function-entry=N,N for CALL_PADDING: N bytes of 0x90
// before the entry at GCC's own alignment, [endbr64] and the 5-byte NOP,
// recorded in __mcount_loc.  There is no ops slot in Linux's x86 layout.
// CALL_PADDING (before=N) goes on every function, notrace ones too, since
// it serves call depth tracking rather than tracing.
#include "arch.h"
#include "../pad/x86_64.h"

const ftpad_arch_layout &ftpad_arch_target(void)
{
	return ftpad_layout_x86_64; // plugin-core/layout.c
}

unsigned ftpad_arch_landing_pad_flag(rtx_insn *insn)
{
	rtx pat = PATTERN(insn);
	if (GET_CODE(pat) == UNSPEC_VOLATILE && XINT(pat, 1) == UNSPECV_NOP_ENDBR)
		return FTPAD_SITE_ENDBR;
	return 0;
}

const char *ftpad_arch_conflicting_options(void)
{
	if (profile_flag && flag_fentry)
		return "-pg -mfentry puts a call first in every function, where the site "
		       "must be; use -fplugin-arg-ftpad-abi=kernel in place of -pg -mfentry";
	return NULL;
}

std::string ftpad_arch_thunk_landing_pad(unsigned *flag)
{
	rtx_insn *insn = ftpad_first_real_insn();
	*flag = insn ? ftpad_arch_landing_pad_flag(insn) : 0;
	if (!*flag)
		return "";
	delete_insn(insn);
	return "endbr64\n";
}

unsigned ftpad_arch_own_landing_pad_flag(void)
{
	return 0; // GCC's ENDBR pass already gave every function that needs one
}

unsigned ftpad_arch_entry_align(unsigned landing_pad_flag)
{
	// Without ENDBR the site starts at the 8-aligned entry, so its 5 bytes
	// never cross a 64-byte line.  Behind the 4-byte ENDBR it starts at
	// entry+4, which only stays inside a line if the entry is 16-aligned.
	return landing_pad_flag ? 16 : 8;
}

void ftpad_arch_emit_filler(FILE *f, unsigned bytes)
{
	if (bytes)
		fprintf(f, "\t.nops %u\n", bytes);
}

void ftpad_arch_emit_nops(FILE *f, unsigned units)
{
	if (units)
		fprintf(f, "\t.fill %u, 1, 0x90\n", units);
}

void ftpad_arch_emit_ops_slot(FILE *f)
{
	fputs("\t" FTPAD_PAD_ASM_BYTES(FTPAD_X86_64_SLOT_NOP) "\n", f);
}

std::string ftpad_arch_after_entry_asm(ftpad_abi abi, const char *post_label,
				       const char *site_label, unsigned after)
{
	// Both ABIs: the site is the first thing behind ENDBR.
	std::string s = std::string(post_label) + ":\n" + site_label +
			":\n\t" FTPAD_PAD_ASM_BYTES(FTPAD_X86_64_SITE_NOP);
	if (after > 5)
		s += "\n\t.nops " + std::to_string(after - 5);
	return s;
}

std::string ftpad_arch_compiler_pad_asm(const char *label, unsigned after)
{
	// Single-byte NOPs behind ENDBR, as GCC writes them: no site, so no
	// thread can be caught inside a half-written call.
	std::string s = std::string(label) + ":";
	for (unsigned i = 0; i < after; i++)
		s += "\n\tnop";
	return s;
}

std::string ftpad_arch_exit_site_asm(const char *label)
{
	// The same 5-byte NOP as the entry: it too becomes a call.
	return std::string(label) + ": " FTPAD_PAD_ASM_BYTES(FTPAD_X86_64_SITE_NOP);
}
