/* SPDX-License-Identifier: MIT */
/*
 * options.c - the plugins' arguments (docs/gcc-plugin.md "Arguments") in
 * one table, and the policy file: the same keys, limits and messages for
 * every compiler.
 */
#define _GNU_SOURCE /* getline, strtok_r */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

/* Messages are short but may name a file; longer ones are cut. */
#define WHY_SIZE 4352

/* The defaults of the arguments whose defaults depend on the ABI. */
static void abi_defaults(struct ftpad_options *o)
{
	const struct ftpad_abi_layout *info = ftpad_options_abi(o);
	o->record = info->default_record;
	o->layout = (struct ftpad_layout){info->default_before, info->default_after};
	o->ops = info->default_ops;
}

void ftpad_options_init(struct ftpad_options *o, const struct ftpad_arch_layout *arch)
{
	*o = (struct ftpad_options){.arch = arch, .abi = FTPAD_ABI_USER, .report_fd = -1};
	abi_defaults(o);
}

const char *ftpad_globs_match(const struct ftpad_globs *globs, const char *s)
{
	for (size_t i = 0; i < globs->count; i++)
		if (fnmatch(globs->items[i], s, 0) == 0)
			return globs->items[i];
	return NULL;
}

static void globs_clear(struct ftpad_globs *globs)
{
	for (size_t i = 0; i < globs->count; i++)
		free(globs->items[i]);
	free(globs->items);
	*globs = (struct ftpad_globs){0};
}

/* Comma-separated globs.  An empty value is an empty list, so that a build
 * can pass `exclude=$(EMPTY)`; an empty item inside ("a,,b") is a typo. */
static const char *parse_globs(const char *value, struct ftpad_globs *out)
{
	globs_clear(out);
	if (!value)
		return "expected =GLOB,...";
	if (!*value)
		return NULL;
	size_t n = 1;
	for (const char *c = value; *c; c++)
		n += *c == ',';
	out->items = calloc(n, sizeof(*out->items));
	for (const char *start = value; out->items; start++) {
		size_t len = strcspn(start, ",");
		if (!len) {
			globs_clear(out);
			return "empty glob";
		}
		out->items[out->count++] = strndup(start, len);
		start += len;
		if (!*start)
			return NULL;
	}
	return "out of memory";
}

/* A count from LO to HI; *WHY describes the range when VALUE is not one. */
static const char *parse_count(const char *value, unsigned lo, unsigned hi, unsigned *out,
			       char *why)
{
	char *end;
	errno = 0;
	long v = value && *value != '+' && *value != '-' ? strtol(value, &end, 10) : -1;
	if (!value || !*value || v < 0 || *end || errno || v < (long)lo || v > (long)hi) {
		snprintf(why, WHY_SIZE, "expected an integer from %u to %u", lo, hi);
		return why;
	}
	*out = (unsigned)v;
	return NULL;
}

/* VALUE as the index of one of NAMES (NULL-terminated). */
static const char *parse_choice(const char *value, const char *const *names, unsigned *out,
				char *why)
{
	int len = snprintf(why, WHY_SIZE, "expected ");
	for (unsigned i = 0; names[i]; i++) {
		if (value && !strcmp(value, names[i])) {
			*out = i;
			return NULL;
		}
		len += snprintf(why + len, WHY_SIZE - len, "%s%s", i ? "|" : "", names[i]);
	}
	return why;
}

static const char *const abi_names[] = {"user", "kernel", NULL};
static const char *const record_names[] = {"ftpad", "mcount", "patchable", NULL};

/* Each key's parser: NULL when VALUE is good, else why not (in WHY or a
 * constant string). */
typedef const char *(*value_parser)(struct ftpad_options *o, const char *value, char *why);

static const char *parse_abi(struct ftpad_options *o, const char *value, char *why)
{
	(void)o, (void)value, (void)why;
	return NULL; /* parsed first, by parse_abi_first() */
}

static const char *parse_record(struct ftpad_options *o, const char *value, char *why)
{
	unsigned n;
	const char *bad = parse_choice(value, record_names, &n, why);
	if (!bad)
		o->record = (enum ftpad_record_kind)n;
	return bad;
}

