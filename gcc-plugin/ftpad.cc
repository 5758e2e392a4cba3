// SPDX-License-Identifier: MIT
// ftpad.cc - the ftpad GCC plugin: a patchable pad, an 8-byte ops slot and a
// site record at the entry of each chosen function.
//
// How it works, in the order GCC runs it for each function:
//  1. ftpad_decide, an RTL pass after "alignments" (the CFG still exists),
//     applies the policy.  For a padded function it sets crtl's patch area
//     to a one-unit marker so that assemble_start_function calls the
//     print_patchable_function_entry hook before the function label.
//  2. ftpad_site, an RTL pass just before "shorten", after the targets have
//     put ENDBR (x86) or BTI (aarch64) at the entry, inserts the site as a
//     volatile asm right behind that landing pad.
//     With exit=1 the same pass also puts an exit site in front of every
//     return and sibling call (emit_exit_sites).
//  3. Our print_patchable_function_entry hook, called from final before the
//     label, emits the record, the filler, the before-NOPs and the ops slot,
//     and a local label at the entry.  Functions we do not pad go to GCC's
//     own hook unchanged.
// GCC's own patch area machinery is not used for the NOPs after the entry:
// on x86 it emits single-byte NOPs that cannot be patched while threads run.
#include "gcc-common.h"

#include <string>
#include <vector>

#include "arch.h"
#include "policy.h"
#include "../pad/ftpad_site.h"
#include "../pad/pad.h"

int plugin_is_GPL_compatible; // the tree is MIT, which is GPL-compatible

namespace {

const char *const plugin_name = "ftpad";

// The user's arguments, after validation (plugin-core/options.c).
ftpad_options options;

// The target's layout in the ABI the user chose.
const ftpad_abi_layout &target(void)
{
	return *ftpad_options_abi(&options);
}

// What ftpad_decide chose for the function being compiled.  GCC compiles
// one function at a time through all RTL passes and final, so one slot is
// enough; `decl` says which function it belongs to.
struct ftpad_decision {
	tree decl;
	unsigned id;            // unique in this assembly file: label suffix
	unsigned landing_flag;  // FTPAD_SITE_ENDBR / _BTI, found by ftpad_site
	unsigned before;        // this function's layout, from the policy
	unsigned after;
	// Too small for a site (ftpad_below_site): GCC's own pad, NOP for NOP.
	bool compiler_pad;
	// ... and recorded by GCC's own hook as well (record=patchable), so
	// the whole pad is GCC's -fpatchable-function-entry=B+A,B.
	bool gcc_pad;
	bool site_emitted;
	bool thunk;             // an asm thunk: see output_mi_thunk()
	bool pre_done;          // the hook has printed the part before the label
	std::string landing;    // a thunk's landing pad, printed before its site
	// exit=1: the kind of each exit site, in insn order; the Nth is
	// labelled exit_label(N).  exits_placed: they were looked for (none
	// found: the function never returns, FTPAD_SITE_NO_RETURN).
	std::vector<ftpad_site_kind> exits;
	bool exits_placed;
};

ftpad_decision current;

void (*gcc_print_patchable_function_entry)(FILE *, unsigned HOST_WIDE_INT, bool);
void (*gcc_output_mi_thunk)(FILE *, tree, HOST_WIDE_INT, HOST_WIDE_INT, tree);

// IPA-RA lets a caller keep values in call-clobbered registers that it has
// seen the callee leave alone.  An enabled site runs a trampoline the
// compiler never saw, so a padded function must not publish its register
// usage.  GCC only does this itself for -fpatchable-function-entry and -pg.
void disable_ipa_ra(void)
{
	if (!options.unsafe_ipa_ra)
		flag_ipa_ra = 0;
}

// Everything but an __mcount_loc record at GCC's own alignment and padding
// needs our hook before the entry: an ops slot, our alignment, a record
// that points at labels there, or this function's own before-NOPs (its
// ftpad attribute or policy rule, where x86's kernel layout otherwise
// leaves the NOPs before the entry to GCC's CALL_PADDING).
bool needs_pre_entry_hook(void)
{
	return options.record != FTPAD_RECORD_MCOUNT || options.ops || target().own_alignment ||
	       current.before;
}

// Apply the policy to FN and note the decision in `current`; true when FN
// gets a pad.  For the decide pass, and for asm thunks.
bool decide(function *fn)
{
	current = ftpad_decision();
	if (target().before_everywhere && options.layout.before &&
	    !lookup_attribute("patchable_function_entry", DECL_ATTRIBUTES(fn->decl))) {
		// CALL_PADDING, exactly -fpatchable-function-entry=N,N: GCC's
		// own hook pads every function before its entry.
		crtl->patch_area_size = options.layout.before;
		crtl->patch_area_entry = options.layout.before;
	}
	ftpad_layout layout;
	if (!ftpad_policy_decide(fn, &layout))
		return false;
	// Once per file, at the first pad: the options are final by now.
	static bool options_checked;
	if (!options_checked) {
		options_checked = true;
		if (const char *why = ftpad_arch_conflicting_options())
			error("%s: %s", plugin_name, why);
	}
	current.decl = fn->decl;
	current.id = fn->funcdef_no;
	current.before = layout.before;
	current.after = layout.after;
	current.compiler_pad = ftpad_below_site(&options, layout);
	current.gcc_pad = current.compiler_pad && options.record == FTPAD_RECORD_PATCHABLE;
	if (current.gcc_pad) {
		// GCC's own patch area: its hook writes the NOPs and the
		// record, and the site pass leaves the function alone.
		crtl->patch_area_size = layout.before + layout.after;
		crtl->patch_area_entry = layout.before;
	}
	disable_ipa_ra();
	return true;
}

const pass_data decide_pass_data = {
	RTL_PASS, "ftpad_decide", OPTGROUP_NONE, TV_NONE, 0, 0, 0, 0, 0,
};

struct decide_pass : rtl_opt_pass {
	decide_pass(gcc::context *ctx) : rtl_opt_pass(decide_pass_data, ctx) {}

