// SPDX-License-Identifier: MIT
// policy.cc - the GCC side of the per-function policy (docs/gcc-plugin.md
// "Which functions get a pad"): the ftpad attribute, and the facts about a
// function that the core's decision chain (plugin-core/decide.c) decides
// on: its attributes, its name as emitted, its section, and its real
// instructions and loops, which min-insns and the report look at.
#include <cerrno>

#include "gcc-common.h"
#include "file-prefix-map.h"

#include "policy.h"

namespace {

const char *const plugin_name = "ftpad";

const ftpad_options *options; // the plugin's arguments, from ftpad.cc

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
	HOST_WIDE_INT lo[2] = {0, ftpad_lowest_after(options)};
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

// What min-insns and the report look at; an asm thunk has no RTL to
// measure.
bool measure(void *ctx, ftpad_size *size)
{
	function *fn = (function *)ctx;
	if (!fn->cfg)
		return false;
	// Count first: mark_dfs_back_edges walks the whole CFG.
	size->insns = count_insns();
	size->loop = mark_dfs_back_edges(fn);
	return true;
}

ftpad_function facts(function *fn)
{
	tree decl = fn->decl;
	ftpad_function f = {};
	f.name = asm_name(decl);
	f.section = section_name(decl);
	// Through -fdebug-prefix-map (and -ffile-prefix-map), as the debug
	// info's file names are: a build by absolute paths gives the same
	// report in every build directory.
	f.source = remap_debug_filename(DECL_SOURCE_FILE(decl));
	f.no_instrument_function = has_attribute(decl, "no_instrument_function");
	f.naked = has_attribute(decl, "naked");
	f.user_patchable_entry = has_attribute(decl, "patchable_function_entry");
	f.has_attribute = attribute_layout(decl, &f.attribute);
	f.measure = measure;
	f.measure_ctx = fn;
	return f;
}

// The user asked for two layouts; say which one stays.
void warn_if_attribute_ignored(function *fn, const ftpad_function &f, const ftpad_decision &d)
{
	if (f.has_attribute && !strcmp(d.reason, "user patchable_function_entry"))
		warning_at(DECL_SOURCE_LOCATION(fn->decl), 0,
			   "%<ftpad%> attribute on %qD ignored: its "
			   "%<patchable_function_entry%> attribute wins", fn->decl);
}

} // namespace

void ftpad_policy_register(const char *name, const ftpad_options *o)
{
	options = o;
	register_callback(name, PLUGIN_ATTRIBUTES, register_attributes, NULL);
}

bool ftpad_policy_decide(function *fn, ftpad_layout *layout)
{
	ftpad_function f = facts(fn);
	ftpad_decision d;
	ftpad_decide(options, &f, &d);
	warn_if_attribute_ignored(fn, f, d);
	if (!ftpad_report(options, &f, &d))
		error("%s: cannot write the report: %s", plugin_name, xstrerror(errno));
	*layout = d.layout;
	return d.pad;
}
