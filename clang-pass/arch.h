// SPDX-License-Identifier: MIT
// arch.h - what the plugin asks of a target.  clang is a cross compiler, so
// one ftpad-clang.so serves every target: each arch-<target>.cc defines one
// `const FtpadArch` (with static helpers of the same names in each file), and
// ftpad_arch_for() picks one from the module's triple at run time, as
// recordmcount-ng picks its backend from e_machine.
#ifndef FTPAD_CLANG_ARCH_H
#define FTPAD_CLANG_ARCH_H

#include <string>

namespace llvm {
class Function;
class Triple;
}

// The two ABIs of DESIGN.md: ftpad's own user layout, and exactly what Linux
// expects from its compiler flags.
enum FtpadAbi { FTPAD_ABI_USER, FTPAD_ABI_KERNEL };

// Where a site's address is recorded.
enum FtpadRecordKind {
	FTPAD_RECORD_FTPAD,     // __ftpad_sites (docs/format.md)
	FTPAD_RECORD_MCOUNT,    // __mcount_loc, as -mrecord-mcount writes it
	FTPAD_RECORD_PATCHABLE, // __patchable_function_entries, one section per function
};

// Fixed facts about a target's layout in one ABI; the GCC plugin's table
// (gcc-plugin/arch.h), so that both plugins take the same arguments.
struct FtpadAbiInfo {
	unsigned min_after;          // fewest units after the entry that hold a site
	unsigned default_after;
	bool default_ops;
	bool ops_allowed;            // the ABI has a place for an ops slot at all
	bool own_alignment;          // force the entry's alignment (else LLVM's stays)
	bool align_without_ops;      // ... even when there is no ops slot
	bool before_everywhere;      // `before` pads every function (CALL_PADDING)
	// The layout is exactly LLVM's own -fpatchable-function-entry=N,M, so
	// with record=patchable LLVM's own attributes give it, record included.
	bool llvm_patchable_entry;
	FtpadRecordKind default_record;
	unsigned layout_flags;       // record flags every site of this layout has
};

struct FtpadArch {
	const char *name;            // "x86_64"
	unsigned record_arch;        // enum ftpad_site_arch
	unsigned unit_bytes;         // one NOP unit: 1 on x86_64, 4 on aarch64
	unsigned site_bytes;         // the patchable instruction
	// From the end of the landing pad (ENDBR/BTI) to the site.
	unsigned site_offset;
	FtpadAbiInfo user, kernel;
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
	std::string (*entry_asm)(FtpadAbi abi, unsigned after, bool mcount, bool mov);
	// The record flag that says entry_asm wrote that instruction, or 0.
	unsigned mov_flag;
	// Can LLVM's own "patchable-function-entry"=AFTER stand in for
	// entry_asm where the plugin's code generator hook does not run (LTO
	// code generation in the linker)?  Only where its NOPs have the
	// layout's shape: it writes the longest NOPs first.
	bool (*llvm_entry_suffices)(FtpadAbi abi, unsigned after);
	// A reason an option F was compiled with conflicts with a pad, or "".
	std::string (*conflict)(const llvm::Function &F);
};

const FtpadAbiInfo &ftpad_abi_info(const FtpadArch &arch, FtpadAbi abi);

// The target's backend, or nullptr where ftpad has no layout.
const FtpadArch *ftpad_arch_for(const llvm::Triple &triple);

extern const FtpadArch ftpad_arch_x86_64;
extern const FtpadArch ftpad_arch_aarch64;

#endif
