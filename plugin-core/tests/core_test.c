/* SPDX-License-Identifier: MIT */
/*
 * core_test.c - unit tests of the plugin core's pure functions: the glob
 * lists, the arguments, the policy grammar, the decision chain and the
 * report line.  Prints one line per failed check and exits 1 if any failed;
 * tests/plugins/test_plugin_core.py runs it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

static int failures;

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			printf("%s:%d: %s: check failed: %s\n", __FILE__, __LINE__,   \
			       __func__, #cond);                                      \
			failures++;                                                   \
		}                                                                     \
	} while (0)

#define CHECK_STR(got, want)                                                          \
	do {                                                                          \
		const char *got_ = (got), *want_ = (want);                            \
		if (!got_ || strcmp(got_, want_)) {                                   \
			printf("%s:%d: %s: %s is \"%s\", expected \"%s\"\n", __FILE__, \
			       __LINE__, __func__, #got, got_ ? got_ : "(null)", want_); \
			failures++;                                                   \
		}                                                                     \
	} while (0)

/* The messages of the last ftpad_parse_arguments(), one per line. */
static char messages[8192];

static void note(const char *format, const char *a, const char *b)
{
	size_t len = strlen(messages);
	snprintf(messages + len, sizeof(messages) - len, format, a, b);
}

static void bad_argument(void *ctx, const char *flag, const char *why)
{
	(void)ctx;
	note("bad argument %s: %s\n", flag, why);
}

static void unknown_argument(void *ctx, const char *flag)
{
	(void)ctx;
	note("unknown argument %s%s\n", flag, "");
}

static void error(void *ctx, const char *message)
{
	(void)ctx;
	note("%s%s\n", message, "");
}

static const struct ftpad_diag diag = {NULL, bad_argument, unknown_argument, error, NULL};

/* Parse ARGS ("key=value" or "key", NULL-terminated) for ARCH. */
static bool parse(struct ftpad_options *o, const struct ftpad_arch_layout *arch,
		  const char *const *words)
{
	static char keys[16][64];
	struct ftpad_arg args[16];
	size_t n = 0;
	messages[0] = 0;
	ftpad_options_init(o, arch);
	for (; words[n]; n++) {
		const char *eq = strchr(words[n], '=');
		snprintf(keys[n], sizeof(keys[n]), "%.*s", (int)(eq ? eq - words[n] : 63), words[n]);
		args[n] = (struct ftpad_arg){keys[n], eq ? eq + 1 : NULL, words[n]};
	}
	return ftpad_parse_arguments(o, args, n, &diag);
}

#define PARSE(o, arch, ...) parse(o, arch, (const char *const[]){__VA_ARGS__, NULL})

static void test_layout_table(void)
{
	CHECK(ftpad_arch_layout_named("x86_64") == &ftpad_layout_x86_64);
	CHECK(ftpad_arch_layout_named("aarch64") == &ftpad_layout_aarch64);
	CHECK(ftpad_arch_layout_named("riscv64") == NULL);
	CHECK(ftpad_arch_abi(&ftpad_layout_x86_64, FTPAD_ABI_KERNEL)->default_record ==
	      FTPAD_RECORD_MCOUNT);
	CHECK(!ftpad_layout_x86_64.kernel.ops_allowed);
	CHECK(ftpad_layout_aarch64.user.min_after == 2 && ftpad_layout_x86_64.user.min_after == 5);
	CHECK(ftpad_layout_aarch64.kernel.default_record == FTPAD_RECORD_PATCHABLE);
}

