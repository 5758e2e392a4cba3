// SPDX-License-Identifier: MIT
// pass.cc - the LLVM half of ftpad-clang.so: gives each chosen function its
// pad and its record, at the end of the optimisation pipeline (so only
// functions that survive inlining and dead-code removal get one).
//
// A pad has two parts, made in two ways:
// - Before the entry, *prefix data* (Function::setPrefixData), which
//   AsmPrinter emits between the function's alignment and its label:
//   [filler][before NOPs][ops slot].  LLVM 14's "patchable-function-prefix"
//   only writes NOPs of its own, so it cannot hold an 8-byte x86 NOP; it is
//   used only where the ABI is exactly LLVM's own -fpatchable-function-entry
//   (arm64 kernel, x86 CALL_PADDING).
// - After the entry, behind ENDBR/BTI and before the prologue, the
//   assembly of arch.h's entry_asm, which the code generator hook in
//   machine.cc puts there.  Where LLVM's own "patchable-function-entry"
//   gives the same shape, it is set too, as the layout to fall back on when
//   code is generated where the hook does not run (a -flto link).
// Records are IR globals, one per function, with !associated and the
// function's COMDAT.
#include "ftpad-clang.h"
#include "policy.h"
#include "../pad/ftpad_site.h"
#include "../pad/pad.h"

#include <cerrno>
#include <cstring>

#include "llvm/ADT/Triple.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/GlobalAlias.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

using namespace llvm;

FtpadConfig &ftpad_config()
{
	static FtpadConfig config;
	return config;
}

const ftpad_abi_layout &ftpad_abi_info(const FtpadArch &arch, ftpad_abi abi)
{
	return *ftpad_arch_abi(arch.layout, abi);
}

const FtpadArch *ftpad_arch_for(const Triple &triple)
{
	switch (triple.getArch()) {
	case Triple::x86_64:
		return &ftpad_arch_x86_64;
	case Triple::aarch64:
		return &ftpad_arch_aarch64;
	default:
		return nullptr;
	}
}

namespace {

// Is the whole pad LLVM's own -fpatchable-function-entry, its record too
// (the arm64 kernel ABI with record=patchable)?  Then no hook is needed.
bool llvm_own_layout(const FtpadConfig &c, const FtpadArch &arch)
{
	return ftpad_abi_info(arch, c.opts.abi).compiler_patchable_entry && c.opts.record == FTPAD_RECORD_PATCHABLE;
}

// Does a pad with AFTER units need the code generator hook, with nothing to
// fall back on?
bool needs_hook(const FtpadConfig &c, const FtpadArch &arch, unsigned after)
{
	if (llvm_own_layout(c, arch))
		return false;
	return c.opts.record == FTPAD_RECORD_MCOUNT || !arch.llvm_entry_suffices(c.opts.abi, after);
}

} // namespace

std::string ftpad_layout_problem(const FtpadConfig &c, const FtpadArch &arch, unsigned before,
				 unsigned after)
{
	unsigned lo = ftpad_lowest_after(&c.opts);
	if (before > 255)
		return "before must be 0 to 255";
	if (after < lo || after > 255)
		return "after must be " + std::to_string(lo) + " to 255";
	if (ftpad_below_site(&c.opts, ftpad_layout{before, after}))
		return c.opts.record == FTPAD_RECORD_PATCHABLE
			       ? ""
			       : "after=" + std::to_string(after) +
					 " is a pad without a site, which the clang plugin records "
					 "only with record=patchable, as LLVM does";
	if (!needs_hook(c, arch, after))
		return "";
	std::string what = c.opts.record == FTPAD_RECORD_MCOUNT ? "an __mcount_loc record"
			   : "after=" + std::to_string(after);
	if (!c.codegen_here)
		return what + " needs the code generated in this compile, and with -flto (or "
			      "-emit-llvm) it is not (docs/clang-pass.md \"LTO\")";
	if (!ftpad_machine_hook_installed())
		return what + " needs the plugin's code generator hook, which could not be "
			      "installed into this clang";
	return "";
}

namespace {

// Marks a module the pass has done, so that a second load of the plugin or
// a run at LTO link time after the pre-link one changes nothing.
const char *const DONE = "ftpad.done";
const unsigned OPS_SLOT = FTPAD_PAD_SLOT_LEN;

// The name the assembler sees: an asm("label") name starts with \1.
StringRef asm_name(const Function &F)
{
	StringRef n = F.getName();
	return n.startswith("\1") ? n.drop_front() : n;
}

void error(Function &F, const Twine &msg)
{
	F.getContext().diagnose(DiagnosticInfoUnsupported(F, "ftpad: " + msg));
}

} // namespace