	unsigned int execute(function *fn) final override
	{
		if (decide(fn) && !current.gcc_pad && needs_pre_entry_hook()) {
			// A one-unit marker before the entry makes
			// assemble_start_function call our hook before the label;
			// nothing is emitted after it.
			crtl->patch_area_size = 1;
			crtl->patch_area_entry = 1;
		}
		return 0;
	}
};

const pass_data site_pass_data = {
	RTL_PASS, "ftpad_site", OPTGROUP_NONE, TV_NONE, 0, 0, 0, 0, 0,
};

std::string label(const char *what, unsigned id)
{
	return std::string(".Lftpad_") + what + "_" + std::to_string(id);
}

// The part after the entry, behind the landing pad.
std::string site_text(void)
{
	std::string site = label("site", current.id);
	if (current.compiler_pad) // no site: record=mcount refuses such pads
		return ftpad_arch_compiler_pad_asm(site.c_str(), current.after);
	std::string text = ftpad_arch_after_entry_asm(
		options.abi, label("post", current.id).c_str(), site.c_str(), current.after);
	// Linux's __mcount_loc: one section per file, exactly as -mrecord-mcount
	// writes it right behind the NOP (no alignment, an absolute address per
	// site); the kernel links them into one table.
	if (options.record == FTPAD_RECORD_MCOUNT)
		text += "\n\t.pushsection __mcount_loc,\"a\",%progbits\n\t.8byte " + site +
			"\n\t.popsection";
	return text;
}

std::string exit_label(unsigned id, size_t n)
{
	return label("exit", id) + "_" + std::to_string(n);
}

// The kind of exit INSN is: a tail exit for a sibling call (a direct or
// an indirect jump to another function), an exit for a return of any kind
// (return, simple_return, and the rets that shrink-wrapping gives each of
// its epilogues); ENTRY for any other insn.
ftpad_site_kind exit_kind(rtx_insn *insn)
{
	if (CALL_P(insn) && SIBLING_CALL_P(insn))
		return FTPAD_SITE_KIND_TAIL_EXIT;
	if (JUMP_P(insn) && returnjump_p(insn))
		return FTPAD_SITE_KIND_EXIT;
	return FTPAD_SITE_KIND_ENTRY;
}

// An exit site in front of every return and sibling call of FN.  This runs
// after the epilogues are in place (pro_and_epilogue, and the targets'
// machine_reorg), so the site sits behind the last insn that restores the
// stack pointer or x30 (aarch64's autiasp included), and the stack pointer
// there is the one at the entry site.  Nothing after this pass copies or
// moves insns (bb-reorder and the scheduler ran before "mach"), and
// "shorten" measures the NOP, so branch ranges stay right.  The NOP sits
// right before the jump, so it changes no register: an indirect sibling
// call's target register is set before it and read after it.
void emit_exit_sites(void)
{
	current.exits_placed = true;
	for (rtx_insn *insn = get_insns(); insn; insn = NEXT_INSN(insn)) {
		ftpad_site_kind kind = exit_kind(insn);
		if (kind == FTPAD_SITE_KIND_ENTRY)
			continue;
		// A NOP before a conditional return would run on both of its
		// paths.  x86_64 and aarch64 have none; a target that does
		// must split them first.
		if (JUMP_P(insn) && any_condjump_p(insn)) {
			sorry("%s: exit sites in front of conditional returns", plugin_name);
			return;
		}
		std::string text = ftpad_arch_exit_site_asm(
			exit_label(current.id, current.exits.size()).c_str());
		// final prints an asm's file and line, and crashes on a return
		// that has none (shrink-wrapping makes such).
		location_t where = INSN_LOCATION(insn);
		if (LOCATION_LOCUS(where) == UNKNOWN_LOCATION)
			where = DECL_SOURCE_LOCATION(current_function_decl);
		rtx body = gen_rtx_ASM_INPUT_loc(VOIDmode, ggc_strdup(text.c_str()), where);
		MEM_VOLATILE_P(body) = 1;
		emit_insn_before(body, insn);
		current.exits.push_back(kind);
	}
}

struct site_pass : rtl_opt_pass {
	site_pass(gcc::context *ctx) : rtl_opt_pass(site_pass_data, ctx) {}