static const char *parse_before(struct ftpad_options *o, const char *value, char *why)
{
	return parse_count(value, 0, 255, &o->layout.before, why);
}

/* Where a pad may be the compiler's own, any count from 0 parses here;
 * whether this compile allows it is known once ops= and record= are:
 * check_after(). */
static const char *parse_after(struct ftpad_options *o, const char *value, char *why)
{
	const struct ftpad_abi_layout *info = ftpad_options_abi(o);
	return parse_count(value, info->compiler_pads ? 0 : info->min_after, 255,
			   &o->layout.after, why);
}

static const char *parse_ops(struct ftpad_options *o, const char *value, char *why)
{
	unsigned n;
	if (parse_count(value, 0, 1, &n, why))
		return why;
	if (n && !ftpad_options_abi(o)->ops_allowed) {
		snprintf(why, WHY_SIZE, "the %s kernel layout has no ops slot", o->arch->name);
		return why;
	}
	o->ops = n;
	return NULL;
}

static const char *parse_exit(struct ftpad_options *o, const char *value, char *why)
{
	unsigned n;
	if (parse_count(value, 0, 1, &n, why))
		return why;
	o->exits = n;
	return NULL;
}

static const char *parse_unsafe_ipa_ra(struct ftpad_options *o, const char *value, char *why)
{
	unsigned n;
	if (parse_count(value, 0, 1, &n, why))
		return why;
	o->unsafe_ipa_ra = n;
	return NULL;
}

static const char *parse_include(struct ftpad_options *o, const char *value, char *why)
{
	(void)why;
	return parse_globs(value, &o->include);
}

static const char *parse_exclude(struct ftpad_options *o, const char *value, char *why)
{
	(void)why;
	return parse_globs(value, &o->exclude);
}

static const char *parse_exclude_section(struct ftpad_options *o, const char *value, char *why)
{
	(void)why;
	return parse_globs(value, &o->exclude_section);
}

static const char *parse_min_insns(struct ftpad_options *o, const char *value, char *why)
{
	return parse_count(value, 0, 65535, &o->min_insns, why);
}

/* The report is opened once, in append mode, because several translation
 * units (make -j) may share one file. */
static const char *parse_report(struct ftpad_options *o, const char *value, char *why)
{
	(void)why;
	if (!value || !*value)
		return "expected =FILE";
	if (o->report_fd >= 0)
		close(o->report_fd);
	o->report_fd = open(value, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
	return o->report_fd < 0 ? strerror(errno) : NULL;
}

static const char *parse_policy(struct ftpad_options *o, const char *value, char *why)
{
	(void)o, (void)why;
	/* Read once every other argument is known: read_policy_file(). */
	return !value || !*value ? "expected =FILE" : NULL;
}

static const struct {
	const char *key;
	value_parser parse;
} keys[] = {
	{"abi", parse_abi},
	{"record", parse_record},
	{"before", parse_before},
	{"after", parse_after},
	{"ops", parse_ops},
	{"exit", parse_exit},
	{"include", parse_include},
	{"exclude", parse_exclude},
	{"exclude-section", parse_exclude_section},
	{"min-insns", parse_min_insns},
	{"policy", parse_policy},
	{"report", parse_report},
	{"unsafe-ipa-ra", parse_unsafe_ipa_ra},
};

static value_parser find_key(const char *key)
{
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(keys[i].key, key))
			return keys[i].parse;
	return NULL;
}

/* `KEY=N` of a rule: false when WORD is not about KEY; WHY is set when it
 * is, but N is out of range. */
static bool parse_rule_count(const char *word, const char *key, unsigned lo, int *out,
			     char *why, size_t why_size)
{
	size_t len = strlen(key);
	if (strncmp(word, key, len) || word[len] != '=')
		return false;
	const char *value = word + len + 1;
	char *end;
	errno = 0;
	long v = strtol(value, &end, 10);
	if (!*value || *end || errno || v < (long)lo || v > 255)
		snprintf(why, why_size, "'%s': expected %s=N with N from %u to 255", word, key, lo);
	*out = (int)v;
	return true;
}

