// SPDX-License-Identifier: MIT
// policy.cc - the per-function policy (docs/gcc-plugin.md "Which functions
// get a pad").  In order of precedence:
//  1. no_instrument_function, naked and a user's patchable_function_entry:
//     no pad.  These say something about the code itself (notrace, no
//     prologue, the user's own patch area), so nothing overrides them.
//  2. exclude= globs on the name, then include= globs, then
//     exclude-section= globs: no pad.  They are the build's safety switches
//     (noinstr, init text), so they win over the attribute too.
//  3. __attribute__((ftpad(before, after))): this layout, whatever its size.
//  4. min-insns=N: a function with fewer real instructions and no loop gets
//     no pad, as XRay's -fxray-instruction-threshold.
//  5. Otherwise the global before/after.
#include <fcntl.h>
#include <fnmatch.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gcc-common.h"
#include "file-prefix-map.h"

#include "arch.h"
#include "policy.h"

namespace {

const char *const plugin_name = "ftpad";

// One line of a policy file: `pad GLOB [before=N] [after=N]` or
// `exclude GLOB`.
struct policy_rule {
	std::string glob;
	bool pad;
	int before = -1;                          // -1: the global value
	int after = -1;
	std::string where;                        // FILE:LINE, for the report
};

struct policy_options {
	std::vector<policy_rule> rules;           // from policy=FILE, in order
	std::vector<std::string> include;         // empty: every function
	std::vector<std::string> exclude;
	std::vector<std::string> exclude_section;
	unsigned min_insns = 0;                   // 0: no threshold
	int report_fd = -1;
};

policy_options policy;

// One decision, with the reason the report gives for it.
struct decision {
	ftpad_layout layout;
	std::string reason;
};

decision skip(const std::string &reason)
{
	return decision{{false, 0, 0}, reason};
}

decision pad(ftpad_layout layout, const std::string &reason)
{
	layout.pad = true;
	return decision{layout, reason};
}

// Comma-separated globs.  An empty value is an empty list, so that a build
// can pass `exclude=$(EMPTY)`; an empty item inside ("a,,b") is a typo.
bool parse_globs(const char *key, const char *value, std::vector<std::string> *out)
{
	std::string s = value ? value : "";
	out->clear();
	if (!value) {
		error("%s: bad argument %<-fplugin-arg-%s-%s%>: expected %<=GLOB,...%>",
		      plugin_name, plugin_name, key);
		return false;
	}
	for (size_t start = 0; !s.empty();) {
		size_t comma = s.find(',', start);
		std::string glob = s.substr(start, comma == std::string::npos ? comma : comma - start);
		if (glob.empty()) {
			error("%s: bad argument %<-fplugin-arg-%s-%s=%s%>: empty glob",
			      plugin_name, plugin_name, key, value);
			return false;
		}
		out->push_back(glob);
		if (comma == std::string::npos)
			break;
		start = comma + 1;
	}
	return true;
}

// The report is opened once, in append mode, because several translation
// units (make -j) may share one file.
bool open_report(const char *key, const char *value)
{
	if (!value || !*value) {
		error("%s: bad argument %<-fplugin-arg-%s-%s%>: expected =FILE",
		      plugin_name, plugin_name, key);
		return false;
	}
	if (policy.report_fd >= 0)
		close(policy.report_fd);
	policy.report_fd = open(value, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
	if (policy.report_fd < 0) {
		error("%s: bad argument %<-fplugin-arg-%s-%s=%s%>: %s", plugin_name,
		      plugin_name, key, value, xstrerror(errno));
		return false;
	}
	return true;
}

// One attribute argument as an integer, or -1 when it is not an integer
// constant that fits (the handler's range check then rejects it).
HOST_WIDE_INT attribute_int(tree arg)
{
	tree v = TREE_VALUE(arg);
	STRIP_ANY_LOCATION_WRAPPER(v);
	if (TREE_CODE(v) != INTEGER_CST || !tree_fits_shwi_p(v))
		return -1;
	return tree_to_shwi(v);
}

// Validate ftpad(before, after) where the user writes it, so that the error
// points at the function rather than surfacing later in the RTL pass.
tree handle_ftpad_attribute(tree *node, tree name, tree args, int, bool *no_add_attrs)
{
	if (TREE_CODE(*node) != FUNCTION_DECL) {
		error("%qE attribute applies only to functions", name);
		*no_add_attrs = true;
		return NULL_TREE;
	}
	const char *what[2] = {"before", "after"};
	HOST_WIDE_INT lo[2] = {0, ftpad_target().min_after};
	int i = 0;
	for (tree arg = args; arg && i < 2; arg = TREE_CHAIN(arg), i++) {
		HOST_WIDE_INT v = attribute_int(arg);
		if (v < lo[i] || v > 255) {
			error_at(DECL_SOURCE_LOCATION(*node),
				 "%qE attribute on %qD: %s must be an integer constant from %wd to 255",
				 name, *node, what[i], lo[i]);
			*no_add_attrs = true;
		}
	}
	return NULL_TREE;
}

// Two arguments, on a declaration, not part of the type.
const attribute_spec ftpad_attribute = {
	"ftpad", 2, 2, true, false, false, false, handle_ftpad_attribute, NULL,
};

void register_attributes(void *, void *)
{
	register_attribute(&ftpad_attribute);
}

bool has_attribute(tree decl, const char *name)
{
	return lookup_attribute(name, DECL_ATTRIBUTES(decl)) != NULL_TREE;
}

// The name as emitted: clones have their own (foo.constprop.0), C++ names
// are mangled, and asm("name") labels lose their '*'.
const char *asm_name(tree decl)
{
	return targetm.strip_name_encoding(IDENTIFIER_POINTER(DECL_ASSEMBLER_NAME(decl)));
}

// The section the user put the function in.  GCC's own choices
// (-ffunction-sections, .text.unlikely, COMDAT) are not the user's, so
// they all count as ".text".
const char *section_name(tree decl)
{
	symtab_node *node = symtab_node::get(decl);
	const char *name = DECL_SECTION_NAME(decl);
	if (!name || (node && node->implicit_section))
		return ".text";
	return name;
}

const char *first_match(const std::vector<std::string> &globs, const char *s)
{
	for (const std::string &glob : globs)
		if (fnmatch(glob.c_str(), s, 0) == 0)
			return glob.c_str();
	return NULL;
}

// Parse `key=N` of a rule; false with *why set when it is not one.
bool parse_rule_count(const std::string &word, const char *key, unsigned lo, int *out,
		      std::string *why)
{
	std::string prefix = std::string(key) + "=";
	if (word.compare(0, prefix.size(), prefix))
		return false;
	std::string value = word.substr(prefix.size());
	char *end;
	errno = 0;
	long v = strtol(value.c_str(), &end, 10);
	if (value.empty() || *end || errno || v < (long)lo || v > 255)
		*why = "'" + word + "': expected " + key + "=N with N from " + std::to_string(lo) +
		       " to 255";
	*out = (int)v;
	return true;
}

// One non-blank, non-comment line; returns the reason it is wrong, or "".
std::string parse_rule(const std::vector<std::string> &words, policy_rule *rule)
{
	if (words[0] != "pad" && words[0] != "exclude")
		return "unknown rule '" + words[0] + "': expected 'pad' or 'exclude'";
	if (words.size() < 2)
		return "'" + words[0] + "' needs a glob";
	rule->pad = words[0] == "pad";
	rule->glob = words[1];
	for (size_t i = 2; i < words.size(); i++) {
		std::string why;
		if (!rule->pad)
			return "'exclude' takes only a glob, not '" + words[i] + "'";
		if (!parse_rule_count(words[i], "before", 0, &rule->before, &why) &&
		    !parse_rule_count(words[i], "after", ftpad_target().min_after, &rule->after, &why))
			why = "unknown setting '" + words[i] + "': expected before=N or after=N";
		if (!why.empty())
			return why;
	}
	return "";
}

// policy=FILE: one rule per line, '#' starts a comment; the first rule whose
// glob matches a function's name decides for it.
bool read_policy_file(const char *key, const char *path)
{
	if (!path || !*path) {
		error("%s: bad argument %<-fplugin-arg-%s-%s%>: expected a file name",
		      plugin_name, plugin_name, key);
		return false;
	}
	FILE *f = fopen(path, "r");
	if (!f) {
		error("%s: %s: cannot read the policy file: %s", plugin_name, path, xstrerror(errno));
		return false;
	}
	bool ok = true;
	char *line = NULL; // getline: a line of any length is one line
	size_t size = 0;
	for (unsigned lineno = 1; getline(&line, &size, f) >= 0; lineno++) {
		std::vector<std::string> words;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		for (char *w = strtok(line, " \t\r\n"); w; w = strtok(NULL, " \t\r\n"))
			words.push_back(w);
		if (words.empty())
			continue;
		policy_rule rule;
		rule.where = std::string(path) + ":" + std::to_string(lineno);
		std::string why = parse_rule(words, &rule);
		if (!why.empty()) {
			error("%s: %s: %s", plugin_name, rule.where.c_str(), why.c_str());
			ok = false;
			continue;
		}
		policy.rules.push_back(rule);
	}
	free(line);
	fclose(f);
	return ok;
}

// Real instructions: what the function will execute, not the USE and
// CLOBBER markers the register allocator leaves behind.
unsigned count_insns(void)
{
	unsigned n = 0;
	for (rtx_insn *insn = get_insns(); insn; insn = NEXT_INSN(insn)) {
		if (!NONDEBUG_INSN_P(insn))
			continue;
		enum rtx_code code = GET_CODE(PATTERN(insn));
		if (code != USE && code != CLOBBER)
			n++;
	}
	return n;
}

// The attributes that say the code must not, or need not, be padded.
const char *code_says_skip(tree decl)
{
	if (has_attribute(decl, "no_instrument_function"))
		return "no_instrument_function";
	if (has_attribute(decl, "naked"))
		return "naked";
	if (has_attribute(decl, "patchable_function_entry")) {
		if (has_attribute(decl, "ftpad"))
			warning_at(DECL_SOURCE_LOCATION(decl), 0,
				   "%<ftpad%> attribute on %qD ignored: its "
				   "%<patchable_function_entry%> attribute wins", decl);
		return "user patchable_function_entry";
	}
	return NULL;
}

// The attribute's layout; its arguments were checked by the handler.
bool attribute_layout(tree decl, ftpad_layout *out)
{
	tree attr = lookup_attribute("ftpad", DECL_ATTRIBUTES(decl));
	if (!attr)
		return false;
	tree args = TREE_VALUE(attr);
	out->before = attribute_int(args);
	out->after = attribute_int(TREE_CHAIN(args));
	return true;
}

// The layout, unless min-insns says the function is too small.
decision min_insns_decision(function *fn, ftpad_layout layout, const std::string &reason)
{
	if (policy.min_insns && !fn->cfg) // an asm thunk: a few insns, no loop
		return skip("asm thunk < min-insns " + std::to_string(policy.min_insns));
	if (policy.min_insns) {
		// Count first: mark_dfs_back_edges walks the whole CFG.
		unsigned n = count_insns();
		if (n < policy.min_insns && !mark_dfs_back_edges(fn))
			return skip(std::to_string(n) + " insns < min-insns " +
				    std::to_string(policy.min_insns) + ", no loop");
	}
	return pad(layout, reason);
}

decision decide(function *fn, const char *name, const char *section, ftpad_layout global)
{
	tree decl = fn->decl;
	ftpad_layout own;

	if (const char *why = code_says_skip(decl))
		return skip(why);
	if (const char *glob = first_match(policy.exclude, name))
		return skip(std::string("excluded by '") + glob + "'");
	if (!policy.include.empty() && !first_match(policy.include, name))
		return skip("not included");
	if (first_match(policy.exclude_section, section))
		return skip(std::string("section '") + section + "' excluded");
	if (attribute_layout(decl, &own))
		return pad(own, "ftpad attribute");
	for (const policy_rule &rule : policy.rules) {
		if (fnmatch(rule.glob.c_str(), name, 0))
			continue;
		if (!rule.pad)
			return skip("excluded by " + rule.where);
		if (rule.before >= 0)
			global.before = rule.before;
		if (rule.after >= 0)
			global.after = rule.after;
		return min_insns_decision(fn, global, "pad by " + rule.where);
	}
	return min_insns_decision(fn, global, "default");
}

void json_string(std::string &out, const char *key, const char *s)
{
	out += std::string("\"") + key + "\": \"";
	for (; *s; s++) {
		unsigned char c = *s;
		if (c == '"' || c == '\\') {
			out += '\\';
			out += c;
		} else if (c < 0x20) {
			char buf[8];
			snprintf(buf, sizeof buf, "\\u%04x", c);
			out += buf;
		} else {
			out += c;
		}
	}
	out += "\", ";
}

// What min-insns looks at, for the report: "insns" and "loop", or nothing
// for an asm thunk, which has no RTL.
std::string report_size(function *fn)
{
	if (!fn->cfg)
		return "";
	return ", \"insns\": " + std::to_string(count_insns()) +
	       ", \"loop\": " + (mark_dfs_back_edges(fn) ? "true" : "false");
}

void report(function *fn, const char *name, const char *section, const decision &d)
{
	if (policy.report_fd < 0)
		return;
	tree decl = fn->decl;
	std::string line = "{";
	json_string(line, "function", name);
	// Through -fdebug-prefix-map (and -ffile-prefix-map), as the debug
	// info's file names are: a build by absolute paths gives the same
	// report in every build directory.
	json_string(line, "source", remap_debug_filename(DECL_SOURCE_FILE(decl)));
	json_string(line, "section", section);
	json_string(line, "decision", d.layout.pad ? "pad" : "skip");
	json_string(line, "reason", d.reason.c_str());
	line += "\"before\": " + std::to_string(d.layout.before) +
		", \"after\": " + std::to_string(d.layout.after) + report_size(fn) + "}\n";
	// One write() of a whole line to an O_APPEND file: lines from
	// parallel compiles do not interleave.
	if (write(policy.report_fd, line.data(), line.size()) != (ssize_t)line.size())
		error("%s: cannot write the report: %s", plugin_name, xstrerror(errno));
}

} // namespace

bool ftpad_policy_is_argument(const char *key)
{
	static const char *const keys[] = {
		"include", "exclude", "exclude-section", "min-insns", "report", "policy",
	};
	for (const char *k : keys)
		if (!strcmp(key, k))
			return true;
	return false;
}

bool ftpad_policy_argument(const char *key, const char *value)
{
	if (!strcmp(key, "include"))
		return parse_globs(key, value, &policy.include);
	if (!strcmp(key, "exclude"))
		return parse_globs(key, value, &policy.exclude);
	if (!strcmp(key, "exclude-section"))
		return parse_globs(key, value, &policy.exclude_section);
	if (!strcmp(key, "min-insns"))
		return ftpad_parse_count(key, value, 0, 65535, &policy.min_insns);
	if (!strcmp(key, "policy"))
		return read_policy_file(key, value);
	return open_report(key, value);
}

void ftpad_policy_register(const char *name)
{
	register_callback(name, PLUGIN_ATTRIBUTES, register_attributes, NULL);
}

ftpad_layout ftpad_policy_decide(function *fn, ftpad_layout global)
{
	const char *name = asm_name(fn->decl);
	const char *section = section_name(fn->decl);
	decision d = decide(fn, name, section, global);
	report(fn, name, section, d);
	return d.layout;
}
