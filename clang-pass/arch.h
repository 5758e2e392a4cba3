// SPDX-License-Identifier: MIT
// arch.h - what the plugin asks of a target.  clang is a cross compiler, so
// one ftpad-clang.so serves every target: each arch-<target>.cc defines one
// `const FtpadArch` (with static helpers of the same names in each file), and
// ftpad_arch_for() picks one from the module's triple at run time, as
// recordmcount-ng picks its backend from e_machine.
#ifndef FTPAD_CLANG_ARCH_H
#define FTPAD_CLANG_ARCH_H

#include <string>

#include "core.h"

namespace llvm {
class Function;
class Triple;
}

struct FtpadArch {
	// The layout facts, the GCC plugin's too (plugin-core/layout.c).
	const ftpad_arch_layout *layout;
	const char *reloc_none;      // R_*_NONE, for a reference that adds no bytes
	// Inline asm clobbers of every call-clobbered register that carries
	// none of F's arguments (those are live at its entry): whatever IPRA
	// sees a function clobber, no caller keeps a value in.  An enabled
	// site's callback, or a function it redirects to, may change them all.
	std::string (*ipra_clobbers)(const llvm::Function &F);

	// The record flag (FTPAD_SITE_ENDBR/_BTI) of the landing pad LLVM will
	// put first in F, whose address the record takes; 0 for none.
	unsigned (*landing_pad_flag)(const llvm::Function &F);
	// The entry alignment that keeps the ops slot 8-aligned and the site
	// inside one cache line, given the landing pad flag.
	unsigned (*entry_align)(unsigned landing_flag);
	// Bytes before the entry, for prefix data: never-executed filler, NOP
	// units, and the 8-byte ops slot as the target's 8 bytes of NOP.
	void (*append_filler)(std::string &out, unsigned bytes);
	void (*append_nops)(std::string &out, unsigned units);
	void (*append_ops_slot)(std::string &out);
	// The part after the entry, behind the landing pad, as assembly: AFTER
	// units with the site, and with mcount an __mcount_loc entry for it.
	// machine.cc puts it at the entry, before the prologue.  With mov, the
	// user ABI's instruction that saves the return address for the
	// trampoline (aarch64: mov x9, x30) is in it, where it has one.
	std::string (*entry_asm)(ftpad_abi abi, unsigned after, bool mcount, bool mov);
	// Can LLVM's own "patchable-function-entry"=AFTER stand in for
	// entry_asm where the plugin's code generator hook does not run (LTO
	// code generation in the linker)?  Only where its NOPs have the
	// layout's shape: it writes the longest NOPs first.
	bool (*llvm_entry_suffices)(ftpad_abi abi, unsigned after);
	// An exit site as assembly (docs/format.md "Exit sites"): LABEL, then
	// the one site NOP, nothing else.  machine.cc puts it right in front of
	// a return or a tail call's jump.
	std::string (*exit_asm)(const std::string &label);
	// A reason an option F was compiled with conflicts with a pad, or "".
	std::string (*conflict)(const llvm::Function &F);
};

// The layout facts of ARCH in ABI (plugin-core/layout.c).
const ftpad_abi_layout &ftpad_abi_info(const FtpadArch &arch, ftpad_abi abi);

// The target's backend, or nullptr where ftpad has no layout.
const FtpadArch *ftpad_arch_for(const llvm::Triple &triple);

extern const FtpadArch ftpad_arch_x86_64;
extern const FtpadArch ftpad_arch_aarch64;

#endif