bool ftpad_policy_parse_line(char *line, unsigned min_after, struct ftpad_rule *rule,
			     bool *is_rule, char *why, size_t why_size)
{
	static const char space[] = " \t\r\n\v\f";
	char *save, *hash = strchr(line, '#');
	if (hash)
		*hash = 0;
	*why = 0;
	*rule = (struct ftpad_rule){.before = -1, .after = -1};
	char *word = strtok_r(line, space, &save);
	*is_rule = word != NULL;
	if (!word)
		return true;
	if (strcmp(word, "pad") && strcmp(word, "exclude")) {
		snprintf(why, why_size, "unknown rule '%s': expected 'pad' or 'exclude'", word);
		return false;
	}
	rule->pad = !strcmp(word, "pad");
	rule->glob = strtok_r(NULL, space, &save);
	if (!rule->glob) {
		snprintf(why, why_size, "'%s' needs a glob", word);
		return false;
	}
	while ((word = strtok_r(NULL, space, &save))) {
		if (!rule->pad) {
			snprintf(why, why_size, "'exclude' takes only a glob, not '%s'", word);
			return false;
		}
		if (!parse_rule_count(word, "before", 0, &rule->before, why, why_size) &&
		    !parse_rule_count(word, "after", min_after, &rule->after, why, why_size))
			snprintf(why, why_size, "unknown setting '%s': expected before=N or after=N",
				 word);
		if (*why)
			return false;
	}
	return true;
}

/* Each rule's after=N that the compiler cannot give in this compile. */
static const char *rule_problem(const struct ftpad_options *o, const struct ftpad_rule *rule,
				const struct ftpad_diag *diag, char *why)
{
	if (rule->after < 0 || !diag->after_problem)
		return NULL;
	const char *problem = diag->after_problem(diag->ctx, o, (unsigned)rule->after);
	if (!problem)
		return NULL;
	snprintf(why, WHY_SIZE, "'after=%d': %s", rule->after, problem);
	return why;
}

static bool add_rule(struct ftpad_options *o, const struct ftpad_rule *rule, const char *where)
{
	struct ftpad_rule *rules = realloc(o->rules, (o->rule_count + 1) * sizeof(*rules));
	if (!rules)
		return false;
	o->rules = rules;
	rules[o->rule_count] = *rule;
	rules[o->rule_count].glob = strdup(rule->glob);
	rules[o->rule_count].where = strdup(where);
	o->rule_count++;
	return true;
}

/* policy=FILE: one rule per line, '#' starts a comment; the first rule
 * whose glob matches a function's name decides for it.  Each bad line is
 * reported as FILE:LINE: why. */
static bool read_policy_file(struct ftpad_options *o, const char *path,
			     const struct ftpad_diag *diag)
{
	char why[WHY_SIZE], where[WHY_SIZE];
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(why, sizeof(why), "%s: cannot read the policy file: %s", path,
			 strerror(errno));
		diag->error(diag->ctx, why);
		return false;
	}
	bool ok = true, is_rule;
	char *line = NULL; /* getline: a line of any length is one line */
	size_t size = 0;
	for (unsigned lineno = 1; getline(&line, &size, f) >= 0; lineno++) {
		struct ftpad_rule rule;
		snprintf(where, sizeof(where), "%s:%u", path, lineno);
		if (ftpad_policy_parse_line(line, ftpad_lowest_after(o), &rule, &is_rule,
					    why, sizeof(why)) &&
		    (!is_rule || !rule_problem(o, &rule, diag, why))) {
			if (is_rule && !add_rule(o, &rule, where))
				snprintf(why, sizeof(why), "out of memory");
			else
				continue;
		}
		char message[2 * WHY_SIZE + 2];
		snprintf(message, sizeof(message), "%s: %s", where, why);
		diag->error(diag->ctx, message);
		ok = false;
	}
	free(line);
	fclose(f);
	return ok;
}