static void test_globs(void)
{
	struct ftpad_options o;
	CHECK(PARSE(&o, &ftpad_layout_x86_64, "exclude=foo*,bar"));
	CHECK(o.exclude.count == 2);
	CHECK_STR(ftpad_globs_match(&o.exclude, "foobar"), "foo*");
	CHECK_STR(ftpad_globs_match(&o.exclude, "bar"), "bar");
	CHECK(ftpad_globs_match(&o.exclude, "barn") == NULL);
	CHECK(PARSE(&o, &ftpad_layout_x86_64, "include="));
	CHECK(o.include.count == 0);
	CHECK(!PARSE(&o, &ftpad_layout_x86_64, "include=a,,b"));
	CHECK_STR(messages, "bad argument include=a,,b: empty glob\n");
	CHECK(!PARSE(&o, &ftpad_layout_x86_64, "exclude-section=.init.text,"));
	CHECK_STR(messages, "bad argument exclude-section=.init.text,: empty glob\n");
	CHECK(!PARSE(&o, &ftpad_layout_x86_64, "exclude"));
	CHECK_STR(messages, "bad argument exclude: expected =GLOB,...\n");
}

static void test_arguments(void)
{
	struct ftpad_options o;
	CHECK(PARSE(&o, &ftpad_layout_x86_64, "before=3", "after=7", "ops=0", "min-insns=10"));
	CHECK(o.layout.before == 3 && o.layout.after == 7 && !o.ops && o.min_insns == 10);
	CHECK(o.record == FTPAD_RECORD_FTPAD && o.abi == FTPAD_ABI_USER);
	/* The ABI is parsed first, wherever it is: its defaults and limits. */
	CHECK(PARSE(&o, &ftpad_layout_x86_64, "before=2", "abi=kernel"));
	CHECK(o.abi == FTPAD_ABI_KERNEL && o.record == FTPAD_RECORD_MCOUNT && !o.ops);
	CHECK(o.layout.before == 2 && o.layout.after == 5);
	CHECK(!PARSE(&o, &ftpad_layout_x86_64, "ops=1", "abi=kernel"));
	CHECK_STR(messages, "bad argument ops=1: the x86_64 kernel layout has no ops slot\n");
	CHECK(PARSE(&o, &ftpad_layout_aarch64, "abi=kernel", "ops=1"));
	CHECK(!PARSE(&o, &ftpad_layout_aarch64, "after=1"));
	CHECK_STR(messages, "bad argument after=1: expected an integer from 2 to 255\n");
	CHECK(!PARSE(&o, &ftpad_layout_x86_64, "after=4", "before=-1", "before=+1", "ops=yes"));
	CHECK_STR(messages, "bad argument after=4: expected an integer from 5 to 255\n"
			    "bad argument before=-1: expected an integer from 0 to 255\n"
			    "bad argument before=+1: expected an integer from 0 to 255\n"
			    "bad argument ops=yes: expected an integer from 0 to 1\n");
	CHECK(!PARSE(&o, &ftpad_layout_x86_64, "before", "min-insns=65536", "unsafe-ipa-ra=2"));
	CHECK_STR(messages, "bad argument before: expected an integer from 0 to 255\n"
			    "bad argument min-insns=65536: expected an integer from 0 to 65535\n"
			    "bad argument unsafe-ipa-ra=2: expected an integer from 0 to 1\n");
	CHECK(!PARSE(&o, &ftpad_layout_x86_64, "abi=linux", "record=elf", "record"));
	CHECK_STR(messages, "bad argument abi=linux: expected user|kernel\n"
			    "bad argument record=elf: expected ftpad|mcount|patchable\n"
			    "bad argument record: expected ftpad|mcount|patchable\n");
	CHECK(!PARSE(&o, &ftpad_layout_x86_64, "excludes=a", "report=", "policy"));
	CHECK_STR(messages, "unknown argument excludes\n"
			    "bad argument report=: expected =FILE\n"
			    "bad argument policy: expected =FILE\n");
	CHECK(PARSE(&o, &ftpad_layout_x86_64, "record=patchable", "unsafe-ipa-ra=1"));
	CHECK(o.record == FTPAD_RECORD_PATCHABLE && o.unsafe_ipa_ra);
}