	unsigned int execute(function *fn) final override
	{
		if (current.decl != fn->decl || current.gcc_pad)
			return 0;
		basic_block first = ENTRY_BLOCK_PTR_FOR_FN(fn)->next_bb;
		if (first == EXIT_BLOCK_PTR_FOR_FN(fn))
			return 0;
		// The target passes put ENDBR/BTI right before the first block,
		// where GCC itself puts its patch area: the site goes after it.
		rtx_insn *head = BB_HEAD(first);
		rtx_insn *prev = PREV_INSN(head);
		if (prev && INSN_P(prev))
			current.landing_flag = ftpad_arch_landing_pad_flag(prev);
		std::string text = site_text();
		rtx body = gen_rtx_ASM_INPUT_loc(VOIDmode, ggc_strdup(text.c_str()),
						 DECL_SOURCE_LOCATION(fn->decl));
		MEM_VOLATILE_P(body) = 1;
		emit_insn_before(body, head);
		current.site_emitted = true;
		if (options.exits)
			emit_exit_sites();
		return 0;
	}
};

// The symbol name of DECL as the assembler knows it.
const char *symbol_name(tree decl)
{
	return XSTR(XEXP(DECL_RTL(decl), 0), 0);
}

// Switch to a record section of this function's own: SHF_LINK_ORDER to
// the function's section, and in its COMDAT group, so --gc-sections and
// COMDAT folding keep exactly the records of surviving functions (unlike
// GCC 12's own __patchable_function_entries, PR110729).
void push_function_section(FILE *f, const char *section, const char *flags,
			   const char *fn_name, tree group, unsigned id)
{
	fprintf(f, "\t.pushsection %s,\"%s%s\",%%progbits,", section, flags, group ? "G" : "");
	assemble_name_raw(f, fn_name);
	if (group) {
		fputc(',', f);
		assemble_name_raw(f, IDENTIFIER_POINTER(group));
		fputs(",comdat", f);
	}
	fprintf(f, ",unique,%u\n", id);
}

// A record's four addresses: the function's entry, ops slot and name, and
// the site labelled SITE.
void emit_record_addresses(FILE *f, const std::string &site)
{
	unsigned id = current.id;
	fprintf(f, "\t.long %s - .\n", label("entry", id).c_str());
	fprintf(f, "\t.long %s - .\n", site.c_str());
	if (options.ops)
		fprintf(f, "\t.long %s - .\n", label("ops", id).c_str());
	else
		fputs("\t.long 0\n", f);
	fprintf(f, "\t.long %s - .\n", label("name", id).c_str());
}

// One exit site's record, in the function's record section behind its
// entry record: the entry, ops slot and name are the function's, the site
// is the exit NOP; the layout fields and flags describe only entries.
void emit_exit_record(FILE *f, const std::string &site, ftpad_site_kind kind)
{
	emit_record_addresses(f, site);
	fprintf(f, "\t.byte %u, %u, 0, 0, %u, %u\n", FTPAD_SITE_VERSION_EXIT,
		options.arch->record_arch, options.arch->site_bytes, kind);
	fputs("\t.short 0\n", f);
}

void emit_ftpad_record(FILE *f, tree decl, const char *fn_name)
{
	const ftpad_arch_layout &arch = *options.arch;
	unsigned id = current.id;
	tree group = DECL_COMDAT_GROUP(decl);
	unsigned flags = current.landing_flag | target().layout_flags | target().mov_flag;
	// A pad without a site gets a landing pad of its own only in front of
	// NOPs (ftpad_arch_compiler_pad_asm).
	if (!current.compiler_pad || current.after)
		flags |= ftpad_arch_own_landing_pad_flag();
	if (current.compiler_pad)
		flags |= FTPAD_SITE_NO_SITE;
	if (current.exits_placed && current.exits.empty())
		flags |= FTPAD_SITE_NO_RETURN;

	push_function_section(f, FTPAD_SITES_SECTION, "ao", fn_name, group, id);
	fprintf(f, "\t.balign %d\n", FTPAD_SITE_ALIGN);
	fprintf(f, "%s:\n", label("record", id).c_str());
	emit_record_addresses(f, label("site", id));
	fprintf(f, "\t.byte %u, %u, %u, %u, %u, 0\n", FTPAD_SITE_VERSION_ENTRY,
		arch.record_arch, current.before, current.after,
		current.compiler_pad ? 0 : arch.site_bytes);
	fprintf(f, "\t.short %u\n", flags);
	for (size_t n = 0; n < current.exits.size(); n++)
		emit_exit_record(f, exit_label(id, n), current.exits[n]);
	fputs("\t.popsection\n", f);

	// The name, so that stripped binaries can still be filtered by name.
	fputs("\t.pushsection " FTPAD_NAMES_SECTION ",", f);
	if (group) {
		fputs("\"aG\",%progbits,", f);
		assemble_name_raw(f, IDENTIFIER_POINTER(group));
		fputs(",comdat\n", f);
	} else {
		fputs("\"a\",%progbits\n", f);
	}
	fprintf(f, "%s:\n\t.string \"%s\"\n", label("name", id).c_str(),
		targetm.strip_name_encoding(fn_name));
	fputs("\t.popsection\n", f);
}

// GCC's __patchable_function_entries record: the start of the area before
// the entry if there is one, else the first NOP behind the landing pad; but
// a section per function, which COMDAT cannot break.
void emit_patchable_record(FILE *f, tree decl, const char *fn_name)
{
	bool prefix = current.before || options.ops;

	push_function_section(f, "__patchable_function_entries", "awo", fn_name,
			      DECL_COMDAT_GROUP(decl), current.id);
	fprintf(f, "\t.balign 8\n\t.8byte %s\n\t.popsection\n",
		label(prefix ? "pre" : "post", current.id).c_str());
}

// Before the label: filler, before-NOPs, the ops slot, and the entry label.
// The filler comes first so that the before-NOPs touch the ops slot and the
// entry gets the alignment the target needs, whatever -Os, cold or
// -falign-functions did to the function's own alignment.  The kernel
// layouts keep GCC's own alignment where they have no ops slot, as Linux's
// flags do.
void emit_pre_entry(FILE *f)
{
	if (target().own_alignment && (options.ops || target().align_without_ops)) {
		unsigned align = ftpad_arch_entry_align(current.landing_flag);
		unsigned pre = current.before * options.arch->unit_bytes + (options.ops ? FTPAD_PAD_SLOT_LEN : 0);
		fprintf(f, "\t.balign %u\n", align);
		ftpad_arch_emit_filler(f, (align - pre % align) % align);
	}
	fprintf(f, "%s:\n", label("pre", current.id).c_str());
	ftpad_arch_emit_nops(f, current.before);
	if (options.ops) {
		fprintf(f, "%s:\n", label("ops", current.id).c_str());
		ftpad_arch_emit_ops_slot(f);
	}
	fprintf(f, "%s:\n", label("entry", current.id).c_str());
	// The function's section refers to its record, so that a linker that
	// ignores SHF_LINK_ORDER in --gc-sections (gold) still keeps exactly
	// the records of the functions it keeps.
	if (options.record == FTPAD_RECORD_FTPAD)
		fprintf(f, "\t.reloc ., BFD_RELOC_NONE, %s\n",
			label("record", current.id).c_str());
}

// An asm thunk's insns (its sibling call) reach no RTL pass, only this
// hook, between the target's shorten_branches and final: measure them
// again once the exit sites are in, or final meets insns it never sized.
void emit_thunk_exit_sites(void)
{
	if (!options.exits)
		return;
	emit_exit_sites();
	shorten_branches(get_insns());
}

void print_patchable_function_entry(FILE *f, unsigned HOST_WIDE_INT size, bool record)
{
	tree decl = current_function_decl;
	if (!decl || current.decl != decl || !(current.site_emitted || current.thunk)) {
		gcc_print_patchable_function_entry(f, size, record);
		return;
	}
	if (current.pre_done) {
		// After a thunk's label: its landing pad, then the site.
		fprintf(f, "%s%s\n", current.landing.c_str(), site_text().c_str());
		current.site_emitted = true;
		return;
	}
	current.pre_done = true;
	if (current.thunk) {
		current.landing = ftpad_arch_thunk_landing_pad(&current.landing_flag);
		emit_thunk_exit_sites();
	}
	switch (options.record) {
	case FTPAD_RECORD_FTPAD:
		emit_ftpad_record(f, decl, symbol_name(decl));
		break;
	case FTPAD_RECORD_MCOUNT: // by the site pass, behind the NOP
		break;
	case FTPAD_RECORD_PATCHABLE:
		emit_patchable_record(f, decl, symbol_name(decl));
		break;
	}
	emit_pre_entry(f);
}

} // namespace

