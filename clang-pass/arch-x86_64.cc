// SPDX-License-Identifier: MIT
// arch-x86_64.cc - the x86_64 layouts, as the GCC plugin's
// (gcc-plugin/arch-x86_64.cc).  The user layout:
//
//         [filler][before: B bytes of 0x90][ops slot: 8 bytes, 8-aligned]
// func:   [endbr64 where -fcf-protection asks for it]
//         [site: ONE 5-byte NOP 0f 1f 44 00 00][rest of after, multi-byte NOPs]
//
// The kernel layout is what GCC's -pg -mfentry -mrecord-mcount -mnop-mcount
// gives, plus -fpatchable-function-entry=N,N for CALL_PADDING: N bytes of
// 0x90 before the entry at the compiler's own alignment, [endbr64] and the
// 5-byte NOP, recorded in __mcount_loc.  clang 14 rejects -mrecord-mcount
// and -mnop-mcount on x86 (Linux runs objtool instead), so the NOP and its
// record come from the plugin's code generator hook (machine.cc).
#include "arch.h"
#include "../pad/x86_64.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Module.h"

#include <algorithm>

using namespace llvm;

namespace {

// X86IndirectBranchTracking puts endbr64 first in every function that is
// not local or has its address taken, once the module has
// "cf-protection-branch" (-fcf-protection=branch|full), unless the function
// is nocf_check.  F's record takes its address, so the module flag decides.
unsigned landing_pad_flag(const Function &F)
{
	auto *flag = mdconst::extract_or_null<ConstantInt>(
		F.getParent()->getModuleFlag("cf-protection-branch"));
	return flag && !flag->isZero() && !F.doesNoCfCheck() ? FTPAD_SITE_ENDBR : 0;
}

unsigned entry_align(unsigned landing_flag)
{
	// Without ENDBR the site starts at the 8-aligned entry, so its 5 bytes
	// never cross a 64-byte line.  Behind the 4-byte ENDBR it starts at
	// entry+4, which only stays inside a line if the entry is 16-aligned.
	return landing_flag ? 16 : 8;
}

// Multi-byte NOPs: the filler is never executed, but a disassembler reads
// it as NOPs rather than as garbage.
void append_filler(std::string &out, unsigned bytes)
{
	static const char *const nops[] = {
		"", "\x90", "\x66\x90", "\x0f\x1f\x00", "\x0f\x1f\x40\x00",
		"\x0f\x1f\x44\x00\x00", "\x66\x0f\x1f\x44\x00\x00",
		"\x0f\x1f\x80\x00\x00\x00\x00",
	};
	while (bytes) {
		unsigned n = bytes < 7 ? bytes : 7;
		out.append(nops[n], n);
		bytes -= n;
	}
}

void append_nops(std::string &out, unsigned units)
{
	out.append(units, '\x90');
}

void append_ops_slot(std::string &out)
{
	static const unsigned char slot[8] = {FTPAD_X86_64_SLOT_NOP};
	out.append(reinterpret_cast<const char *>(slot), sizeof(slot));
}

// GCC's own 5-byte NOP.  LLVM's is 0f 1f 44 00 08, and for a longer entry
// LLVM writes one longer NOP: neither is the layout.
std::string entry_asm(ftpad_abi, unsigned after, bool mcount, bool)
{
	std::string s = "1:\t" FTPAD_PAD_ASM_BYTES(FTPAD_X86_64_SITE_NOP);
	if (after > 5)
		s += "\n\t.nops " + std::to_string(after - 5);
	// Linux's __mcount_loc, exactly as -mrecord-mcount writes it: one
	// section per file, no alignment, the NOP's absolute address.
	if (mcount)
		s += "\n\t.pushsection __mcount_loc,\"a\",@progbits\n\t.quad 1b\n\t.popsection";
	return s;
}

// The entry site's NOP: the runtime enables both kinds the same way.
std::string exit_asm(const std::string &label)
{
	return label + ":\t" FTPAD_PAD_ASM_BYTES(FTPAD_X86_64_SITE_NOP);
}

// "patchable-function-entry"="5" is one 5-byte NOP (0f 1f 44 00 08, which
// libftpad accepts too); the kernel's checks want GCC's bytes.
bool llvm_entry_suffices(ftpad_abi abi, unsigned after)
{
	return abi == FTPAD_ABI_USER && after == 5;
}

// The SysV classes of F's parameters as clang lowers them: how many
// general and SSE argument registers they take, or false where a parameter
// is something this does not follow (then nothing of that kind is clobbered).
bool argument_registers(const Function &F, unsigned &gprs, unsigned &sses)
{
	gprs = sses = 0;
	for (const Argument &a : F.args()) {
		Type *t = a.getType();
		if (a.hasByValAttr() || a.hasInAllocaAttr() || a.hasPreallocatedAttr() ||
		    t->isX86_FP80Ty())
			continue; // on the stack
		if (a.hasNestAttr())
			continue; // r10, never clobbered
		if (t->isPointerTy() || (t->isIntegerTy() && t->getIntegerBitWidth() <= 64))
			gprs++;
		else if (t->isIntegerTy(128))
			gprs += 2;
		else if (t->isFloatingPointTy() || (t->isVectorTy() && t->getPrimitiveSizeInBits() <= 128))
			sses++;
		else
			return false;
	}
	return true;
}

std::string ipra_clobbers(const Function &F)
{
	static const char *const gpr[] = {"rdi", "rsi", "rdx", "rcx", "r8", "r9"};
	std::string s = "~{r11}";
	for (unsigned i = 8; i < 16; i++)
		s += ",~{xmm" + std::to_string(i) + "}";
	unsigned gprs, sses;
	if (F.isVarArg() || !argument_registers(F, gprs, sses))
		return s; // %al, or registers this does not follow: leave them
	s += ",~{rax}";
	if (!std::any_of(F.arg_begin(), F.arg_end(), [](const Argument &a) { return a.hasNestAttr(); }))
		s += ",~{r10}";
	for (unsigned i = gprs; i < 6; i++)
		s += std::string(",~{") + gpr[i] + "}";
	for (unsigned i = sses; i < 8; i++)
		s += ",~{xmm" + std::to_string(i) + "}";
	return s;
}

std::string conflict(const Function &F)
{
	if (F.getFnAttribute("fentry-call").getValueAsString() == "true")
		return "-pg -mfentry puts a call first in every function, where the site must be; "
		       "use -fplugin-arg-ftpad-abi=kernel in place of -pg -mfentry";
	if (F.hasFnAttribute("xray-instruction-threshold") || F.hasFnAttribute("function-instrument"))
		return "-fxray-instrument puts its sled first in the function, where the site must be";
	return "";
}

} // namespace

const FtpadArch ftpad_arch_x86_64 = {
	&ftpad_layout_x86_64,
	"R_X86_64_NONE",
	ipra_clobbers,
	landing_pad_flag, entry_align, append_filler, append_nops, append_ops_slot,
	entry_asm, llvm_entry_suffices, exit_asm, conflict,
};
