/* SPDX-License-Identifier: MIT */
/*
 * recordmcount-ng - the command line of Linux's scripts/recordmcount.
 *
 *   recordmcount-ng [-w] [--dry-run] file.o...
 *
 * It accepts what Linux 6.12's recordmcount accepts, so Kbuild can call it in
 * its place: `-w` and object files, options and files in any order (as GNU
 * getopt permutes them), `--` to end the options.  It adds `--dry-run`,
 * `--help` and `--version`.  For files the exit status is Linux's: 0 when
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


/* One option: its short and/or long spelling, the flag it sets, its help. */
struct option_desc {
	char short_name;	/* 0: none */
	const char *long_name;	/* NULL: none */
	size_t flag;		/* offset of a bool in struct rmc_opts */
	const char *help;
};

static const struct option_desc option_table[] = {
	{ 'w', NULL, offsetof(struct rmc_opts, warn_notrace),
	  "warn about code in sections that are not traced" },
	{ 0, "dry-run", offsetof(struct rmc_opts, dry_run),
	  "report what would change; write nothing" },
	{ 'h', "help", offsetof(struct rmc_opts, help), "show this help and exit" },
	{ 0, "version", offsetof(struct rmc_opts, version), "show the version and exit" },
};

#define N_OPTIONS (sizeof(option_table) / sizeof(option_table[0]))

static void usage(FILE *out)
{
	fprintf(out, "usage: " PROG " [-w] file.o...\n"
		     "Record the mcount/fentry call sites of object files in __mcount_loc,\n"
		     "like Linux's scripts/recordmcount, which it can replace.\n\noptions:\n");
	for (size_t i = 0; i < N_OPTIONS; i++) {
		const struct option_desc *o = &option_table[i];
		char spelling[32];

		if (o->short_name && o->long_name)
			snprintf(spelling, sizeof(spelling), "-%c, --%s", o->short_name, o->long_name);
		else if (o->short_name)
			snprintf(spelling, sizeof(spelling), "-%c", o->short_name);
		else
			snprintf(spelling, sizeof(spelling), "    --%s", o->long_name);
		fprintf(out, "  %-16s %s\n", spelling, o->help);
	}
}

static const struct option_desc *find_short(char c)
{
	for (size_t i = 0; i < N_OPTIONS; i++)
		if (option_table[i].short_name == c)
			return &option_table[i];
	return NULL;
}

static const struct option_desc *find_long(const char *name)
{
	for (size_t i = 0; i < N_OPTIONS; i++)
		if (option_table[i].long_name && strcmp(option_table[i].long_name, name) == 0)
			return &option_table[i];
	return NULL;
}

static void set_flag(struct rmc_opts *opts, const struct option_desc *o)
{
	*(bool *)((char *)opts + o->flag) = true;
}

static int unknown_option(const char *spelling)
{
	fprintf(stderr, PROG ": error: unknown option '%s'\n", spelling);
	usage(stderr);
	return RMC_USAGE;
}

/*
 * Parse argv into @opts and store the file arguments, in order, in @files,
 * which has room for argc entries; *@nfiles is their count.  Returns RMC_OK
 * or RMC_USAGE.
 */
static int parse_args(int argc, char **argv, struct rmc_opts *opts, char **files, int *nfiles)
{
	bool options_done = false;

	*nfiles = 0;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		const struct option_desc *o;

		if (options_done || arg[0] != '-' || arg[1] == '\0') {
			files[(*nfiles)++] = argv[i];	/* "-" is a file, as with getopt */
		} else if (strcmp(arg, "--") == 0) {
			options_done = true;
		} else if (arg[1] == '-') {
			o = find_long(arg + 2);
			if (!o)
				return unknown_option(arg);
			set_flag(opts, o);
		} else {
			for (const char *c = arg + 1; *c; c++) {	/* -w, or grouped: -wh */
				char spelling[3] = { '-', *c, '\0' };

				o = find_short(*c);
				if (!o)
					return unknown_option(spelling);
				set_flag(opts, o);
			}
		}
	}
	return RMC_OK;
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
			if (!is_skipped(files[i]) && rmc_process_file(&opts, files[i]) != RMC_OK)
				status = RMC_FAILED;
	}
out:
	free(files);
	return status;
}
