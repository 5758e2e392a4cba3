// SPDX-License-Identifier: MIT
// pass.cc - the LLVM half of ftpad-clang.so: gives each chosen function its
// pad and its site record, at the end of the optimisation pipeline (so only
// functions that survive inlining and dead-code removal get one).
//
// LLVM 14 cannot put chosen bytes into a patchable-function-prefix, so the
// part before the entry is *prefix data*, which AsmPrinter emits between the
// function's alignment and its label:
//
//         [filler][before: B x 0x90][ops slot: 0f 1f 84 00 00 00 00 00]
// func:   [endbr64: emitted by LLVM, see has_endbr]
//         [site: "patchable-function-entry"="5", one 5-byte NOP]
//
// The site comes from LLVM's own patchable-function-entry, because nothing
// else places bytes after the label and before the prologue.  LLVM encodes
// its 5-byte NOP as 0f 1f 44 00 08 (GCC: 0f 1f 44 00 00), and it emits any
// longer entry as the longest NOPs first, so `after` can only be 5 here.
#include "ftpad-clang.h"
#include "policy.h"
#include "../runtime/include/ftpad_site.h"

#include "llvm/ADT/Triple.h"
#include "llvm/IR/Constants.h"
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

namespace {

// Marks a module the pass has done, so that a second load of the plugin or
// a run at LTO link time after the pre-link one changes nothing.
const char *const DONE = "ftpad.done";
const unsigned OPS_SLOT = 8;

// The name the assembler sees: an asm("label") name starts with \1.
StringRef asm_name(const Function &F)
{
	StringRef n = F.getName();
	return n.startswith("\1") ? n.drop_front() : n;
}

// Does LLVM put endbr64 at F's entry?  X86IndirectBranchTracking does for
// every function that is not local or has its address taken, once the
// module has "cf-protection-branch" (-fcf-protection=branch|full), unless
// the function is nocf_check.  The record takes F's address, so every
// padded function counts as address-taken: the test is the module flag.
bool has_endbr(const Function &F)
{
	auto *flag = mdconst::extract_or_null<ConstantInt>(
		F.getParent()->getModuleFlag("cf-protection-branch"));
	return flag && !flag->isZero() && !F.doesNoCfCheck();
}

// [filler][before x 0x90][ops slot], a whole number of `align` long so
// that the entry keeps the alignment the pad starts at.
Constant *prefix_bytes(LLVMContext &ctx, unsigned before, bool ops, unsigned align)
{
	static const uint8_t slot[OPS_SLOT] = {0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0};
	// Multi-byte NOPs: the filler is never executed, but a disassembler
	// reads it as NOPs rather than as garbage.
	static const char *const nops[] = {
		"", "\x90", "\x66\x90", "\x0f\x1f\x00", "\x0f\x1f\x40\x00",
		"\x0f\x1f\x44\x00\x00", "\x66\x0f\x1f\x44\x00\x00",
		"\x0f\x1f\x80\x00\x00\x00\x00",
	};
	unsigned used = before + (ops ? OPS_SLOT : 0);
	unsigned filler = (align - used % align) % align;
	std::string bytes;
	for (unsigned left = filler; left;) {
		unsigned n = left < 7 ? left : 7;
		bytes.append(nops[n], n);
		left -= n;
	}
	bytes.append(before, '\x90');
	if (ops)
		bytes.append(reinterpret_cast<const char *>(slot), OPS_SLOT);
	return ConstantDataArray::getString(ctx, bytes, false);
}

// `target` - address of field `index` of `rec`, as an i32: the linker turns
// it into a PC32 relocation, so the table needs no dynamic relocation.
Constant *relative(GlobalVariable *rec, unsigned index, Constant *target, int64_t addend)
{
	LLVMContext &ctx = rec->getContext();
	Type *i64 = Type::getInt64Ty(ctx);
	Type *i32 = Type::getInt32Ty(ctx);
	Constant *field = ConstantExpr::getInBoundsGetElementPtr(
		rec->getValueType(), rec,
		ArrayRef<Constant *>{ConstantInt::get(i32, 0), ConstantInt::get(i32, index)});
	Constant *diff = ConstantExpr::getSub(ConstantExpr::getPtrToInt(target, i64),
					      ConstantExpr::getPtrToInt(field, i64));
	if (addend)
		diff = ConstantExpr::getAdd(diff, ConstantInt::get(i64, addend));
	return ConstantExpr::getTrunc(diff, i32);
}

// A private global in `section`, in F's COMDAT group when it has one, so
// that it goes wherever F goes.
GlobalVariable *private_global(Function &F, Type *type, const Twine &name, StringRef section)
{
	auto *gv = new GlobalVariable(*F.getParent(), type, true, GlobalValue::PrivateLinkage,
				      nullptr, name);
	gv->setSection(section);
	gv->setComdat(F.getComdat());
	return gv;
}

// An R_X86_64_NONE from F's text to its record (docs/format.md): gold
// ignores SHF_LINK_ORDER when it collects garbage and would drop every
// record.  The asm emits no bytes, only the relocation.
void refer_to(Function &F, GlobalVariable *rec)
{
	LLVMContext &ctx = F.getContext();
	auto *type = FunctionType::get(Type::getVoidTy(ctx), {rec->getType()}, false);
	InlineAsm *reloc = InlineAsm::get(type, ".reloc ., R_X86_64_NONE, ${0:c}", "i", true);
	BasicBlock &entry = F.getEntryBlock();
	CallInst::Create(reloc, {rec}, "", &*entry.getFirstInsertionPt());
}

// F as the record refers to it.  In a shared object a default-visibility
// function may be interposed, so a reference to its symbol needs a dynamic
// relocation: the table would become writable, and read from the file it
// would hold zeros.  A private alias is a local label the assembler resolves,
// and it names this copy of F, the one whose pad the record describes.
Constant *local_entry(Function &F)
{
	if (F.isDSOLocal())
		return &F;
	return GlobalAlias::create(F.getFunctionType(), F.getAddressSpace(),
				   GlobalValue::PrivateLinkage, "__ftpad_entry", &F, F.getParent());
}

// docs/format.md "One record": 24 bytes in __ftpad_sites, SHF_LINK_ORDER
// to F's section (!associated), kept by llvm.compiler.used until the
// linker decides with F.
void add_record(Function &F, FtpadLayout layout, bool ops, bool endbr)
{
	LLVMContext &ctx = F.getContext();
	Type *i8 = Type::getInt8Ty(ctx), *i16 = Type::getInt16Ty(ctx), *i32 = Type::getInt32Ty(ctx);
	StructType *type = StructType::get(ctx, {i32, i32, i32, i32, i8, i8, i8, i8, i8, i8, i16});

	Constant *str = ConstantDataArray::getString(ctx, asm_name(F));
	GlobalVariable *name = private_global(F, str->getType(), "__ftpad_name", FTPAD_NAMES_SECTION);
	name->setInitializer(str);
	name->setAlignment(Align(1));

	GlobalVariable *rec = private_global(F, type, "__ftpad_site", FTPAD_SITES_SECTION);
	rec->setAlignment(Align(FTPAD_SITE_ALIGN));
	rec->setMetadata(LLVMContext::MD_associated,
			 MDNode::get(ctx, ValueAsMetadata::get(&F)));
	Constant *entry = local_entry(F);
	Constant *fields[] = {
		relative(rec, 0, entry, 0),
		relative(rec, 1, entry, endbr ? 4 : 0),
		ops ? relative(rec, 2, entry, -int64_t(OPS_SLOT)) : ConstantInt::get(i32, 0),
		relative(rec, 3, name, 0),
		ConstantInt::get(i8, FTPAD_SITE_VERSION),
		ConstantInt::get(i8, FTPAD_ARCH_X86_64),
		ConstantInt::get(i8, layout.before),
		ConstantInt::get(i8, layout.after),
		ConstantInt::get(i8, 5),
		ConstantInt::get(i8, 0),
		ConstantInt::get(i16, endbr ? FTPAD_SITE_ENDBR : 0),
	};
	rec->setInitializer(ConstantStruct::get(type, fields));
	appendToCompilerUsed(*F.getParent(), {rec});
	refer_to(F, rec);
}

void pad(Function &F, FtpadLayout layout, bool ops)
{
	bool endbr = has_endbr(F);
	// The ops slot must be 8-aligned, and a site behind ENDBR (entry+4)
	// stays inside one 64-byte line only if the entry is 16-aligned.
	unsigned align = endbr ? 16 : 8;
	if (F.getAlign() && F.getAlign()->value() > align)
		align = F.getAlign()->value();
	F.setAlignment(Align(align));
	if (layout.before || ops)
		F.setPrefixData(prefix_bytes(F.getContext(), layout.before, ops, align));
	F.addFnAttr("patchable-function-entry", std::to_string(layout.after));
	add_record(F, layout, ops, endbr);
}

// IPRA (-mllvm -enable-ipra) lets a caller keep values in call-clobbered
// registers that the callee leaves alone, but an enabled site runs a
// trampoline and a callback the compiler never saw.  LLVM has no
// per-function switch, so, as the GCC plugin does with -fipa-ra, turn it
// off for the whole compile: TargetPassConfig reads the option when
// CodeGen builds its pipeline, which is after this pass has run.
void ipra_off()
{
	auto &options = cl::getRegisteredOptions();
	auto o = options.find("enable-ipra");
	if (o != options.end()) // a cl::opt<bool> in TargetPassConfig.cpp
		static_cast<cl::opt<bool> *>(o->second)->setValue(false);
}

struct FtpadPass : PassInfoMixin<FtpadPass> {
	PreservedAnalyses run(Module &M, ModuleAnalysisManager &)
	{
		const FtpadConfig &c = ftpad_config();
		if (!c.unsafe_ipra)
			ipra_off();
		if (M.getNamedMetadata(DONE) || !Triple(M.getTargetTriple()).isX86())
			return PreservedAnalyses::all();
		M.getOrInsertNamedMetadata(DONE);
		for (Function &F : M) {
			if (F.isDeclaration() || F.hasAvailableExternallyLinkage())
				continue; // not emitted here
			FtpadDecision d = ftpad_decide(F, c);
			ftpad_report(F, d, c);
			if (d.pad)
				pad(F, d.layout, c.ops);
		}
		return PreservedAnalyses::none();
	}
	static bool isRequired() { return true; } // also at -O0 (optnone)
};

} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK __attribute__((visibility("default"))) PassPluginLibraryInfo llvmGetPassPluginInfo()
{
	return {LLVM_PLUGIN_API_VERSION, "ftpad", "0.1", [](PassBuilder &PB) {
			PB.registerOptimizerLastEPCallback(
				[](ModulePassManager &MPM, OptimizationLevel) {
					MPM.addPass(FtpadPass());
				});
		}};
}
