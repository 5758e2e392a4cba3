/* SPDX-License-Identifier: MIT */
/*
 * recordmcount-ng - the command line of Linux's scripts/recordmcount.
 *
 *   recordmcount-ng [-w] [--dry-run] file.o...
 *   recordmcount-ng --format=ftpad [--dry-run] file.o...
 *   recordmcount-ng --check | --list file.o...
 *
 * It accepts what Linux 6.12's recordmcount accepts, so Kbuild can call it in
 * its place: `-w` and object files, options and files in any order (as GNU
 * getopt permutes them), `--` to end the options.  It adds `--dry-run`,
 * `--help`, `--version` and the site modes (sites.h): `--format=ftpad`,
 * `--check` and `--list`.  For files the exit status is Linux's: 0 when
 * every file was processed (or had nothing to do, or was already
 * processed), 1 when one failed.  Unlike the original, misuse exits 2
 * rather than 0.
 */
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rmc.h"

#ifndef FTPAD_VERSION
#define FTPAD_VERSION "unknown"
#endif


/* The parser's state: the options so far, and which option chose the mode. */
struct parse {
	struct rmc_opts *opts;
	const char *mode_by;	/* the spelling that set opts->mode, or NULL */
};

/*
 * One option: its short and/or long spelling, the name of its value if it
 * takes one, what it does (0, or RMC_USAGE after saying why), its help.
 */
struct option_desc {
	char short_name;	/* 0: none */
	const char *long_name;	/* NULL: none */
	const char *arg;	/* NULL: a flag; else it takes a value (--name=VALUE or --name VALUE) */
	int (*set)(struct parse *p, const char *spelling, const char *value);
	const char *help;
};

static int usage_error(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, PROG ": error: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	return RMC_USAGE;
}

static int set_warn(struct parse *p, const char *spelling, const char *value)
{
	(void)spelling, (void)value;
	p->opts->warn_notrace = true;
	return RMC_OK;
}

static int set_dry_run(struct parse *p, const char *spelling, const char *value)
{
	(void)spelling, (void)value;
	p->opts->dry_run = true;
	return RMC_OK;
}

static int set_help(struct parse *p, const char *spelling, const char *value)
{
	(void)spelling, (void)value;
	p->opts->help = true;
	return RMC_OK;
}

static int set_version(struct parse *p, const char *spelling, const char *value)
{
	(void)spelling, (void)value;
	p->opts->version = true;
	return RMC_OK;
}

/* --format, --check and --list each choose what happens to the files: one of them. */
static int set_mode(struct parse *p, const char *spelling, enum rmc_mode mode)
{
	if (p->mode_by && p->opts->mode != mode)
		return usage_error("%s and %s cannot be combined", p->mode_by, spelling);
	p->opts->mode = mode;
	p->mode_by = spelling;
	return RMC_OK;
}

static int set_format(struct parse *p, const char *spelling, const char *value)
{
	if (strcmp(value, "mcount") == 0)
		return set_mode(p, spelling, RMC_MODE_MCOUNT);
	if (strcmp(value, "ftpad") == 0)
		return set_mode(p, spelling, RMC_MODE_FTPAD);
	return usage_error("%s: unknown format '%s': mcount or ftpad", spelling, value);
}

static int set_check(struct parse *p, const char *spelling, const char *value)
{
	(void)value;
	return set_mode(p, spelling, RMC_MODE_CHECK);
}

static int set_list(struct parse *p, const char *spelling, const char *value)
{
	(void)value;
	return set_mode(p, spelling, RMC_MODE_LIST);
}

static const struct option_desc option_table[] = {
	{ 'w', NULL, NULL, set_warn, "warn about code in sections that are not traced" },
	{ 0, "format", "FORMAT", set_format,
	  "what to write: mcount (default: __mcount_loc, as Linux's recordmcount)\n"
	  "                         or ftpad (__ftpad_sites records for libftpad)" },
	{ 0, "check", NULL, set_check, "verify the recorded sites; write nothing" },
	{ 0, "list", NULL, set_list, "print the sites, one JSON object a line; write nothing" },
	{ 0, "dry-run", NULL, set_dry_run, "report what would change; write nothing" },
	{ 'h', "help", NULL, set_help, "show this help and exit" },
	{ 0, "version", NULL, set_version, "show the version and exit" },
};

#define N_OPTIONS (sizeof(option_table) / sizeof(option_table[0]))

static void usage(FILE *out)
{
	fprintf(out, "usage: " PROG " [-w] file.o...\n"
		     "       " PROG " --format=ftpad file.o...\n"
		     "       " PROG " --check | --list file.o...\n"
		     "Record the mcount/fentry call sites of object files in __mcount_loc,\n"
		     "like Linux's scripts/recordmcount, which it can replace; or turn the\n"
		     "pads of -fpatchable-function-entry and -pg -mfentry into ftpad records.\n"
		     "\noptions:\n");
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct option_desc *o = &option_table[i];
		char spelling[40];

		if (o->short_name && o->long_name)
			snprintf(spelling, sizeof(spelling), "-%c, --%s", o->short_name, o->long_name);
		else if (o->short_name)
			snprintf(spelling, sizeof(spelling), "-%c", o->short_name);
		else
			snprintf(spelling, sizeof(spelling), "    --%s%s%s", o->long_name,
				 o->arg ? "=" : "", o->arg ? o->arg : "");
		fprintf(out, "  %-22s %s\n", spelling, o->help);
	}
}