/* One policy line: the rule, or the reason it is wrong. */
static const char *rule_of(const char *text, unsigned min_after, struct ftpad_rule *rule)
{
	static char line[256], why[256];
	bool is_rule;
	snprintf(line, sizeof(line), "%s", text);
	if (!ftpad_policy_parse_line(line, min_after, rule, &is_rule, why, sizeof(why)))
		return why;
	return is_rule ? "rule" : "blank";
}

/* The kernel ABI without an ops slot takes -fpatchable-function-entry's
 * counts: after below the site, where nothing needs the site. */
static void test_below_site(void)
{
	struct ftpad_options o;
	CHECK(PARSE(&o, &ftpad_layout_aarch64, "after=0", "ops=0", "abi=kernel"));
	CHECK(o.layout.after == 0 && ftpad_lowest_after(&o) == 0);
	CHECK(ftpad_below_site(&o, (struct ftpad_layout){3, 1}));
	CHECK(!ftpad_below_site(&o, (struct ftpad_layout){0, 2}));
	CHECK(PARSE(&o, &ftpad_layout_x86_64, "abi=kernel", "record=patchable", "after=4"));
	CHECK(ftpad_below_site(&o, o.layout) && ftpad_lowest_after(&o) == 0);
	CHECK(PARSE(&o, &ftpad_layout_x86_64, "abi=kernel", "record=ftpad", "after=0"));
	/* The ops slot serves a site; __mcount_loc lists sites. */
	CHECK(!PARSE(&o, &ftpad_layout_aarch64, "abi=kernel", "after=1"));
	CHECK_STR(messages, "bad argument after=1: a pad of fewer than 2 units has no site, and "
			    "the ops slot needs one (ops=0 allows it)\n");
	CHECK(ftpad_lowest_after(&o) == 2);
	CHECK(!PARSE(&o, &ftpad_layout_x86_64, "after=4", "abi=kernel"));
	CHECK_STR(messages, "bad argument after=4: a pad of fewer than 5 units has no site, and "
			    "record=mcount needs one (record=patchable or record=ftpad allows it)\n");
	/* The user ABI keeps its site. */
	CHECK(!PARSE(&o, &ftpad_layout_aarch64, "ops=0", "after=1"));
	CHECK_STR(messages, "bad argument after=1: expected an integer from 2 to 255\n");
	CHECK(PARSE(&o, &ftpad_layout_aarch64, "ops=0"));
	CHECK(ftpad_lowest_after(&o) == 2);
}

static void test_policy_grammar(void)
{
	struct ftpad_rule r;
	CHECK_STR(rule_of("pad foo* before=3 after=7\n", 5, &r), "rule");
	CHECK(r.pad && !strcmp(r.glob, "foo*") && r.before == 3 && r.after == 7);
	CHECK_STR(rule_of("\texclude  bar # why not\r\n", 5, &r), "rule");
	CHECK(!r.pad && !strcmp(r.glob, "bar") && r.before == -1 && r.after == -1);
	CHECK_STR(rule_of("pad *\n", 5, &r), "rule");
	CHECK(r.pad && r.before == -1 && r.after == -1);
	CHECK_STR(rule_of("   # only a comment\n", 5, &r), "blank");
	CHECK_STR(rule_of("\n", 5, &r), "blank");
	CHECK_STR(rule_of("pad\n", 5, &r), "'pad' needs a glob");
	CHECK_STR(rule_of("foo bar\n", 5, &r), "unknown rule 'foo': expected 'pad' or 'exclude'");
	CHECK_STR(rule_of("exclude a before=1", 5, &r), "'exclude' takes only a glob, not 'before=1'");
	CHECK_STR(rule_of("pad a before=-1", 5, &r), "'before=-1': expected before=N with N from 0 to 255");
	CHECK_STR(rule_of("pad a before=256", 5, &r), "'before=256': expected before=N with N from 0 to 255");
	CHECK_STR(rule_of("pad a before=", 5, &r), "'before=': expected before=N with N from 0 to 255");
	CHECK_STR(rule_of("pad a after=4", 5, &r), "'after=4': expected after=N with N from 5 to 255");
	CHECK_STR(rule_of("pad a after=1", 2, &r), "'after=1': expected after=N with N from 2 to 255");
	CHECK_STR(rule_of("pad a after=2", 2, &r), "rule");
	CHECK_STR(rule_of("pad a size=3", 5, &r), "unknown setting 'size=3': expected before=N or after=N");
	CHECK_STR(rule_of("pad a beforex=3", 5, &r), "unknown setting 'beforex=3': expected before=N or after=N");
}