namespace {

// C++ this-adjusting thunks that the target writes as assembly (x86 and
// aarch64 at -O0) never reach an RTL pass, so even GCC's own
// -fpatchable-function-entry leaves them bare.  Decide for them here, and
// ask for the hook both before and after the label (a 1 + 1 marker): the
// part after it prints the thunk's landing pad and then the site.
void output_mi_thunk(FILE *f, tree thunk, HOST_WIDE_INT delta, HOST_WIDE_INT vcall_offset,
		     tree function)
{
	// Where the pad would be GCC's own, GCC's way: none on an asm thunk.
	unsigned HOST_WIDE_INT size = crtl->patch_area_size, entry = crtl->patch_area_entry;
	bool pad = decide(cfun);
	if (current.gcc_pad) {
		crtl->patch_area_size = size;
		crtl->patch_area_entry = entry;
	} else if (pad) {
		current.thunk = true;
		crtl->patch_area_entry = 1;
		crtl->patch_area_size = 2;
	}
	gcc_output_mi_thunk(f, thunk, delta, vcall_offset, function);
	current = ftpad_decision();
}

// The compiler's diagnostics for the core's argument errors.
void bad_argument(void *, const char *flag, const char *why)
{
	error("%s: bad argument %<%s%>: %s", plugin_name, flag, why);
}

void unknown_argument(void *, const char *flag)
{
	error("%s: unknown argument %<%s%>", plugin_name, flag);
}

void argument_error(void *, const char *message)
{
	error("%s: %s", plugin_name, message);
}

// Every argument, checked by the core: -fplugin-arg-ftpad-KEY[=VALUE].
bool parse_arguments(struct plugin_name_args *info)
{
	static const ftpad_diag diag = {NULL, bad_argument, unknown_argument, argument_error, NULL};
	std::vector<ftpad_arg> args(info->argc);
	std::vector<std::string> flags(info->argc);
	for (int i = 0; i < info->argc; i++) {
		const plugin_argument &a = info->argv[i];
		flags[i] = std::string("-fplugin-arg-") + info->base_name + "-" + a.key;
		if (a.value)
			flags[i] += std::string("=") + a.value;
		args[i] = ftpad_arg{a.key, a.value, flags[i].c_str()};
	}
	ftpad_options_init(&options, &ftpad_arch_target());
	return ftpad_parse_arguments(&options, args.data(), args.size(), &diag);
}

// With -flto the RTL passes, and so the pads, run in lto1 at link time: a
// link without the plugin would silently build a program with no pads.
// So cc1 puts a reference to an undefined symbol, named to say what is
// wrong, into the LTO IR (a top-level asm, which LTO streams), and every
// assembly file compiled with the plugin defines it: lto1's output when the
// plugin is on the link line, and cc1's own code, which a fat LTO object
// carries for non-LTO links.  The reference is an R_*_NONE reloc in a
// non-allocated section of its own, so no byte of the program changes, and
// bfd and gold both report it as undefined.
const char *const lto_guard_symbol = "__ftpad_plugin_missing_from_lto_link_line";

void lto_guard_reference(void *, void *)
{
	if (in_lto_p || !flag_generate_lto)
		return;
	std::string text = std::string("\t.pushsection .ftpad.lto_guard,\"\",%progbits\n"
				       "\t.reloc ., BFD_RELOC_NONE, ") +
			   lto_guard_symbol + "\n\t.byte 0\n\t.popsection";
	symtab->finalize_toplevel_asm(build_string(text.size(), text.c_str()));
}

// Written straight to the assembly file, so it never enters the LTO IR.
void lto_guard_definition(void *, void *)
{
	bool emits_code = in_lto_p ? !flag_wpa : flag_generate_lto;
	if (emits_code)
		fprintf(asm_out_file, "\t.weak %s\n\t.hidden %s\n\t.set %s, 0\n",
			lto_guard_symbol, lto_guard_symbol, lto_guard_symbol);
}

void register_passes(const char *name)
{
	// After "alignments": the CFG still exists (later policy counts insns
	// and finds loops), and nothing before final looks at crtl's patch area
	// except the target passes below.
	struct register_pass_info decide = {
		new decide_pass(g), "alignments", 1, PASS_POS_INSERT_AFTER,
	};
	// Before "shorten": the x86 ENDBR and aarch64 BTI passes have run, so
	// the landing pad is in place and the site can go right behind it.
	struct register_pass_info site = {
		new site_pass(g), "shorten", 1, PASS_POS_INSERT_BEFORE,
	};
	register_callback(name, PLUGIN_PASS_MANAGER_SETUP, NULL, &decide);
	register_callback(name, PLUGIN_PASS_MANAGER_SETUP, NULL, &site);
}

struct plugin_info info = {
	"0.1.0",
	"ftpad: patchable function-entry pads, ops slots and site records.\n"
	"  -fplugin-arg-ftpad-abi=user|kernel  ftpad's layout, or exactly Linux's\n"
	"  -fplugin-arg-ftpad-record=ftpad|mcount|patchable  where sites are recorded\n"
	"  -fplugin-arg-ftpad-before=N  NOP units before the ops slot\n"
	"  -fplugin-arg-ftpad-after=N   NOP units after the entry (the site included)\n"
	"  -fplugin-arg-ftpad-ops=0|1   emit the 8-byte ops slot\n"
	"  -fplugin-arg-ftpad-exit=0|1  an exit site before every return and tail call\n"
	"  -fplugin-arg-ftpad-include=GLOBS, exclude=GLOBS  function names to pad, not to pad\n"
	"  -fplugin-arg-ftpad-exclude-section=GLOBS  sections whose functions get no pad\n"
	"  -fplugin-arg-ftpad-min-insns=N  no pad for loop-free functions under N insns\n"
	"  -fplugin-arg-ftpad-policy=FILE  per-name rules: pad GLOB [before=N] [after=N], exclude GLOB\n"
	"  -fplugin-arg-ftpad-report=FILE  append one JSON line per function\n"
	"  __attribute__((ftpad(before, after))) sets one function's layout.\n"
	"See docs/gcc-plugin.md.",
};

} // namespace

int plugin_init(struct plugin_name_args *plugin_info, struct plugin_gcc_version *version)
{
	if (!plugin_default_version_check(version, &gcc_version)) {
		error("%s: built for GCC %s, loaded into GCC %s; rebuild the plugin"
		      " against the plugin headers of that compiler",
		      plugin_name, gcc_version.basever, version->basever);
		return 1;
	}
	if (!parse_arguments(plugin_info))
		return 1;
	register_callback(plugin_info->base_name, PLUGIN_INFO, NULL, &info);
	register_passes(plugin_info->base_name);
	register_callback(plugin_info->base_name, PLUGIN_START_UNIT, lto_guard_reference, NULL);
	register_callback(plugin_info->base_name, PLUGIN_FINISH_UNIT, lto_guard_definition, NULL);
	ftpad_policy_register(plugin_info->base_name, &options);
	gcc_print_patchable_function_entry = targetm.asm_out.print_patchable_function_entry;
	targetm.asm_out.print_patchable_function_entry = print_patchable_function_entry;
	gcc_output_mi_thunk = targetm.asm_out.output_mi_thunk;
	targetm.asm_out.output_mi_thunk = output_mi_thunk;
	disable_ipa_ra();
	return 0;
}
