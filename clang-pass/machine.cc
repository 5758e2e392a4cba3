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
//
// With exit=1 the same pass also puts the exit sites (docs/format.md "Exit
// sites"), as XRay's pass puts its PATCHABLE_RET and PATCHABLE_TAIL_CALL at
// the same point: every terminator that returns (MachineInstr::isReturn)
// gets the site NOP right in front of it, after the epilogue, with a label;
// a tail call's jump is a return that is also a call.  Their records need
// those labels, which exist only here, but AsmPrinter writes the module's
// globals after its last function: so the IR record of the function (its
// entry record) is replaced by an array of the entry record and one record
// per exit, whose site fields refer to the labels through declarations of
// the same names.  One global keeps it all in the function's one record
// section, with the function's COMDAT and SHF_LINK_ORDER.
#include "ftpad-clang.h"
#include "../pad/ftpad_site.h"

#include "llvm/CodeGen/MachineFunction.h"
#include "llvm/CodeGen/MachineFunctionPass.h"
#include "llvm/CodeGen/MachineInstrBuilder.h"
#include "llvm/CodeGen/Passes.h"
#include "llvm/CodeGen/TargetInstrInfo.h"
#include "llvm/CodeGen/TargetSubtargetInfo.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Triple.h"
#include "llvm/CodeGen/TargetInstrInfo.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/InitializePasses.h"
#include "llvm/PassInfo.h"
#include "llvm/PassRegistry.h"

using namespace llvm;

const char *const FTPAD_ENTRY_ASM = "ftpad-entry-asm";
const char *const FTPAD_EXIT_RECORD = "ftpad-exit-record";

