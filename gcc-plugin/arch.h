// SPDX-License-Identifier: MIT
// arch.h - what the generic plugin asks of a target.  Each target has one
// file, arch-<target>.cc, that defines every function below; CMake builds
// the plugin once per compiler and picks the file from `gcc -dumpmachine`.
#ifndef FTPAD_ARCH_H
#define FTPAD_ARCH_H

#include <cstdio>
#include <string>

#include "gcc-common.h"
#include "core.h"

// The target's layout facts in each ABI (plugin-core/layout.c).
const ftpad_arch_layout &ftpad_arch_target(void);

// A reason the compiler's options cannot go with the plugin's sites, or
// NULL.  Asked once the options are final, at the first function.
const char *ftpad_arch_conflicting_options(void);

// The first instruction of the function being assembled, or NULL.
inline rtx_insn *ftpad_first_real_insn(void)
{
	rtx_insn *insn = get_insns();
	return insn && !NONDEBUG_INSN_P(insn) ? next_real_nondebug_insn(insn) : insn;
}

// Is INSN the landing pad (ENDBR, BTI) that must stay first at the entry?
// Returns its record flag, or 0.
unsigned ftpad_arch_landing_pad_flag(rtx_insn *insn);

// For an asm thunk (output_mi_thunk), which no RTL pass sees: take the
// landing pad the target put first in its insns out of them and return it
// as assembly, to print before the site; *flag gets its record flag.
std::string ftpad_arch_thunk_landing_pad(unsigned *flag);

// The landing pad flag of the function being assembled, for targets that
// add a landing pad of their own in ftpad_arch_after_entry_asm(); 0 else.
unsigned ftpad_arch_own_landing_pad_flag(void);

// The alignment of the entry that keeps the ops slot 8-byte aligned and the
// site inside one cache line, given the landing pad flag.
unsigned ftpad_arch_entry_align(unsigned landing_pad_flag);

// Emit BYTES of never-executed filler, and UNITS of NOP units.
void ftpad_arch_emit_filler(FILE *f, unsigned bytes);
void ftpad_arch_emit_nops(FILE *f, unsigned units);

// Emit the 8-byte ops slot, as the target's 8 bytes of NOP.
void ftpad_arch_emit_ops_slot(FILE *f);

// Assembly for the part after the entry, behind any landing pad: AFTER
// units, the first labelled POST_LABEL and the patchable one SITE_LABEL.
std::string ftpad_arch_after_entry_asm(ftpad_abi abi, const char *post_label,
				       const char *site_label, unsigned after);

// Assembly for a pad too small for a site (ftpad_below_site): AFTER NOP
// units behind the landing pad, the first labelled LABEL, exactly as GCC's
// -fpatchable-function-entry writes them, landing pad included.
std::string ftpad_arch_compiler_pad_asm(const char *label, unsigned after);

// Assembly for one exit site labelled LABEL: the site NOP alone, on ONE
// line, so that GCC's length estimate for the asm (a line is one insn of
// the target's default length) is exact where branch ranges depend on it.
std::string ftpad_arch_exit_site_asm(const char *label);

#endif
