// SPDX-License-Identifier: MIT
// arch-aarch64.cc - the aarch64 layouts.  The user layout, the GCC
// plugin's:
//
//         [filler][before: B NOPs][ops slot: 2 NOPs = 8 bytes, 8-aligned]
// func:   [bti c where branch protection needs a landing pad]
//         [mov x9, x30][site: nop][rest of after, NOPs]
//
// The code generator hook (machine.cc) writes the MOV, so that enabling a
// site changes one instruction, NOP to BL.  Where the hook does not run (a
// -flto link generates the code), LLVM's own patchable entry stands in, and
// that is NOPs only: then the first unit is a NOP, the record goes without
// FTPAD_SITE_MOV_X9, and libftpad writes the MOV itself (docs/format.md).
// `after` counts the MOV and the site, so it is at least 2.
//
// The kernel layout is what -fpatchable-function-entry=4,2 (CALL_OPS, with
// ops=1) or =2 (ops=0) gives: [ops literal: 2 NOPs] func: [bti c] nop; nop,
// with the literal always 8-aligned.
#include "arch.h"
#include "../pad/ftpad_site.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Module.h"

#include <algorithm>

using namespace llvm;

namespace {

const char NOP[4] = {0x1f, 0x20, 0x03, (char)0xd5}; // d503201f, little-endian

// AArch64BranchTargets puts `bti c` first in a function whose address is
// taken or that is not local, when branch target enforcement is on: the
// function's own "branch-target-enforcement" attribute (from
// __attribute__((target("branch-protection=...")))), else the module flag
// (-mbranch-protection=bti|standard).  F's record takes its address.
unsigned landing_pad_flag(const Function &F)
{
	if (F.hasFnAttribute("branch-target-enforcement"))
		return F.getFnAttribute("branch-target-enforcement").getValueAsString().equals_insensitive("true")
			       ? FTPAD_SITE_BTI
			       : 0;
	auto *flag = mdconst::extract_or_null<ConstantInt>(
		F.getParent()->getModuleFlag("branch-target-enforcement"));
	return flag && !flag->isZero() ? FTPAD_SITE_BTI : 0;
}

unsigned entry_align(unsigned)
{
	// Every instruction is 4 bytes and 4-aligned, so the site never
	// crosses a cache line; 8 keeps the ops slot at entry-8 8-aligned.
	return 8;
}

void append_filler(std::string &out, unsigned bytes)
{
	for (unsigned i = 0; i < bytes / 4; i++)
		out.append(NOP, 4);
}

void append_nops(std::string &out, unsigned units)
{
	append_filler(out, 4 * units);
}

void append_ops_slot(std::string &out)
{
	append_nops(out, 2);
}

// The caller's return address, which the BL at the site overwrites; the
// trampoline gives it back in x30.  Without mov (the kernel ABI, where Linux
// writes the MOV at boot) a NOP in its place.
std::string entry_asm(ftpad_abi abi, unsigned after, bool mcount, bool mov)
{
	std::string s = abi == FTPAD_ABI_USER && mov ? "mov\tx9, x30" : "nop";
	s += "\n1:\tnop";
	for (unsigned i = 2; i < after; i++)
		s += "\n\tnop";
	if (mcount)
		s += "\n\t.pushsection __mcount_loc,\"a\",%progbits\n\t.8byte 1b\n\t.popsection";
	return s;
}

// One NOP and no MOV: the runtime makes it a B to a stub of its own, which
// saves x30 (it holds the return address, or a tail call's target expects
// it there).
std::string exit_asm(const std::string &label)
{
	return label + ":\tnop";
}

// LLVM's NOPs are the same NOPs.
bool llvm_entry_suffices(ftpad_abi, unsigned)
{
	return true;
}

// How many of x0-x7 and v0-v7 F's parameters take, as clang lowers them
// for the AAPCS64, or false where a parameter is something this does not
// follow (then no argument register is clobbered).
bool argument_registers(const Function &F, unsigned &gprs, unsigned &fprs)
{
	gprs = fprs = 0;
	for (const Argument &a : F.args()) {
		Type *t = a.getType();
		unsigned n = 1;
		if (a.hasStructRetAttr() || a.hasNestAttr())
			continue; // x8, x18
		if (t->isArrayTy()) { // homogeneous aggregates: [N x double], [N x i64]
			n = t->getArrayNumElements();
			t = t->getArrayElementType();
		}
		if (t->isPointerTy() || (t->isIntegerTy() && t->getIntegerBitWidth() <= 64))
			gprs += n;
		else if (t->isIntegerTy(128))
			gprs += 2 * n + gprs % 2; // an even pair
		else if (t->isFloatingPointTy() || (t->isVectorTy() && t->getPrimitiveSizeInBits() <= 128))
			fprs += n;
		else
			return false;
	}
	return true;
}

std::string ipra_clobbers(const Function &F)
{
	// x9-x17 and v16-v31 never carry an argument.  v8-v15 are callee-saved
	// in their low halves, and clobbering them would make F save those.
	std::string s = "~{x9}";
	for (unsigned i = 10; i < 18; i++)
		s += ",~{x" + std::to_string(i) + "}";
	for (unsigned i = 16; i < 32; i++)
		s += ",~{q" + std::to_string(i) + "}";
	unsigned gprs, fprs;
	if (F.isVarArg() || !argument_registers(F, gprs, fprs))
		return s;
	if (!std::any_of(F.arg_begin(), F.arg_end(), [](const Argument &a) { return a.hasStructRetAttr(); }))
		s += ",~{x8}";
	for (unsigned i = gprs; i < 8; i++)
		s += ",~{x" + std::to_string(i) + "}";
	for (unsigned i = fprs; i < 8; i++)
		s += ",~{q" + std::to_string(i) + "}";
	return s;
}

std::string conflict(const Function &F)
{
	if (F.hasFnAttribute("xray-instruction-threshold") || F.hasFnAttribute("function-instrument"))
		return "-fxray-instrument puts its sled first in the function, where the site must be";
	return "";
}

} // namespace

const FtpadArch ftpad_arch_aarch64 = {
	&ftpad_layout_aarch64,
	"R_AARCH64_NONE",
	ipra_clobbers,
	landing_pad_flag, entry_align, append_filler, append_nops, append_ops_slot,
	entry_asm, llvm_entry_suffices, exit_asm, conflict,
};