static void test_policy_file(void)
{
	struct ftpad_options o;
	char path[] = "/tmp/ftpad-core-test-XXXXXX";
	FILE *f = fdopen(mkstemp(path), "w");
	fputs("# rules\npad hot* before=4\n\nexclude cold*\npad *\n", f);
	fclose(f);
	char arg[64];
	snprintf(arg, sizeof(arg), "policy=%s", path);
	CHECK(PARSE(&o, &ftpad_layout_x86_64, arg));
	CHECK(o.rule_count == 3);
	char where[64];
	snprintf(where, sizeof(where), "%s:4", path);
	CHECK(o.rule_count == 3 && !o.rules[1].pad && !strcmp(o.rules[1].where, where));
	f = fopen(path, "w");
	fputs("pad\npad ok\nfoo x\n", f);
	fclose(f);
	CHECK(!PARSE(&o, &ftpad_layout_x86_64, arg));
	char want[256];
	snprintf(want, sizeof(want), "%s:1: 'pad' needs a glob\n"
		 "%s:3: unknown rule 'foo': expected 'pad' or 'exclude'\n", path, path);
	CHECK_STR(messages, want);
	remove(path);
	CHECK(!PARSE(&o, &ftpad_layout_x86_64, arg));
	snprintf(want, sizeof(want), "%s: cannot read the policy file: No such file or directory\n",
		 path);
	CHECK_STR(messages, want);
}

static bool measure(void *ctx, struct ftpad_size *size)
{
	const struct ftpad_size *given = ctx;
	if (!given)
		return false;
	*size = *given;
	return true;
}

/* Decide for a function NAME in SECTION of SIZE (NULL: no body). */
static const char *decide(const struct ftpad_options *o, struct ftpad_function fn,
			  struct ftpad_decision *d)
{
	fn.measure = measure;
	if (!fn.section)
		fn.section = ".text";
	ftpad_decide(o, &fn, d);
	return d->reason;
}