// `target` + `addend` - `field`, as an i32: the linker turns it into a
// PC32/PREL32 relocation, so the table needs no dynamic relocation.
Constant *ftpad_relative(Constant *field, Constant *target, int64_t addend)
{
	LLVMContext &ctx = target->getContext();
	Type *i64 = Type::getInt64Ty(ctx);
	Type *i32 = Type::getInt32Ty(ctx);
	Constant *diff = ConstantExpr::getSub(ConstantExpr::getPtrToInt(target, i64),
					      ConstantExpr::getPtrToInt(field, i64));
	if (addend)
		diff = ConstantExpr::getAdd(diff, ConstantInt::get(i64, addend));
	return ConstantExpr::getTrunc(diff, i32);
}

// The address inside GV that the indices after the leading 0 lead to.
Constant *ftpad_element(GlobalVariable *gv, ArrayRef<unsigned> path)
{
	Type *i32 = Type::getInt32Ty(gv->getContext());
	SmallVector<Constant *, 4> indices{ConstantInt::get(i32, 0)};
	for (unsigned i : path)
		indices.push_back(ConstantInt::get(i32, i));
	return ConstantExpr::getInBoundsGetElementPtr(gv->getValueType(), gv, indices);
}

namespace {

Constant *relative(GlobalVariable *rec, unsigned index, Constant *target, int64_t addend)
{
	return ftpad_relative(ftpad_element(rec, {index}), target, addend);
}

// A private global in `section`, in F's COMDAT group when it has one, so
// that it goes wherever F goes.
GlobalVariable *private_global(Function &F, Type *type, bool constant, const Twine &name,
			       StringRef section)
{
	auto *gv = new GlobalVariable(*F.getParent(), type, constant, GlobalValue::PrivateLinkage,
				      nullptr, name);
	gv->setSection(section);
	gv->setComdat(F.getComdat());
	return gv;
}

// SHF_LINK_ORDER to F's section, and kept until the linker decides with F.
void associate(Function &F, GlobalVariable *gv)
{
	gv->setMetadata(LLVMContext::MD_associated,
			MDNode::get(F.getContext(), ValueAsMetadata::get(&F)));
	appendToCompilerUsed(*F.getParent(), {gv});
}

// An R_*_NONE from F's text to its record (docs/format.md): gold ignores
// SHF_LINK_ORDER when it collects garbage and would drop every record.
// The asm emits no bytes, only the relocation.
void refer_to(Function &F, GlobalVariable *rec, const FtpadArch &arch)
{
	LLVMContext &ctx = F.getContext();
	auto *type = FunctionType::get(Type::getVoidTy(ctx), {rec->getType()}, false);
	InlineAsm *reloc = InlineAsm::get(
		type, std::string(".reloc ., ") + arch.reloc_none + ", ${0:c}", "i", true);
	BasicBlock &entry = F.getEntryBlock();
	CallInst::Create(reloc, {rec}, "", &*entry.getFirstInsertionPt());
}

// IPRA in a code generator that never loads the plugin, such as lld's at a
// -flto link (-Wl,-mllvm,-enable-ipra): callers keep values only in
// registers they see F leave alone, so F "clobbers" the ones an enabled
// site's callback may change, in an empty asm at its entry, where nothing
// but the arguments is live.  It emits nothing, but it is a barrier that
// the scheduler and the register allocator work around, so it is only
// there where the plugin's own code generator will not run.
void guard_registers(Function &F, const FtpadArch &arch)
{
	auto *type = FunctionType::get(Type::getVoidTy(F.getContext()), false);
	InlineAsm *clobber = InlineAsm::get(type, "", arch.ipra_clobbers(F), true);
	CallInst::Create(clobber, "", &*F.getEntryBlock().getFirstInsertionPt());
}

// F as a record refers to it.  In a shared object a default-visibility
// function may be interposed, so a reference to its symbol needs a dynamic
// relocation: the table would become writable, and read from the file it
// would hold zeros.  A private alias is a local label the assembler resolves,
// and it names this copy of F, the one whose pad the record describes.  It
// also stops LLVM from writing `F - .` of an unnamed_addr function (C++
// inline functions) as a PLT-relative relocation: R_AARCH64_PLT32 is newer
// than binutils 2.40.
Constant *local_entry(Function &F)
{
	if (F.isDSOLocal() && !F.hasGlobalUnnamedAddr())
		return &F;
	return GlobalAlias::create(F.getFunctionType(), F.getAddressSpace(),
				   GlobalValue::PrivateLinkage, "__ftpad_entry", &F, F.getParent());
}

// What one padded function gets, worked out before anything is changed.
struct Pad {
	ftpad_layout layout;
	unsigned landing;  // FTPAD_SITE_ENDBR/_BTI at the entry, or 0
	bool ops;
	unsigned pre;      // bytes from the start of `before` to the entry
	unsigned mov;      // the layout's mov_flag when the hook writes the MOV, else 0
};

// Will the code generator hook write this compile's code?  Only the frontend
// knows that the IR is not written out for a later code generator (-flto,
// -emit-llvm), which LLVM's own attributes, without the MOV, stand in for.
bool hook_writes_code(const FtpadConfig &c)
{
	return c.from_frontend && c.codegen_here && ftpad_machine_hook_installed();
}

// docs/format.md "One record": 24 bytes in __ftpad_sites.
void add_ftpad_record(Function &F, const FtpadConfig &c, const FtpadArch &arch, const Pad &p)
{
	LLVMContext &ctx = F.getContext();
	Type *i8 = Type::getInt8Ty(ctx), *i16 = Type::getInt16Ty(ctx), *i32 = Type::getInt32Ty(ctx);
	StructType *type = StructType::get(ctx, {i32, i32, i32, i32, i8, i8, i8, i8, i8, i8, i16});

	Constant *str = ConstantDataArray::getString(ctx, asm_name(F));
	GlobalVariable *name = private_global(F, str->getType(), true, "__ftpad_name",
					      FTPAD_NAMES_SECTION);
	name->setInitializer(str);
	name->setAlignment(Align(1));

	GlobalVariable *rec = private_global(F, type, true, "__ftpad_site", FTPAD_SITES_SECTION);
	rec->setAlignment(Align(FTPAD_SITE_ALIGN));
	Constant *entry = local_entry(F);
	unsigned site = (p.landing ? 4 : 0) + arch.layout->site_offset;
	unsigned flags = p.landing | p.mov | ftpad_abi_info(arch, c.opts.abi).layout_flags;
	Constant *fields[] = {
		relative(rec, 0, entry, 0),
		relative(rec, 1, entry, site),
		p.ops ? relative(rec, 2, entry, -int64_t(OPS_SLOT)) : ConstantInt::get(i32, 0),
		relative(rec, 3, name, 0),
		ConstantInt::get(i8, FTPAD_SITE_VERSION_ENTRY),
		ConstantInt::get(i8, arch.layout->record_arch),
		ConstantInt::get(i8, p.layout.before),
		ConstantInt::get(i8, p.layout.after),
		ConstantInt::get(i8, arch.layout->site_bytes),
		ConstantInt::get(i8, 0),
		ConstantInt::get(i16, flags),
	};
	rec->setInitializer(ConstantStruct::get(type, fields));
	associate(F, rec);
	refer_to(F, rec, arch);
	// The exit sites exist only in machine code: machine.cc finds them and
	// adds their records to this global, which it finds by name.
	if (c.opts.exits)
		F.addFnAttr(FTPAD_EXIT_RECORD, rec->getName().str() + "\n" +
						       (entry == &F ? "" : entry->getName().str()) + "\n" +
						       name->getName().str() + "\n" + (p.ops ? "ops" : ""));
}

// GCC's __patchable_function_entries record, as the GCC plugin writes it:
// the start of the area before the entry if there is one, else the first
// unit behind the landing pad; an absolute address in a writable,
// link-order section of F's own.
void add_patchable_record(Function &F, const Pad &p)
{
	Type *i64 = Type::getInt64Ty(F.getContext());
	int64_t offset = p.pre ? -int64_t(p.pre) : (p.landing ? 4 : 0);
	GlobalVariable *rec = private_global(F, i64, false, "__ftpad_pfe",
					     "__patchable_function_entries");
	rec->setAlignment(Align(8));
	rec->setInitializer(ConstantExpr::getAdd(ConstantExpr::getPtrToInt(local_entry(F), i64),
						 ConstantInt::get(i64, offset)));
	associate(F, rec);
}

void set_units(Function &F, const char *attr, unsigned units)
{
	if (units)
		F.addFnAttr(attr, std::to_string(units));
}

// The entry's alignment, forced where the layout needs one of its own, and
// the filler that makes the part before the entry a whole number of it.
unsigned align_entry(Function &F, const ftpad_abi_layout &info, const FtpadArch &arch, const Pad &p)
{
	if (!info.own_alignment || !(p.ops || info.align_without_ops))
		return 0;
	unsigned align = arch.entry_align(p.landing);
	if (F.getAlign() && F.getAlign()->value() > align)
		align = F.getAlign()->value();
	F.setAlignment(Align(align));
	// Applied where the prefix starts: the filler keeps it for the entry.
	return (align - p.pre % align) % align;
}

// Before the entry: [filler][before][ops slot] as prefix data, or where the
// ABI is LLVM's own -fpatchable-function-entry, its patchable prefix.
void make_before_entry(Function &F, const FtpadConfig &c, const FtpadArch &arch, const Pad &p)
{
	const ftpad_abi_layout &info = ftpad_abi_info(arch, c.opts.abi);
	std::string prefix;
	arch.append_filler(prefix, align_entry(F, info, arch, p));
	if (llvm_own_layout(c, arch)) {
		// Exactly -fpatchable-function-entry=B+2+A,B+2 (=B+A,B without the
		// ops slot), LLVM's record pointing past the filler.
		set_units(F, "patchable-function-prefix", p.layout.before + (p.ops ? 2 : 0));
	} else if (info.before_everywhere && c.opts.record == FTPAD_RECORD_MCOUNT) {
		// CALL_PADDING as -fpatchable-function-entry=N,N gives it, with
		// LLVM's own record, as on every other function.
		set_units(F, "patchable-function-prefix", p.layout.before);
	} else {
		arch.append_nops(prefix, p.layout.before);
		if (p.ops)
			arch.append_ops_slot(prefix);
	}
	if (!prefix.empty())
		F.setPrefixData(ConstantDataArray::getString(F.getContext(), prefix, false));
}

// After the entry: the hook's assembly, and LLVM's own patchable entry where
// it is the layout or can stand in for it.
void make_after_entry(Function &F, const FtpadConfig &c, const FtpadArch &arch, const Pad &p)
{
	if (!llvm_own_layout(c, arch))
		F.addFnAttr(FTPAD_ENTRY_ASM, arch.entry_asm(c.opts.abi, p.layout.after,
							    c.opts.record == FTPAD_RECORD_MCOUNT, p.mov != 0));
	if (!needs_hook(c, arch, p.layout.after))
		set_units(F, "patchable-function-entry", p.layout.after);
}

// A pad too small for a site (ftpad_below_site): clang's own
// -fpatchable-function-entry=B+A,B, its NOPs and its record, byte for byte.
// As clang, an entry count even of 0 where there is a pad at all: LLVM then
// gives a function that starts with PACIASP a BTI of its own.
void pad_as_llvm(Function &F, ftpad_layout layout)
{
	F.removeFnAttr("patchable-function-entry");
	F.removeFnAttr("patchable-function-prefix");
	if (!layout.before && !layout.after)
		return;
	F.addFnAttr("patchable-function-entry", std::to_string(layout.after));
	set_units(F, "patchable-function-prefix", layout.before);
}

void pad(Function &F, const FtpadConfig &c, const FtpadArch &arch, ftpad_layout layout)
{
	if (ftpad_below_site(&c.opts, layout))
		return pad_as_llvm(F, layout);
	unsigned mov = hook_writes_code(c) ? ftpad_abi_info(arch, c.opts.abi).mov_flag : 0;
	Pad p = {layout, arch.landing_pad_flag(F), c.opts.ops,
		 layout.before * arch.layout->unit_bytes + (c.opts.ops ? OPS_SLOT : 0), mov};
	// -fpatchable-function-entry= on the command line: the plugin's layout
	// replaces it, except the kernel's CALL_PADDING before the entry.
	if (ftpad_has_command_line_entry(F, c)) {
		F.removeFnAttr("patchable-function-entry");
		if (!ftpad_abi_info(arch, c.opts.abi).before_everywhere || layout.before)
			F.removeFnAttr("patchable-function-prefix");
	}
	make_before_entry(F, c, arch, p);
	make_after_entry(F, c, arch, p);
	if (!c.opts.unsafe_ipa_ra && !hook_writes_code(c))
		guard_registers(F, arch);
	if (c.opts.record == FTPAD_RECORD_FTPAD)
		add_ftpad_record(F, c, arch, p);
	else if (c.opts.record == FTPAD_RECORD_PATCHABLE && !llvm_own_layout(c, arch))
		add_patchable_record(F, p);
}

// CALL_PADDING (x86_64 kernel, before=N): every function gets the N bytes
// before its entry, notrace ones too, as Linux pads them for call depth
// tracking; only a user's own patchable_function_entry wins.
void pad_before_everywhere(Function &F, const FtpadConfig &c)
{
	bool users = (F.hasFnAttribute("patchable-function-entry") ||
		      F.hasFnAttribute("patchable-function-prefix")) &&
		     !ftpad_has_command_line_entry(F, c);
	if (!users)
		set_units(F, "patchable-function-prefix", c.opts.layout.before);
}

// Why F may not be padded although the policy says so, or "".
std::string cannot_pad(const Function &F, const FtpadConfig &c, const FtpadArch &arch,
		       ftpad_layout layout)
{
	std::string why = arch.conflict(F);
	if (why.empty())
		why = ftpad_layout_problem(c, arch, layout.before, layout.after);
	if (why.empty() && c.opts.exits && !hook_writes_code(c))
		why = c.codegen_here ? "exit=1 needs the plugin's code generator hook, which could not "
				       "be installed into this clang"
				     : "exit=1 needs the code generated in this compile, and with -flto "
				       "(or -emit-llvm) it is not (docs/clang-pass.md \"LTO\")";
	return why;
}

// clang-pg=1: did -pg -mfentry mark F for a call to __fentry__?  The mark
// goes, so that the code generator writes F's pad and not the call.
bool take_pg_mark(Function &F)
{
	if (F.getFnAttribute("fentry-call").getValueAsString() != "true")
		return false;
	F.removeFnAttr("fentry-call");
	return true;
}

struct FtpadPass : PassInfoMixin<FtpadPass> {
	PreservedAnalyses run(Module &M, ModuleAnalysisManager &MAM)
	{
		FtpadConfig c = ftpad_config();
		if (!c.opts.unsafe_ipa_ra)
			ftpad_ipra_off();
		if (M.getNamedMetadata(DONE))
			return PreservedAnalyses::all();
		M.getOrInsertNamedMetadata(DONE);
		const FtpadArch *arch = ftpad_arch_for(Triple(M.getTargetTriple()));
		if (!arch) {
			M.getContext().emitError("ftpad: no pad layout for target " +
						 M.getTargetTriple() + " (x86_64 and aarch64 only)");
			return PreservedAnalyses::all();
		}
		if (!c.from_frontend)
			ftpad_options_init(&c.opts, arch->layout);
		const ftpad_abi_layout &info = ftpad_abi_info(*arch, c.opts.abi);
		auto &FAM = MAM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();
		for (Function &F : M) {
			if (F.isDeclaration() || F.hasAvailableExternallyLinkage())
				continue; // not emitted here
			// What -pg leaves alone the plugin leaves alone too; its
			// notrace functions keep their report line.
			if (c.pg && !take_pg_mark(F) && !c.skip.count(asm_name(F).str()))
				continue;
			ftpad_size size = ftpad_estimate(F, FAM.getResult<TargetIRAnalysis>(F));
			ftpad_decision d;
			if (!ftpad_decide_and_report(F, c, size, d))
				error(F, std::string("cannot write the report: ") + strerror(errno));
			if (d.pad) {
				std::string why = cannot_pad(F, c, *arch, d.layout);
				if (why.empty())
					pad(F, c, *arch, d.layout);
				else
					error(F, asm_name(F) + ": " + why);
			} else if (info.before_everywhere && c.opts.layout.before) {
				pad_before_everywhere(F, c);
			}
		}
		return PreservedAnalyses::none();
	}
	static bool isRequired() { return true; } // also at -O0 (optnone)
};

} // namespace

// IPRA (-mllvm -enable-ipra) lets a caller keep values in call-clobbered
// registers that the callee leaves alone, but an enabled site runs a
// trampoline and a callback the compiler never saw.  LLVM has no
// per-function switch, so, as the GCC plugin does with -fipa-ra, turn it
// off for the whole compile: TargetPassConfig reads the option when
// CodeGen builds its pipeline.  clang 14 builds it after this pass has
// run; clang 13 before, so there the frontend half turns it off.
void ftpad_ipra_off()
{
	auto &options = cl::getRegisteredOptions();
	auto o = options.find("enable-ipra");
	if (o != options.end()) // a cl::opt<bool> in TargetPassConfig.cpp
		static_cast<cl::opt<bool> *>(o->second)->setValue(false);
}

extern "C" LLVM_ATTRIBUTE_WEAK __attribute__((visibility("default"))) PassPluginLibraryInfo llvmGetPassPluginInfo()
{
	return {LLVM_PLUGIN_API_VERSION, "ftpad", "0.2", [](PassBuilder &PB) {
			PB.registerOptimizerLastEPCallback(
				[](ModulePassManager &MPM, OptimizationLevel) {
					MPM.addPass(FtpadPass());
				});
		}};
}
