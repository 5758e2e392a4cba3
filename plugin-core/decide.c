/* SPDX-License-Identifier: MIT */
/*
 * decide.c - which functions get a pad, and how big (docs/gcc-plugin.md
 * "Which functions get a pad"), and the report line of each decision.
 * In order of precedence:
 *  1. no_instrument_function, naked, a user's patchable_function_entry and
 *     someone else's prefix data: no pad.  These say something about the
 *     code itself (notrace, no prologue, the user's own patch area), so
 *     nothing overrides them.
 *  2. exclude= globs on the name, then include= globs, then
 *     exclude-section= globs: no pad.  They are the build's safety switches
 *     (noinstr, init text), so they win over the attribute too.
 *  3. __attribute__((ftpad(before, after))): this layout, whatever its size.
 *  4. policy=FILE: the first rule whose glob matches the name.
 *  5. min-insns=N: a function with fewer instructions and no loop gets no
 *     pad, as XRay's -fxray-instruction-threshold.
 *  6. Otherwise the global before/after.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

static void skip(struct ftpad_decision *d, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

static void skip(struct ftpad_decision *d, const char *format, ...)
{
	va_list ap;
	va_start(ap, format);
	vsnprintf(d->reason, sizeof(d->reason), format, ap);
	va_end(ap);
	d->pad = false;
	d->layout = (struct ftpad_layout){0, 0};
}

static void pad(struct ftpad_decision *d, struct ftpad_layout layout, const char *reason)
{
	snprintf(d->reason, sizeof(d->reason), "%s", reason);
	d->pad = true;
	d->layout = layout;
}

/* Measures FN once, on first need. */
static bool measured(const struct ftpad_function *fn, struct ftpad_decision *d)
{
	if (d->measured < 0)
		d->measured = fn->measure && fn->measure(fn->measure_ctx, &d->size);
	return d->measured;
}

/* The layout, unless min-insns says the function is too small. */
static void pad_unless_too_small(const struct ftpad_options *o, const struct ftpad_function *fn,
				 struct ftpad_decision *d, struct ftpad_layout layout,
				 const char *reason)
{
	if (!o->min_insns)
		return pad(d, layout, reason);
	if (!measured(fn, d)) /* an asm thunk: a few insns, no loop */
		return skip(d, "asm thunk < min-insns %u", o->min_insns);
	if (d->size.insns < o->min_insns && !d->size.loop)
		return skip(d, "%u insns < min-insns %u, no loop", d->size.insns, o->min_insns);
	pad(d, layout, reason);
}

/* What the code itself says: a reason for no pad, or NULL. */
static const char *code_says_skip(const struct ftpad_function *fn)
{
	if (fn->no_instrument_function)
		return "no_instrument_function";
	if (fn->naked)
		return "naked";
	if (fn->user_patchable_entry)
		return "user patchable_function_entry";
	if (fn->foreign_prefix_data)
		return "prefix data";
	return NULL;
}

/* Steps 4 to 6. */
static void decide_by_policy(const struct ftpad_options *o, const struct ftpad_function *fn,
			     struct ftpad_decision *d)
{
	for (size_t i = 0; i < o->rule_count; i++) {
		const struct ftpad_rule *rule = &o->rules[i];
		if (fnmatch(rule->glob, fn->name, 0))
			continue;
		if (!rule->pad)
			return skip(d, "excluded by %s", rule->where);
		struct ftpad_layout layout = o->layout;
		if (rule->before >= 0)
			layout.before = (unsigned)rule->before;
		if (rule->after >= 0)
			layout.after = (unsigned)rule->after;
		char reason[sizeof(d->reason)];
		snprintf(reason, sizeof(reason), "pad by %s", rule->where);
		return pad_unless_too_small(o, fn, d, layout, reason);
	}
	pad_unless_too_small(o, fn, d, o->layout, "default");
}

void ftpad_decide(const struct ftpad_options *o, const struct ftpad_function *fn,
		  struct ftpad_decision *d)
{
	const char *why, *glob;

	d->measured = -1;
	if ((why = code_says_skip(fn)))
		return skip(d, "%s", why);
	if ((glob = ftpad_globs_match(&o->exclude, fn->name)))
		return skip(d, "excluded by '%s'", glob);
	if (o->include.count && !ftpad_globs_match(&o->include, fn->name))
		return skip(d, "not included");
	if (ftpad_globs_match(&o->exclude_section, fn->section))
		return skip(d, "section '%s' excluded", fn->section);
	if (fn->has_attribute)
		return pad(d, fn->attribute, "ftpad attribute");
	decide_by_policy(o, fn, d);
}

/* A growing string; out of memory leaves it NULL. */
struct buf {
	char *s;
	size_t len, cap;
};

static void append(struct buf *b, const char *s, size_t n)
{
	if (b->s && b->len + n + 1 > b->cap) {
		size_t cap = 2 * (b->len + n + 1);
		char *grown = realloc(b->s, cap);
		if (!grown)
			free(b->s);
		b->s = grown;
		b->cap = cap;
	}
	if (!b->s)
		return;
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = 0;
}

static void append_str(struct buf *b, const char *s)
{
	append(b, s, strlen(s));
}

/* "KEY": "S", with S's quotes, backslashes and control bytes escaped. */
static void append_json_string(struct buf *b, const char *key, const char *s)
{
	append_str(b, "\"");
	append_str(b, key);
	append_str(b, "\": \"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		if (c == '"' || c == '\\')
			snprintf(esc, sizeof(esc), "\\%c", c);
		else if (c < 0x20)
			snprintf(esc, sizeof(esc), "\\u%04x", c);
		else
			snprintf(esc, sizeof(esc), "%c", c);
		append_str(b, esc);
	}
	append_str(b, "\", ");
}

char *ftpad_report_line(const struct ftpad_function *fn, struct ftpad_decision *d)
{
	struct buf b = {malloc(256), 0, 256};
	char numbers[128];

	append_str(&b, "{");
	append_json_string(&b, "function", fn->name);
	append_json_string(&b, "source", fn->source);
	append_json_string(&b, "section", fn->section);
	append_json_string(&b, "decision", d->pad ? "pad" : "skip");
	append_json_string(&b, "reason", d->reason);
	snprintf(numbers, sizeof(numbers), "\"before\": %u, \"after\": %u", d->layout.before,
		 d->layout.after);
	append_str(&b, numbers);
	/* What min-insns looks at, whether or not it is set, so that one
	 * report tells what any threshold would remove; nothing for a
	 * function with no body to measure (GCC's asm thunks). */
	if (measured(fn, d)) {
		snprintf(numbers, sizeof(numbers), ", \"insns\": %u, \"loop\": %s", d->size.insns,
			 d->size.loop ? "true" : "false");
		append_str(&b, numbers);
	}
	append_str(&b, "}\n");
	return b.s;
}

bool ftpad_report(const struct ftpad_options *o, const struct ftpad_function *fn,
		  struct ftpad_decision *d)
{
	if (o->report_fd < 0)
		return true;
	char *line = ftpad_report_line(fn, d);
	if (!line)
		return false;
	/* One write() of a whole line to an O_APPEND file: lines from
	 * parallel compiles do not interleave. */
	size_t len = strlen(line);
	bool ok = write(o->report_fd, line, len) == (ssize_t)len;
	free(line);
	return ok;
}
