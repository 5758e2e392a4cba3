// SPDX-License-Identifier: MIT
// policy.cc - the GCC plugin's per-function rules, on LLVM IR.
#include "policy.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <unistd.h>

#include "llvm/ADT/SCCIterator.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"

using namespace llvm;

namespace {

const std::string *match(const std::vector<std::string> &globs, StringRef name)
{
	std::string s = name.str();
	for (const std::string &g : globs)
		if (!fnmatch(g.c_str(), s.c_str(), 0))
			return &g;
	return nullptr;
}

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

FtpadDecision skip(std::string why)
{
	return {false, std::move(why), {0, 0}};
}

std::string json_string(StringRef s)
{
	std::string out = "\"";
	for (unsigned char ch : s) {
		if (ch == '"' || ch == '\\') {
			out += '\\';
			out += ch;
		} else if (ch < 0x20) {
			char buf[8];
			snprintf(buf, sizeof(buf), "\\u%04x", ch);
			out += buf;
		} else {
			out += ch;
		}
	}
	return out + "\"";
}

} // namespace

unsigned ftpad_estimate_insns(const Function &F, bool &has_loop)
{
	unsigned n = 0;
	for (const Instruction &I : instructions(F))
		if (!isa<DbgInfoIntrinsic>(I) && !isa<PHINode>(I) && !I.isLifetimeStartOrEnd())
			n++;
	// Any cycle, irreducible ones included, as GCC's back edges.
	has_loop = false;
	for (auto scc = scc_begin(&F); !scc.isAtEnd(); ++scc)
		has_loop |= scc.hasCycle();
	return n;
}

FtpadDecision ftpad_decide(const Function &F, const FtpadConfig &c)
{
	StringRef name = asm_name(F);
	auto s = c.skip.find(name.str());
	if (s != c.skip.end())
		return skip(s->second);
	if (F.hasFnAttribute(Attribute::Naked))
		return skip("naked");
	// clang turns the attribute and -fpatchable-function-entry= into the
	// same IR attributes.
	if (F.hasFnAttribute("patchable-function-entry") || F.hasFnAttribute("patchable-function-prefix"))
		return skip("user patchable_function_entry");
	if (F.hasPrefixData()) // someone else's, e.g. -fsanitize=function
		return skip("prefix data");
	if (const std::string *g = match(c.exclude, name))
		return skip("excluded by '" + *g + "'");
	if (!c.include.empty() && !match(c.include, name))
		return skip("not included");
	if (match(c.exclude_section, section_of(F)))
		return skip("section '" + section_of(F).str() + "' excluded");
	auto a = c.attribute.find(name.str());
	if (a != c.attribute.end())
		return {true, "ftpad attribute", a->second};
	if (c.min_insns) {
		bool loop;
		unsigned n = ftpad_estimate_insns(F, loop);
		if (n < c.min_insns && !loop)
			return skip(std::to_string(n) + " insns < min-insns " +
				    std::to_string(c.min_insns) + ", no loop");
	}
	return {true, "default", c.layout};
}

void ftpad_report(const Function &F, const FtpadDecision &d, const FtpadConfig &c)
{
	if (c.report.empty())
		return;
	std::string source = F.getParent()->getSourceFileName();
	if (const DISubprogram *sp = F.getSubprogram())
		source = sp->getFilename().str();
	// What min-insns looks at, whether or not it is set, so that one report
	// tells what any threshold would remove.
	bool loop;
	unsigned insns = ftpad_estimate_insns(F, loop);
	std::string line = "{\"function\": " + json_string(asm_name(F)) +
			   ", \"source\": " + json_string(source) +
			   ", \"section\": " + json_string(section_of(F)) +
			   ", \"decision\": \"" + (d.pad ? "pad" : "skip") +
			   "\", \"reason\": " + json_string(d.reason) +
			   ", \"before\": " + std::to_string(d.layout.before) +
			   ", \"after\": " + std::to_string(d.layout.after) +
			   ", \"insns\": " + std::to_string(insns) +
			   ", \"loop\": " + (loop ? "true" : "false") + "}\n";
	int fd = open(c.report.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		report_fatal_error(Twine("ftpad: cannot open report ") + c.report);
	bool ok = write(fd, line.data(), line.size()) == ssize_t(line.size());
	close(fd);
	if (!ok)
		report_fatal_error(Twine("ftpad: cannot write report ") + c.report);
}