namespace {

bool installed;

void error(Function &F, const Twine &msg)
{
	F.getContext().diagnose(DiagnosticInfoUnsupported(F, "ftpad: " + msg));
}

// An instruction as assembly text: INLINEASM, so that it comes out exactly
// as written, and nothing is scheduled or allocated around it (this runs
// after register allocation and scheduling anyway).
void insert_asm(MachineBasicBlock &mbb, MachineBasicBlock::iterator where, const std::string &text)
{
	MachineFunction &MF = *mbb.getParent();
	const TargetInstrInfo *tii = MF.getSubtarget().getInstrInfo();
	BuildMI(mbb, where, DebugLoc(), tii->get(TargetOpcode::INLINEASM))
		.addExternalSymbol(MF.createExternalSymbolName(text))
		.addImm(InlineAsm::Extra_HasSideEffects);
}

void remove_operand(MachineInstr &mi, unsigned i)
{
#if LLVM_VERSION_MAJOR >= 15
	mi.removeOperand(i);
#else
	mi.RemoveOperand(i);
#endif
}

unsigned opcode_named(const TargetInstrInfo *tii, StringRef name)
{
	for (unsigned op = 0; op < tii->getNumOpcodes(); op++)
		if (tii->getName(op) == name)
			return op;
	return 0;
}

// Where a block whose last conditional terminator is MI goes when MI is
// not taken: the target of the unconditional branch behind it, or the next
// block; nullptr if neither is simple.
MachineBasicBlock *not_taken(MachineInstr &mi)
{
	MachineBasicBlock &mbb = *mi.getParent();
	MachineInstr *after = mi.getNextNode();
	if (!after) {
		auto next = std::next(mbb.getIterator());
		return next == mbb.getParent()->end() ? nullptr : &*next;
	}
	if (after != &mbb.back() || !after->isUnconditionalBranch() || !after->getOperand(0).isMBB())
		return nullptr;
	return after->getOperand(0).getMBB();
}

// x86 at -Os makes "Jcc target" of a tail call (BranchFolder, optsize
// only).  A site in front of it would run on both ways, so it goes back to
// XRay's shape: "J!cc not_taken" and, in a block of its own that the
// branch falls into, the site and an unconditional tail jump.  Returns the
// jump to put the site in front of, or nullptr after an error.
MachineInstr *unconditional_tail_call(MachineInstr &mi)
{
	MachineBasicBlock &mbb = *mi.getParent();
	MachineFunction &MF = *mbb.getParent();
	const TargetInstrInfo *tii = MF.getSubtarget().getInstrInfo();
	StringRef name = tii->getName(mi.getOpcode());
	unsigned jump = name == "TAILJMPd64_CC" ? opcode_named(tii, "TAILJMPd64") : 0;
	MachineBasicBlock *fall = not_taken(mi);
	SmallVector<MachineOperand, 1> cond;
	if (jump && mi.getNumExplicitOperands() == 2 && mi.getOperand(1).isImm())
		cond.push_back(MachineOperand::CreateImm(mi.getOperand(1).getImm()));
	if (cond.empty() || !fall || tii->reverseBranchCondition(cond)) {
		error(MF.getFunction(), "no exit site for the conditional return " + name.str());
		return nullptr;
	}
	if (mi.getNextNode())
		mi.getNextNode()->eraseFromParent(); // the branch to FALL
	MachineBasicBlock *tail = MF.CreateMachineBasicBlock(mbb.getBasicBlock());
	MF.insert(std::next(mbb.getIterator()), tail);
	tail->splice(tail->end(), &mbb, mi.getIterator());
	mi.setDesc(tii->get(jump));
	remove_operand(mi, 1);
	for (const MachineOperand &mo : mi.implicit_operands())
		if (mo.isReg() && mo.isUse() && mo.getReg().isPhysical())
			tail->addLiveIn(mo.getReg());
	tail->sortUniqueLiveIns();
	tii->insertBranch(mbb, fall, nullptr, cond, mi.getDebugLoc());
	mbb.addSuccessor(tail);
	return &mi;
}

struct ExitSite {
	MachineInstr *before; // the return or the tail call's jump
	unsigned kind;        // FTPAD_SITE_KIND_EXIT or _TAIL_EXIT
};

// Every return of MF, as XRay finds them: a terminator that returns, and a
// tail call when it is a call too.
std::vector<ExitSite> find_exits(MachineFunction &MF)
{
	std::vector<ExitSite> exits;
	for (MachineBasicBlock &mbb : MF)
		for (MachineInstr &mi : mbb.terminators())
			if (mi.isReturn())
				exits.push_back({&mi, mi.isCall() ? unsigned(FTPAD_SITE_KIND_TAIL_EXIT)
								  : unsigned(FTPAD_SITE_KIND_EXIT)});
	return exits;
}

// One exit record (docs/format.md "Exit sites"): entry, ops and name as in
// the entry record, the site at LABEL.
Constant *exit_record(GlobalVariable *rec, unsigned index, StructType *type, Constant *entry,
		      Constant *name, bool ops, Constant *label, const ftpad_arch_layout &layout,
		      unsigned kind)
{
	LLVMContext &ctx = rec->getContext();
	Type *i8 = Type::getInt8Ty(ctx), *i16 = Type::getInt16Ty(ctx), *i32 = Type::getInt32Ty(ctx);
	auto field = [&](unsigned f) { return ftpad_element(rec, {index, f}); };
	Constant *fields[] = {
		ftpad_relative(field(0), entry, 0),
		ftpad_relative(field(1), label, 0),
		ops ? ftpad_relative(field(2), entry, -8) : ConstantInt::get(i32, 0),
		ftpad_relative(field(3), name, 0),
		ConstantInt::get(i8, FTPAD_SITE_VERSION_EXIT),
		ConstantInt::get(i8, layout.record_arch),
		ConstantInt::get(i8, 0),
		ConstantInt::get(i8, 0),
		ConstantInt::get(i8, layout.site_bytes),
		ConstantInt::get(i8, kind),
		ConstantInt::get(i16, 0),
	};
	return ConstantStruct::get(type, fields);
}

// The names that F's FTPAD_EXIT_RECORD attribute holds, one a line (its
// record global, its entry, its name's global, "ops" or not), and the
// record global: null when it is gone.
GlobalVariable *exit_record_of(Function &F, SmallVectorImpl<StringRef> &names)
{
	F.getFnAttribute(FTPAD_EXIT_RECORD).getValueAsString().split(names, '\n');
	GlobalVariable *rec = names.size() == 4 ? F.getParent()->getNamedGlobal(names[0]) : nullptr;
	return rec && rec->hasInitializer() ? rec : nullptr;
}

// The record global of F grows from its entry record to [entry, exits...]:
// a new global in its place (every use, the .reloc in F's text included),
// the same section, COMDAT, alignment and link order.
void add_exit_records(MachineFunction &MF, const FtpadArch &arch,
		      const std::vector<ExitSite> &exits, const std::vector<Constant *> &labels)
{
	Function &F = MF.getFunction();
	Module &M = *F.getParent();
	SmallVector<StringRef, 4> names;
	GlobalVariable *old = exit_record_of(F, names);
	Constant *entry = old ? (names[1].empty() ? &F : M.getNamedValue(names[1])) : nullptr;
	GlobalVariable *name = old ? M.getNamedGlobal(names[2]) : nullptr;
	if (!old || !entry || !name) {
		error(F, "the record of this function is gone; no exit sites");
		return;
	}
	auto *type = cast<StructType>(old->getValueType());
	auto *array = ArrayType::get(type, 1 + exits.size());
	auto *rec = new GlobalVariable(M, array, true, old->getLinkage(), nullptr, old->getName(), old);
	rec->setSection(old->getSection());
	rec->setComdat(old->getComdat());
	rec->setAlignment(old->getAlign());
	rec->setMetadata(LLVMContext::MD_associated, old->getMetadata(LLVMContext::MD_associated));
	old->replaceAllUsesWith(ftpad_element(rec, {0}));
	std::vector<Constant *> records{old->getInitializer()};
	for (size_t i = 0; i < exits.size(); i++)
		records.push_back(exit_record(rec, i + 1, type, entry, name, names[3] == "ops",
					      labels[i], *arch.layout, exits[i].kind));
	rec->setInitializer(ConstantArray::get(array, records));
	for (MachineBasicBlock &mbb : MF)
		for (MachineInstr &mi : mbb)
			for (MachineOperand &mo : mi.operands())
				if (mo.isGlobal() && mo.getGlobal() == old)
					mo.ChangeToGA(rec, mo.getOffset(), mo.getTargetFlags());
	old->eraseFromParent();
}

// exit=1 found no return in F: its entry record says that it never
// returns (FTPAD_SITE_NO_RETURN), rather than that it has no exit sites.
void mark_no_return(Function &F)
{
	SmallVector<StringRef, 4> names;
	GlobalVariable *rec = exit_record_of(F, names);
	auto *init = rec ? dyn_cast<ConstantStruct>(rec->getInitializer()) : nullptr;
	if (!init) {
		error(F, "the record of this function is gone; not marked as never returning");
		return;
	}
	unsigned last = init->getNumOperands() - 1; // the flags
	auto *flags = cast<ConstantInt>(init->getOperand(last));
	SmallVector<Constant *, 11> fields;
	for (unsigned i = 0; i < last; i++)
		fields.push_back(init->getOperand(i));
	fields.push_back(ConstantInt::get(flags->getType(),
					  flags->getZExtValue() | FTPAD_SITE_NO_RETURN));
	rec->setInitializer(ConstantStruct::get(init->getType(), fields));
}

// exit=1: a site in front of every return and tail call of MF, and their
// records.  A function that never returns has none, and its entry record
// says so.
void put_exit_sites(MachineFunction &MF)
{
	Function &F = MF.getFunction();
	const FtpadArch *arch = ftpad_arch_for(MF.getTarget().getTargetTriple());
	std::vector<ExitSite> exits = find_exits(MF);
	for (ExitSite &e : exits)
		if (!e.before->isBarrier() && !(e.before = unconditional_tail_call(*e.before)))
			return;
	if (!arch || exits.empty()) {
		if (arch)
			mark_no_return(F);
		F.removeFnAttr(FTPAD_EXIT_RECORD);
		return;
	}
	// The labels are local (.L): no symbol in the object, and the
	// assembler resolves a record's reference to one to its section.  A
	// declaration of the same name is what the IR record can refer to.
	static unsigned serial;
	Module &M = *F.getParent();
	std::vector<Constant *> labels;
	for (ExitSite &e : exits) {
		std::string label = ".Lftpad_exit" + utostr(serial++);
		insert_asm(*e.before->getParent(), e.before->getIterator(), arch->exit_asm(label));
		auto *decl = new GlobalVariable(M, Type::getInt8Ty(M.getContext()), true,
						GlobalValue::ExternalLinkage, nullptr, "\1" + label);
		decl->setDSOLocal(true); // else the table is taken for one with dynamic relocations
		labels.push_back(decl);
	}
	add_exit_records(MF, *arch, exits, labels);
	F.removeFnAttr(FTPAD_EXIT_RECORD);
}

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
		insert_asm(first, first.begin(), F.getFnAttribute(FTPAD_ENTRY_ASM).getValueAsString().str());
		F.removeFnAttr(FTPAD_ENTRY_ASM);
		F.removeFnAttr("patchable-function-entry");
		if (F.hasFnAttribute(FTPAD_EXIT_RECORD))
			put_exit_sites(MF);
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