static void test_decision_chain(void)
{
	struct ftpad_options o;
	struct ftpad_decision d;
	struct ftpad_size small = {3, false}, small_loop = {3, true}, big = {40, false};
	char path[] = "/tmp/ftpad-core-test-XXXXXX";
	FILE *f = fdopen(mkstemp(path), "w");
	fputs("exclude no_*\npad wide* before=9 after=12\npad keep*\n", f);
	fclose(f);
	char arg[64];
	snprintf(arg, sizeof(arg), "policy=%s", path);
	CHECK(PARSE(&o, &ftpad_layout_x86_64, "before=1", "exclude=skip*,*_x",
		    "exclude-section=.init*", arg, "min-insns=10"));
	remove(path);

	/* 1: what the code says, in this order, over everything else. */
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "keep", .no_instrument_function = true,
		  .naked = true, .has_attribute = true}, &d), "no_instrument_function");
	CHECK(!d.pad && d.layout.before == 0 && d.layout.after == 0);
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "keep", .naked = true,
		  .user_patchable_entry = true}, &d), "naked");
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "keep", .user_patchable_entry = true,
		  .foreign_prefix_data = true}, &d), "user patchable_function_entry");
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "keep", .foreign_prefix_data = true},
		  &d), "prefix data");
	/* 2: exclude, include, exclude-section, over the attribute. */
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "skip_me", .has_attribute = true}, &d),
		  "excluded by 'skip*'");
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "a_x", .section = ".init.text"}, &d),
		  "excluded by '*_x'");
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "f", .section = ".init.text",
		  .has_attribute = true}, &d), "section '.init.text' excluded");
	/* 3: the attribute, whatever the size and the rules. */
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "no_rule", .has_attribute = true,
		  .attribute = {7, 9}, .measure_ctx = &small}, &d), "ftpad attribute");
	CHECK(d.pad && d.layout.before == 7 && d.layout.after == 9);
	/* 4: the first matching rule. */
	decide(&o, (struct ftpad_function){.name = "no_way", .measure_ctx = &big}, &d);
	CHECK(!d.pad && strstr(d.reason, "excluded by /tmp/ftpad-core-test-") &&
	      strstr(d.reason, ":1"));
	decide(&o, (struct ftpad_function){.name = "wide", .measure_ctx = &big}, &d);
	CHECK(d.pad && d.layout.before == 9 && d.layout.after == 12 && strstr(d.reason, "pad by "));
	CHECK(strstr(d.reason, ":2"));
	decide(&o, (struct ftpad_function){.name = "keeper", .measure_ctx = &big}, &d);
	CHECK(d.pad && d.layout.before == 1 && d.layout.after == 5 && strstr(d.reason, ":3"));
	/* 5: min-insns, after the rules, unless there is a loop. */
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "keeper", .measure_ctx = &small}, &d),
		  "3 insns < min-insns 10, no loop");
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "tiny", .measure_ctx = &small_loop},
		  &d), "default");
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "thunk"}, &d),
		  "asm thunk < min-insns 10");
	/* 6: the default. */
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "f", .measure_ctx = &big}, &d),
		  "default");
	CHECK(d.pad && d.layout.before == 1 && d.layout.after == 5);

	/* include= leaves out everything else; no min-insns: never measured. */
	CHECK(PARSE(&o, &ftpad_layout_x86_64, "include=in*"));
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "out"}, &d), "not included");
	CHECK_STR(decide(&o, (struct ftpad_function){.name = "inner"}, &d), "default");
	CHECK(d.measured == -1);
}

static void test_report_line(void)
{
	struct ftpad_options o;
	struct ftpad_decision d;
	struct ftpad_size size = {12, true};
	CHECK(PARSE(&o, &ftpad_layout_x86_64, "exclude=q*"));
	struct ftpad_function fn = {.name = "q\"\\\x01", .section = ".text", .source = "a/b.c",
				    .measure = measure, .measure_ctx = &size};
	ftpad_decide(&o, &fn, &d);
	char *line = ftpad_report_line(&fn, &d);
	CHECK_STR(line, "{\"function\": \"q\\\"\\\\\\u0001\", \"source\": \"a/b.c\", "
			"\"section\": \".text\", \"decision\": \"skip\", "
			"\"reason\": \"excluded by 'q*'\", \"before\": 0, \"after\": 0, "
			"\"insns\": 12, \"loop\": true}\n");
	free(line);
	/* Nothing to measure (an asm thunk): no insns, no loop. */
	fn = (struct ftpad_function){.name = "t", .section = ".text", .source = "t.cc",
				     .measure = measure};
	ftpad_decide(&o, &fn, &d);
	line = ftpad_report_line(&fn, &d);
	CHECK_STR(line, "{\"function\": \"t\", \"source\": \"t.cc\", \"section\": \".text\", "
			"\"decision\": \"pad\", \"reason\": \"default\", \"before\": 0, "
			"\"after\": 5}\n");
	free(line);
}

int main(void)
{
	test_layout_table();
	test_globs();
	test_arguments();
	test_below_site();
	test_policy_grammar();
	test_policy_file();
	test_decision_chain();
	test_report_line();
	if (failures)
		printf("%d check(s) failed\n", failures);
	else
		printf("all checks passed\n");
	return failures != 0;
}
