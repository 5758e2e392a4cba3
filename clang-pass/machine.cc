// SPDX-License-Identifier: MIT
// machine.cc - the plugin's hook in LLVM 14's code generator: it writes the
// part of a pad after the entry, behind ENDBR/BTI and before the prologue.
//
// Nothing at the IR level can put chosen bytes there: inline asm lands after
// the prologue, and LLVM's own "patchable-function-entry" writes NOPs of its
// own choice (on x86 one NOP as long as the whole count, and a 5-byte NOP
// that is not GCC's).  LLVM 14 has no plugin hook in CodeGen either.  But the
// legacy pass manager that runs CodeGen creates each of its passes through
// the constructor stored in the pass's PassInfo, in a registry every loaded
// object shares, and PassInfo::setNormalCtor() is public.  So at load time
// the plugin gives "fentry-insert" (FEntryInserter) a constructor of its
// own.  That pass runs on every function on every target, after prologue
// insertion and block placement, before XRay, "patchable-function" and the
// target's pre-emit passes, which put ENDBR (x86) or BTI (aarch64) first in
// the entry block, in front of whatever is there.  Our replacement does
// FEntryInserter's whole job (a FENTRY_CALL for "fentry-call"="true") and,
// for a function the IR pass gave an FTPAD_ENTRY_ASM attribute, puts its
// assembly first in the entry block as an INLINEASM instruction.
//
// The IR pass also leaves LLVM's own "patchable-function-entry" on the
// function, as the layout to fall back on where this hook does not run: a
// -flto link generates code in the linker, which never loads the plugin.
// Here it is removed, so that LLVM emits neither its NOPs nor its
// __patchable_function_entries record.
#include "ftpad-clang.h"

#include "llvm/CodeGen/MachineFunction.h"
#include "llvm/CodeGen/MachineFunctionPass.h"
#include "llvm/CodeGen/MachineInstrBuilder.h"
#include "llvm/CodeGen/Passes.h"
#include "llvm/CodeGen/TargetInstrInfo.h"
#include "llvm/CodeGen/TargetSubtargetInfo.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/InitializePasses.h"
#include "llvm/PassInfo.h"
#include "llvm/PassRegistry.h"

using namespace llvm;

const char *const FTPAD_ENTRY_ASM = "ftpad-entry-asm";

namespace {

bool installed;

struct EntryPass : MachineFunctionPass {
	// FEntryInserter's ID: -debug-pass, -start-after=fentry-insert and the
	// like keep working, and nothing else refers to ours.
	EntryPass() : MachineFunctionPass(FEntryInserterID) {}

	StringRef getPassName() const override
	{
		return "Insert fentry calls and ftpad entries";
	}

	bool runOnMachineFunction(MachineFunction &MF) override
	{
		Function &F = MF.getFunction();
		MachineBasicBlock &first = *MF.begin();
		const TargetInstrInfo *tii = MF.getSubtarget().getInstrInfo();
		if (F.getFnAttribute("fentry-call").getValueAsString() == "true") {
			// FEntryInserter::runOnMachineFunction, unchanged.
			BuildMI(first, first.begin(), DebugLoc(), tii->get(TargetOpcode::FENTRY_CALL));
			return true;
		}
		if (!F.hasFnAttribute(FTPAD_ENTRY_ASM))
			return false;
		// A branch back to the entry block would run the site again: LLVM
		// never makes one (IR entry blocks have no predecessors), but say
		// so rather than emit a wrong pad if it ever does.
		if (!first.pred_empty()) {
			F.getContext().diagnose(DiagnosticInfoUnsupported(
				F, "ftpad: the entry block is a branch target; no pad"));
			return false;
		}
		std::string text = F.getFnAttribute(FTPAD_ENTRY_ASM).getValueAsString().str();
		BuildMI(first, first.begin(), DebugLoc(), tii->get(TargetOpcode::INLINEASM))
			.addExternalSymbol(MF.createExternalSymbolName(text))
			.addImm(InlineAsm::Extra_HasSideEffects);
		F.removeFnAttr(FTPAD_ENTRY_ASM);
		F.removeFnAttr("patchable-function-entry");
		return true;
	}
};

Pass *create_entry_pass()
{
	return new EntryPass();
}

// Runs when clang loads the shared object, before CodeGen builds its
// pipeline.  TargetPassConfig registers the pass again later; that is a
// no-op after the first time (llvm::call_once).
struct Installer {
	Installer()
	{
		PassRegistry &registry = *PassRegistry::getPassRegistry();
		initializeFEntryInserterPass(registry);
		const PassInfo *info = registry.getPassInfo(&FEntryInserterID);
		if (!info || !info->getNormalCtor())
			return;
		const_cast<PassInfo *>(info)->setNormalCtor(create_entry_pass);
		installed = true;
	}
} installer;

} // namespace

bool ftpad_machine_hook_installed()
{
	return installed;
}