static const struct option_desc *find_short(char c)
{
	for (size_t i = 0; i < N_OPTIONS; i++)
		if (option_table[i].short_name == c)
			return &option_table[i];
	return NULL;
}

/* The option @arg ("--name" or "--name=value") spells, or NULL. */
static const struct option_desc *find_long(const char *arg)
{
	size_t len = strcspn(arg, "=");

	for (size_t i = 0; i < N_OPTIONS; i++) {
		const char *name = option_table[i].long_name;

		if (name && strlen(name) == len && strncmp(name, arg, len) == 0 &&
		    (arg[len] == '\0' || option_table[i].arg))
			return &option_table[i];
	}
	return NULL;
}

static int unknown_option(const char *spelling)
{
	fprintf(stderr, PROG ": error: unknown option '%s'\n", spelling);
	usage(stderr);
	return RMC_USAGE;
}

/* A long option at argv[*i]; a value may be the next argument. */
static int parse_long(struct parse *p, int argc, char **argv, int *i)
{
	const char *arg = argv[*i];
	const struct option_desc *o = find_long(arg + 2);
	const char *eq = strchr(arg, '=');

	if (!o)
		return unknown_option(arg);
	if (!o->arg)
		return o->set(p, arg, NULL);
	if (!eq && *i + 1 >= argc)
		return usage_error("%s needs a value (%s)", arg, o->arg);
	if (!eq)
		++*i;
	return o->set(p, arg, eq ? eq + 1 : argv[*i]);
}

/* What the chosen mode allows. */
static int check_dependencies(const struct rmc_opts *opts, const char *mode_by)
{
	if (opts->warn_notrace && opts->mode != RMC_MODE_MCOUNT)
		return usage_error("-w only applies to --format=mcount, not %s%s", mode_by,
				   opts->mode == RMC_MODE_FTPAD && !strchr(mode_by, '=') ? " ftpad" : "");
	if (opts->dry_run && (opts->mode == RMC_MODE_CHECK || opts->mode == RMC_MODE_LIST))
		return usage_error("--dry-run and %s cannot be combined: %s writes nothing anyway",
				   mode_by, mode_by);
	return RMC_OK;
}

/*
 * Parse argv into @opts and store the file arguments, in order, in @files,
 * which has room for argc entries; *@nfiles is their count.  Returns RMC_OK
 * or RMC_USAGE.
 */
static int parse_args(int argc, char **argv, struct rmc_opts *opts, char **files, int *nfiles)
{
	struct parse p = { .opts = opts };
	bool options_done = false;
	int status;

	*nfiles = 0;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		const struct option_desc *o;

		if (options_done || arg[0] != '-' || arg[1] == '\0') {
			files[(*nfiles)++] = argv[i];	/* "-" is a file, as with getopt */
		} else if (strcmp(arg, "--") == 0) {
			options_done = true;
		} else if (arg[1] == '-') {
			status = parse_long(&p, argc, argv, &i);
			if (status != RMC_OK)
				return status;
		} else {
			for (const char *c = arg + 1; *c; c++) {	/* -w, or grouped: -wh */
				char spelling[3] = { '-', *c, '\0' };

				o = find_short(*c);
				if (!o)
					return unknown_option(spelling);
				o->set(&p, spelling, NULL);
			}
		}
	}
	return opts->help || opts->version ? RMC_OK : check_dependencies(opts, p.mode_by);
}

/*
 * Linux skips any file whose name ends in "/ftrace.o": kernel/trace/ftrace.o references
 * mcount without calling it, and is not traced anyway.
 */
static bool is_skipped(const char *file)
{
	static const char ftrace[] = "/ftrace.o";
	size_t len = strlen(file), n = sizeof(ftrace) - 1;

	return len >= n && strcmp(file + len - n, ftrace) == 0;
}

/* One file, in the mode the command line chose. */
static int process_file(const struct rmc_opts *opts, const char *file)
{
	switch (opts->mode) {
	case RMC_MODE_FTPAD:
		return rmc_ftpad_file(opts, file);
	case RMC_MODE_CHECK:
		return rmc_check_file(opts, file);
	case RMC_MODE_LIST:
		return rmc_list_file(opts, file);
	case RMC_MODE_MCOUNT:
		break;
	}
	return is_skipped(file) ? RMC_OK : rmc_process_file(opts, file);	/* Kbuild's skip */
}

int main(int argc, char **argv)
{
	struct rmc_opts opts = { 0 };
	char **files = calloc((size_t)argc, sizeof(*files));
	int nfiles = 0, status;

	if (!files) {
		perror(PROG);
		return RMC_FAILED;
	}
	status = parse_args(argc, argv, &opts, files, &nfiles);
	if (status != RMC_OK)
		goto out;
	if (opts.help) {
		usage(stdout);
	} else if (opts.version) {
		printf(PROG " (ftpad) %s\n", FTPAD_VERSION);
	} else if (nfiles == 0) {
		usage(stderr);
		status = RMC_USAGE;
	} else {
		/* Like Linux, go on after a failure so that every bad file is named. */
		elf_version(EV_CURRENT);
		for (int i = 0; i < nfiles; i++)
			if (process_file(&opts, files[i]) != RMC_OK)
				status = RMC_FAILED;
	}
out:
	free(files);
	return status;
}