/* The ABI first: it decides the other arguments' defaults and limits. */
static bool parse_abi_first(struct ftpad_options *o, const struct ftpad_arg *args, size_t count,
			    const struct ftpad_diag *diag)
{
	bool ok = true;
	char why[WHY_SIZE];
	for (size_t i = 0; i < count; i++) {
		unsigned abi;
		if (strcmp(args[i].key, "abi"))
			continue;
		if (parse_choice(args[i].value, abi_names, &abi, why)) {
			diag->bad_argument(diag->ctx, args[i].flag, why);
			ok = false;
		} else {
			o->abi = (enum ftpad_abi)abi;
		}
	}
	abi_defaults(o);
	return ok;
}

/* Exit sites exist only where libftpad reads them: ftpad's own records of
 * the user ABI.  Checked once every argument is known, so order is free. */
static bool check_exit(const struct ftpad_options *o, const struct ftpad_arg *args, size_t count,
		       const struct ftpad_diag *diag)
{
	const char *why = NULL;
	if (!o->exits)
		return true;
	if (o->abi == FTPAD_ABI_KERNEL)
		why = "the kernel ABI has no exit sites";
	else if (o->record != FTPAD_RECORD_FTPAD)
		why = "exit sites are recorded only with record=ftpad";
	if (!why)
		return true;
	for (size_t i = count; i-- > 0;)
		if (!strcmp(args[i].key, "exit")) {
			diag->bad_argument(diag->ctx, args[i].flag, why);
			break;
		}
	return false;
}

unsigned ftpad_lowest_after(const struct ftpad_options *o)
{
	const struct ftpad_abi_layout *info = ftpad_options_abi(o);
	if (info->compiler_pads && !o->ops && o->record != FTPAD_RECORD_MCOUNT)
		return 0;
	return info->min_after;
}

bool ftpad_below_site(const struct ftpad_options *o, struct ftpad_layout layout)
{
	return layout.after < ftpad_options_abi(o)->min_after;
}

/* after=N below the site where this compile needs one: with the ops slot
 * (the slot serves a site), or in __mcount_loc (it records call sites). */
static bool check_after(const struct ftpad_options *o, const struct ftpad_arg *args,
			size_t count, const struct ftpad_diag *diag)
{
	unsigned site = ftpad_options_abi(o)->min_after;
	char why[WHY_SIZE];
	if (o->layout.after >= ftpad_lowest_after(o))
		return true;
	snprintf(why, sizeof(why),
		 "a pad of fewer than %u units has no site, and %s needs one (%s)", site,
		 o->ops ? "the ops slot" : "record=mcount",
		 o->ops ? "ops=0 allows it" : "record=patchable or record=ftpad allows it");
	for (size_t i = count; i-- > 0;)
		if (!strcmp(args[i].key, "after")) {
			diag->bad_argument(diag->ctx, args[i].flag, why);
			break;
		}
	return false;
}

bool ftpad_parse_arguments(struct ftpad_options *o, const struct ftpad_arg *args, size_t count,
			   const struct ftpad_diag *diag)
{
	bool ok = parse_abi_first(o, args, count, diag);
	char why[WHY_SIZE];
	for (size_t i = 0; i < count; i++) {
		value_parser parse = find_key(args[i].key);
		if (!parse) {
			char flag[WHY_SIZE];
			snprintf(flag, sizeof(flag), "%.*s", (int)strcspn(args[i].flag, "="),
				 args[i].flag);
			diag->unknown_argument(diag->ctx, flag);
			ok = false;
			continue;
		}
		const char *bad = parse(o, args[i].value, why);
		if (bad) {
			diag->bad_argument(diag->ctx, args[i].flag, bad);
			ok = false;
		}
	}
	ok &= check_exit(o, args, count, diag);
	ok &= check_after(o, args, count, diag);
	for (size_t i = 0; i < count; i++)
		if (!strcmp(args[i].key, "policy") && args[i].value && *args[i].value)
			ok &= read_policy_file(o, args[i].value, diag);
	return ok;
}
