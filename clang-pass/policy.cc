// SPDX-License-Identifier: MIT
// policy.cc - the facts about a function on LLVM IR that the core's
// decision chain (plugin-core/decide.c) decides on, and its report gives.
#include "policy.h"

#include "llvm/ADT/SCCIterator.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Path.h"

using namespace llvm;

namespace {

// The name the assembler sees: an asm("label") name starts with \1.
StringRef asm_name(const Function &F)
{
	StringRef n = F.getName();
	return n.startswith("\1") ? n.drop_front() : n;
}

// The section the rules look at, as in the GCC plugin: the user's own
// section, otherwise ".text".
StringRef section_of(const Function &F)
{
	return F.hasSection() ? F.getSection() : StringRef(".text");
}

bool has_entry_attributes(const Function &F)
{
	return F.hasFnAttribute("patchable-function-entry") ||
	       F.hasFnAttribute("patchable-function-prefix");
}

// The first prefix of MAP that PATH starts with replaced, as clang's
// CGDebugInfo::remapDIPath does: a build by absolute paths then reports
// the same names in every build directory.
std::string remap_path(const std::string &path, const std::map<std::string, std::string> &map)
{
	SmallString<256> p(path);
	for (const auto &entry : map)
		if (sys::path::replace_path_prefix(p, entry.first, entry.second))
			break;
	return p.str().str();
}

// The source file the report names.  The debug info's name is remapped
// already; the module's is not.
std::string source_of(const Function &F, const FtpadConfig &c)
{
	if (const DISubprogram *sp = F.getSubprogram())
		return sp->getFilename().str();
	return remap_path(F.getParent()->getSourceFileName(), c.prefix_map);
}

// The size, estimated before the decision (the report gives it anyway).
bool measured(void *ctx, ftpad_size *size)
{
	*size = *static_cast<const ftpad_size *>(ctx);
	return true;
}

} // namespace

ftpad_size ftpad_estimate(const Function &F, const TargetTransformInfo &tti)
{
	ftpad_size size = {0, false};
	for (const Instruction &I : instructions(F)) {
		if (isa<DbgInfoIntrinsic>(I) || isa<PHINode>(I) || I.isLifetimeStartOrEnd())
			continue;
		InstructionCost cost = tti.getInstructionCost(&I, TargetTransformInfo::TCK_CodeSize);
		size.insns += cost.isValid() ? unsigned(*cost.getValue()) : 1;
	}
	// Any cycle, irreducible ones included, as GCC's back edges.
	for (auto scc = scc_begin(&F); !scc.isAtEnd(); ++scc)
		size.loop |= scc.hasCycle();
	return size;
}

bool ftpad_has_command_line_entry(const Function &F, const FtpadConfig &c)
{
	// The frontend puts every function with the user's own attribute in
	// c.skip, so with the frontend the rest came from the command line.
	// Without it (-fpass-plugin= alone) they cannot be told apart.
	return c.from_frontend && has_entry_attributes(F) && !c.skip.count(asm_name(F).str());
}

bool ftpad_decide_and_report(const Function &F, const FtpadConfig &c, const ftpad_size &size,
			     ftpad_decision &d)
{
	std::string name = asm_name(F).str(), section = section_of(F).str();
	std::string source = source_of(F, c);
	ftpad_function fn = {};
	fn.name = name.c_str();
	fn.section = section.c_str();
	fn.source = source.c_str();
	// The frontend's reasons, from attributes clang leaves out of the IR.
	auto s = c.skip.find(name);
	std::string frontend_skip = s == c.skip.end() ? "" : s->second;
	fn.no_instrument_function = frontend_skip == "no_instrument_function";
	fn.naked = F.hasFnAttribute(Attribute::Naked);
	fn.user_patchable_entry = frontend_skip == "user patchable_function_entry" ||
				  (has_entry_attributes(F) && !ftpad_has_command_line_entry(F, c));
	fn.foreign_prefix_data = F.hasPrefixData();
	auto a = c.attribute.find(name);
	fn.has_attribute = a != c.attribute.end();
	if (fn.has_attribute)
		fn.attribute = a->second;
	fn.measure = measured;
	fn.measure_ctx = const_cast<ftpad_size *>(&size);
	ftpad_decide(&c.opts, &fn, &d);
	return ftpad_report(&c.opts, &fn, &d);
}
