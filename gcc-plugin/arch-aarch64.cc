// SPDX-License-Identifier: MIT
// arch-aarch64.cc - the aarch64 layouts.  The user layout (docs/design.md "Pad
// layouts"):
//
//         [filler][before: B NOPs][ops slot: 2 NOPs = 8 bytes, 8-aligned]
// func:   [bti c where branch protection needs a landing pad]
//         [mov x9, x30][site: nop][rest of after, NOPs]
//
// The plugin emits mov x9, x30 itself, so enabling a site changes exactly
// one instruction, NOP to BL, which the architecture allows while other
// cores run it.  `after` counts the MOV, so it is at least 2.
//
// The kernel layout is what -fpatchable-function-entry=4,2 (CALL_OPS, with
// ops=1) or =2 (ops=0) gives: [ops literal: 2 NOPs] func: [bti c] nop; nop.
// Linux writes mov x9, x30 into the first NOP itself at boot, so the site is
// the second.  Unlike GCC at -Os or with max-skip alignment, the literal is
// always 8-aligned, and each function's record has a section of its own.
#include "arch.h"
#include "../pad/ftpad_site.h"

// aarch64_bti_enabled(), from the cross compiler's target headers.
#include "tm_p.h"

namespace {

bool is_bti_c(rtx_insn *insn)
{
	if (!insn || !INSN_P(insn))
		return false;
	rtx pat = PATTERN(insn);
	return GET_CODE(pat) == UNSPEC_VOLATILE && XINT(pat, 1) == UNSPECV_BTI_C;
}

// Does the current function need a landing pad at its entry?  The same
// test GCC's own patchable-entry hook uses: only functions whose address
// may be taken can be reached by an indirect branch.
bool needs_landing_pad(void)
{
	if (!aarch64_bti_enabled() || !current_function_decl)
		return false;
	cgraph_node *node = cgraph_node::get(current_function_decl);
	return !node || !node->only_called_directly_p();
}

// GCC's bti pass skips functions that start with PACIASP, which is itself a
// landing pad, but only while it is the first instruction.  Our mov x9, x30
// goes in front of it, so such a function needs a BTI C of our own, as
// GCC's -fpatchable-function-entry gives it.
bool needs_own_bti(void)
{
	// Thunks get theirs from ftpad_arch_thunk_landing_pad().
	return needs_landing_pad() && !cfun->is_thunk &&
	       !is_bti_c(ftpad_first_real_insn());
}

} // namespace

const ftpad_arch_layout &ftpad_arch_target(void)
{
	return ftpad_layout_aarch64; // plugin-core/layout.c
}

unsigned ftpad_arch_landing_pad_flag(rtx_insn *insn)
{
	return is_bti_c(insn) ? FTPAD_SITE_BTI : 0;
}

const char *ftpad_arch_conflicting_options(void)
{
	return NULL; // -pg calls _mcount after the prologue, behind the site
}

std::string ftpad_arch_thunk_landing_pad(unsigned *flag)
{
	// As GCC's own patchable-entry hook does for thunks: the BTI the
	// thunk code starts with moves in front of the pad.
	rtx_insn *insn = ftpad_first_real_insn();
	if (is_bti_c(insn))
		delete_insn(insn);
	*flag = needs_landing_pad() ? FTPAD_SITE_BTI : 0;
	return *flag ? "hint\t34 // bti c\n" : "";
}

unsigned ftpad_arch_own_landing_pad_flag(void)
{
	// Called while the function is assembled: a function that needs a
	// landing pad has one at its entry, GCC's or ours (needs_own_bti).
	return needs_landing_pad() ? FTPAD_SITE_BTI : 0;
}

unsigned ftpad_arch_entry_align(unsigned landing_pad_flag)
{
	// Every instruction is 4 bytes and 4-aligned, so the site can never
	// cross a cache line; 8 keeps the ops slot at entry-8 8-aligned.
	return 8;
}

// NOPs as instructions, not data: .fill would add $d mapping symbols, so
// disassemblers would show .word and the object would differ from GCC's
// own -fpatchable-function-entry output.  One line each, as GCC writes
// them, so that GCC's own tests can count them in the assembly.
std::string nops(unsigned count)
{
	std::string s;
	for (unsigned i = 0; i < count; i++)
		s += "\tnop\n";
	return s;
}

void ftpad_arch_emit_filler(FILE *f, unsigned bytes)
{
	fputs(nops(bytes / 4).c_str(), f);
}

void ftpad_arch_emit_nops(FILE *f, unsigned units)
{
	fputs(nops(units).c_str(), f);
}

void ftpad_arch_emit_ops_slot(FILE *f)
{
	fputs(nops(2).c_str(), f);
}

std::string ftpad_arch_after_entry_asm(ftpad_abi abi, const char *post_label,
				       const char *site_label, unsigned after)
{
	std::string s;
	if (needs_own_bti())
		s += "// PACIASP is no longer first\n\thint\t34 // bti c\n";
	s += std::string(post_label) + ":\n\t";
	// The caller's return address, which BL at the site overwrites; the
	// trampoline gives it back in x30.  Linux writes this MOV at boot.
	s += abi == FTPAD_ABI_KERNEL ? "nop\n" : "mov\tx9, x30\n";
	s += std::string(site_label) + ":\n\tnop\n" + nops(after - 2);
	return s;
}

std::string ftpad_arch_compiler_pad_asm(const char *label, unsigned after)
{
	// GCC's hook moves the landing pad in front of its NOPs, and gives a
	// function that starts with PACIASP a BTI of its own, only when there
	// are NOPs behind the entry.
	std::string s;
	if (after && needs_own_bti())
		s += "// PACIASP is no longer first\n\thint\t34 // bti c\n";
	return s + label + ":\n" + nops(after);
}

std::string ftpad_arch_exit_site_asm(const char *label)
{
	// No mov x9, x30: the runtime makes this NOP a B to a stub of the
	// site's own, which keeps x30 (docs/format.md "Exit sites").
	return std::string(label) + ": nop";
}
