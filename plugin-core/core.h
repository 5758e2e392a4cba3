/* SPDX-License-Identifier: MIT */
/*
 * core.h - the half of both compiler plugins that knows no compiler: the
 * pad layout of each architecture and ABI, the -fplugin-arg-ftpad-KEY=VALUE
 * arguments, the policy file, the decision chain of docs/gcc-plugin.md
 * "Which functions get a pad", and the report line.  gcc-plugin/ and
 * clang-pass/ each keep only what talks to their compiler (a shim, as
 * Linux's scripts/gcc-plugins/gcc-common.h): they gather the facts about a
 * function, ask ftpad_decide(), and turn its layout into code.
 *
 * Plain C11 with no GCC or LLVM type, so it is built once, linked into both
 * plugins, and unit-tested alone (plugin-core/tests/core_test.c).
 */
#ifndef FTPAD_PLUGIN_CORE_H
#define FTPAD_PLUGIN_CORE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The two ABIs of docs/design.md: ftpad's own user layout, and exactly what
 * Linux expects from its compiler flags. */
enum ftpad_abi { FTPAD_ABI_USER, FTPAD_ABI_KERNEL };

/* Where a site's address is recorded. */
enum ftpad_record_kind {
	FTPAD_RECORD_FTPAD,     /* __ftpad_sites (docs/format.md) */
	FTPAD_RECORD_MCOUNT,    /* __mcount_loc, as -mrecord-mcount writes it */
	FTPAD_RECORD_PATCHABLE, /* __patchable_function_entries, per function */
};

/* Fixed facts about an architecture's layout in one ABI. */
struct ftpad_abi_layout {
	unsigned min_after;          /* fewest units after the entry that hold a site */
	unsigned default_before;     /* NOP units before the ops slot */
	unsigned default_after;      /* NOP units after the entry */
	bool default_ops;            /* an ops slot unless ops=0 */
	bool ops_allowed;            /* the ABI has a place for an ops slot at all */
	bool own_alignment;          /* align the entry ourselves (else the compiler's stays) */
	bool align_without_ops;      /* ... even when there is no ops slot */
	bool before_everywhere;      /* `before` pads every function, as CALL_PADDING */
	/* The layout is exactly the compiler's own
	 * -fpatchable-function-entry=N,M (the clang plugin uses LLVM's). */
	bool compiler_patchable_entry;
	/* Without an ops slot, `after` may go below min_after, as
	 * -fpatchable-function-entry's counts may: such a pad is the
	 * compiler's own, with no site ftpad patches (ftpad_below_site()). */
	bool compiler_pads;
	enum ftpad_record_kind default_record;
	unsigned layout_flags;       /* record flags every site of this layout has */
	/* The record flag of the instruction that saves the return address for
	 * the trampoline in front of the site (aarch64: mov x9, x30), 0 where
	 * the layout has none. */
	unsigned mov_flag;
};

struct ftpad_arch_layout {
	const char *name;            /* "x86_64" */
	unsigned record_arch;        /* enum ftpad_site_arch */
	unsigned unit_bytes;         /* one NOP unit: 1 on x86_64, 4 on aarch64 */
	unsigned site_bytes;         /* the patchable instruction */
	unsigned site_offset;        /* from the end of the landing pad to the site */
	struct ftpad_abi_layout user, kernel;
};

extern const struct ftpad_arch_layout ftpad_layout_x86_64;
extern const struct ftpad_arch_layout ftpad_layout_aarch64;

/* The architecture named NAME ("x86_64", "aarch64"), or NULL. */
const struct ftpad_arch_layout *ftpad_arch_layout_named(const char *name);

const struct ftpad_abi_layout *ftpad_arch_abi(const struct ftpad_arch_layout *arch,
						enum ftpad_abi abi);

/* A layout in NOP units, as in the record. */
struct ftpad_layout {
	unsigned before;
	unsigned after;
};

/* A list of fnmatch(3) globs. */
struct ftpad_globs {
	char **items;
	size_t count;
};

/* The first glob of GLOBS that S matches, or NULL. */
const char *ftpad_globs_match(const struct ftpad_globs *globs, const char *s);

/* One line of a policy file: `pad GLOB [before=N] [after=N]` or
 * `exclude GLOB` (docs/gcc-plugin.md "The policy file"). */
struct ftpad_rule {
	char *glob;
	bool pad;
	int before;                  /* -1: the global value */
	int after;
	char *where;                 /* FILE:LINE, for the report */
};

/* Every argument, after validation. */
struct ftpad_options {
	const struct ftpad_arch_layout *arch;
	enum ftpad_abi abi;
	enum ftpad_record_kind record;
	struct ftpad_layout layout;  /* the global before/after */
	bool ops;
	/* exit=1: an exit site in front of every return and tail call of each
	 * padded function (docs/format.md "Exit sites"). */
	bool exits;
	bool unsafe_ipa_ra;          /* testing only: docs/gcc-plugin.md */
	unsigned min_insns;          /* 0: no threshold */
	struct ftpad_globs include, exclude, exclude_section;
	struct ftpad_rule *rules;    /* from policy=FILE, in order */
	size_t rule_count;
	int report_fd;               /* -1: no report */
};

