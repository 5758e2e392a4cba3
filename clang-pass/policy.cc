// SPDX-License-Identifier: MIT
// policy.cc - the GCC plugin's per-function rules (gcc-plugin/policy.cc),
// on LLVM IR, and its policy file.
#include "policy.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

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

bool has_entry_attributes(const Function &F)
{
	return F.hasFnAttribute("patchable-function-entry") ||
	       F.hasFnAttribute("patchable-function-prefix");
}

// The layout, unless min-insns says the function is too small.
FtpadDecision unless_too_small(const FtpadConfig &c, const FtpadSize &size, FtpadLayout layout,
			       std::string reason)
{
	if (c.min_insns && size.insns < c.min_insns && !size.loop)
		return skip(std::to_string(size.insns) + " insns < min-insns " +
			    std::to_string(c.min_insns) + ", no loop");
	return {true, std::move(reason), layout};
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

FtpadSize ftpad_estimate(const Function &F, const TargetTransformInfo &tti)
{
	FtpadSize size = {0, false};
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

FtpadDecision ftpad_decide(const Function &F, const FtpadConfig &c, const FtpadSize &size)
{
	StringRef name = asm_name(F);
	auto s = c.skip.find(name.str());
	if (s != c.skip.end())
		return skip(s->second);
	if (F.hasFnAttribute(Attribute::Naked))
		return skip("naked");
	if (has_entry_attributes(F) && !ftpad_has_command_line_entry(F, c))
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
	for (const FtpadRule &rule : c.rules) {
		if (fnmatch(rule.glob.c_str(), name.str().c_str(), 0))
			continue;
		if (!rule.pad)
			return skip("excluded by " + rule.where);
		FtpadLayout layout = c.layout;
		if (rule.before >= 0)
			layout.before = rule.before;
		if (rule.after >= 0)
			layout.after = rule.after;
		return unless_too_small(c, size, layout, "pad by " + rule.where);
	}
	return unless_too_small(c, size, c.layout, "default");
}

// The first prefix of MAP that PATH starts with replaced, as clang's
// CGDebugInfo::remapDIPath does: a build by absolute paths then reports
// the same names in every build directory.
static std::string remap_path(const std::string &path,
			      const std::map<std::string, std::string> &map)
{
	SmallString<256> p(path);
	for (const auto &entry : map)
		if (sys::path::replace_path_prefix(p, entry.first, entry.second))
			break;
	return p.str().str();
}

bool ftpad_report(const Function &F, const FtpadDecision &d, const FtpadConfig &c,
		  const FtpadSize &size)
{
	if (c.report.empty())
		return true;
	// The debug info's name is remapped already; the module's is not.
	std::string source = remap_path(F.getParent()->getSourceFileName(), c.prefix_map);
	if (const DISubprogram *sp = F.getSubprogram())
		source = sp->getFilename().str();
	// What min-insns looks at, whether or not it is set, so that one report
	// tells what any threshold would remove.
	std::string line = "{\"function\": " + json_string(asm_name(F)) +
			   ", \"source\": " + json_string(source) +
			   ", \"section\": " + json_string(section_of(F)) +
			   ", \"decision\": \"" + (d.pad ? "pad" : "skip") +
			   "\", \"reason\": " + json_string(d.reason) +
			   ", \"before\": " + std::to_string(d.layout.before) +
			   ", \"after\": " + std::to_string(d.layout.after) +
			   ", \"insns\": " + std::to_string(size.insns) +
			   ", \"loop\": " + (size.loop ? "true" : "false") + "}\n";
	int fd = open(c.report.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return false;
	bool ok = write(fd, line.data(), line.size()) == ssize_t(line.size());
	close(fd);
	return ok;
}

namespace {

// `key=N` of a rule: false when WORD is not about KEY; *why is set when it
// is, but N is out of range or not allowed here.
bool parse_rule_count(const std::string &word, const char *key, const FtpadConfig &c,
		      const FtpadArch &arch, int *out, std::string *why)
{
	std::string prefix = std::string(key) + "=";
	if (word.compare(0, prefix.size(), prefix))
		return false;
	std::string value = word.substr(prefix.size());
	unsigned lo = strcmp(key, "after") ? 0 : ftpad_abi_info(arch, c.abi).min_after;
	char *end;
	errno = 0;
	long v = strtol(value.c_str(), &end, 10);
	if (value.empty() || *end || errno || v < long(lo) || v > 255) {
		*why = "'" + word + "': expected " + key + "=N with N from " + std::to_string(lo) +
		       " to 255";
		return true;
	}
	*out = int(v);
	std::string problem = strcmp(key, "after") ? "" : ftpad_layout_problem(c, arch, 0, v);
	if (!problem.empty())
		*why = "'" + word + "': " + problem;
	return true;
}

// One non-blank, non-comment line; returns the reason it is wrong, or "".
std::string parse_rule(const std::vector<std::string> &words, const FtpadConfig &c,
		       const FtpadArch &arch, FtpadRule &rule)
{
	if (words[0] != "pad" && words[0] != "exclude")
		return "unknown rule '" + words[0] + "': expected 'pad' or 'exclude'";
	if (words.size() < 2)
		return "'" + words[0] + "' needs a glob";
	rule.pad = words[0] == "pad";
	rule.glob = words[1];
	for (size_t i = 2; i < words.size(); i++) {
		std::string why;
		if (!rule.pad)
			return "'exclude' takes only a glob, not '" + words[i] + "'";
		if (!parse_rule_count(words[i], "before", c, arch, &rule.before, &why) &&
		    !parse_rule_count(words[i], "after", c, arch, &rule.after, &why))
			why = "unknown setting '" + words[i] + "': expected before=N or after=N";
		if (!why.empty())
			return why;
	}
	return "";
}

} // namespace

bool ftpad_read_policy(const std::string &path, const FtpadArch &arch, FtpadConfig &c,
		       std::vector<std::string> &errors)
{
	std::ifstream in(path);
	if (!in) {
		errors.push_back(path + ": cannot read the policy file: " + strerror(errno));
		return false;
	}
	bool ok = true;
	std::string line;
	for (unsigned lineno = 1; std::getline(in, line); lineno++) {
		line = line.substr(0, line.find('#'));
		std::istringstream split(line);
		std::vector<std::string> words;
		for (std::string w; split >> w;)
			words.push_back(w);
		if (words.empty())
			continue;
		FtpadRule rule;
		rule.where = path + ":" + std::to_string(lineno);
		std::string why = parse_rule(words, c, arch, rule);
		if (!why.empty()) {
			errors.push_back(rule.where + ": " + why);
			ok = false;
			continue;
		}
		c.rules.push_back(rule);
	}
	return ok;
}