/* The ABI's defaults for ARCH, no policy and no report. */
void ftpad_options_init(struct ftpad_options *o, const struct ftpad_arch_layout *arch);

static inline const struct ftpad_abi_layout *ftpad_options_abi(const struct ftpad_options *o)
{
	return ftpad_arch_abi(o->arch, o->abi);
}

/* One -fplugin-arg-ftpad-KEY[=VALUE] as the compiler gave it. */
struct ftpad_arg {
	const char *key;
	const char *value;           /* NULL: no '=' */
	const char *flag;            /* as the user wrote it, for messages */
};

/* How the core's errors reach the compiler's diagnostics. */
struct ftpad_diag {
	void *ctx;
	/* "bad argument FLAG: WHY" */
	void (*bad_argument)(void *ctx, const char *flag, const char *why);
	/* "unknown argument FLAG"; FLAG is the key part only */
	void (*unknown_argument)(void *ctx, const char *flag);
	/* Anything else, such as "FILE:LINE: why" of a policy file. */
	void (*error)(void *ctx, const char *message);
	/* Optional: why this compile cannot give a pad AFTER units after the
	 * entry (beyond the range check), or NULL; asked for each policy
	 * rule's after=N once every other argument is known. */
	const char *(*after_problem)(void *ctx, const struct ftpad_options *o,
				     unsigned after);
};

/* The fewest units after the entry that O accepts: the site's min_after,
 * or 0 where a pad may be the compiler's own, without a site (the kernel
 * ABI with ops=0 and a record that needs no site: not record=mcount). */
unsigned ftpad_lowest_after(const struct ftpad_options *o);

/* Is LAYOUT too small for a site, so the compiler's own
 * -fpatchable-function-entry pad, recorded with FTPAD_SITE_NO_SITE
 * (docs/format.md "Pads without a site")? */
bool ftpad_below_site(const struct ftpad_options *o, struct ftpad_layout layout);

/* Parse ARGS into O, which ftpad_options_init() set for the target: the ABI
 * first (it sets the other arguments' defaults and limits), then the rest
 * in order, then the policy files.  Every bad argument is reported, not
 * only the first; false when there was one. */
bool ftpad_parse_arguments(struct ftpad_options *o, const struct ftpad_arg *args, size_t count,
			   const struct ftpad_diag *diag);

/* One policy-file line, cut at '#'.  Returns false with WHY set when it is
 * wrong; true with *IS_RULE false when it is blank.  RULE->glob is a
 * pointer into LINE. */
bool ftpad_policy_parse_line(char *line, unsigned min_after, struct ftpad_rule *rule,
			     bool *is_rule, char *why, size_t why_size);

/* What min-insns looks at: the function's real instructions (or an
 * estimate of them), and whether its control-flow graph has a cycle. */
struct ftpad_size {
	unsigned insns;
	bool loop;
};

/* The facts a compiler gives about one function it emits. */
struct ftpad_function {
	const char *name;            /* as the assembler sees it */
	const char *section;         /* the user's section, else ".text" */
	const char *source;          /* for the report, through the prefix maps */
	/* What the code itself says, checked first, in this order. */
	bool no_instrument_function;
	bool naked;
	bool user_patchable_entry;   /* the user's own patchable_function_entry */
	bool foreign_prefix_data;    /* someone else's, e.g. -fsanitize=function */
	bool has_attribute;          /* __attribute__((ftpad(before, after))) */
	struct ftpad_layout attribute;
	/* Measures the function into *SIZE on first need; false when it has no
	 * body the compiler can measure (GCC's asm thunks). */
	bool (*measure)(void *ctx, struct ftpad_size *size);
	void *measure_ctx;
};

struct ftpad_decision {
	bool pad;
	struct ftpad_layout layout;  /* {0, 0} when skipped */
	char reason[4352];           /* as in docs/gcc-plugin.md "The report" */
	/* The size, when the chain or the report measured it. */
	int measured;                /* -1: not yet, 0: nothing to measure, 1: size holds */
	struct ftpad_size size;
};

/* The decision chain (docs/gcc-plugin.md "Which functions get a pad"),
 * first match wins. */
void ftpad_decide(const struct ftpad_options *o, const struct ftpad_function *fn,
		  struct ftpad_decision *d);

/* The report's JSON line for FN and D, with its newline, in malloc'd
 * memory (NULL when out of memory).  Measures FN if D has not. */
char *ftpad_report_line(const struct ftpad_function *fn, struct ftpad_decision *d);

/* Appends that line to the report, if there is one, in one write(2) to an
 * O_APPEND file, so the compiles of a parallel build can share it.  False
 * when it cannot be written (errno says why). */
bool ftpad_report(const struct ftpad_options *o, const struct ftpad_function *fn,
		  struct ftpad_decision *d);

#ifdef __cplusplus
}
#endif

#endif
