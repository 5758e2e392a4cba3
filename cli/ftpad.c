/* SPDX-License-Identifier: MIT */
/*
 * ftpad - the command-line front end: one table of subcommands, which
 * main() dispatches from and `ftpad --help` lists.  record and attach are
 * cli/'s (commands.h); the viewers, which read a trace directory, are
 * trace/'s (trace_commands.h).  Each subcommand says more with --help.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "trace_commands.h" /* trace/: replay, report, dump, live, flame */
#include "tracedir.h"

#ifndef FTPAD_VERSION
#define FTPAD_VERSION "unknown"
#endif

struct command {
	const char *name;
	int (*run)(int argc, char **argv); /* argv[0] is name; returns the exit status */
	const char *help;                  /* one line for `ftpad --help` */
};

static const struct command commands[] = {
	{ "record", cmd_record, "run PROG, recording calls to its padded functions into DIR" },
	{ "attach", cmd_attach, "record the padded functions of a running process, then detach" },
	{ "patch", cmd_patch, "replace functions of a running process with a patch's (live patch)" },
	{ "replay", trace_cmd_replay, "a trace's calls, thread by thread, as a call tree with times" },
	{ "report", trace_cmd_report, "a trace's time per function: calls, total, self, max" },
	{ "dump", trace_cmd_dump, "a trace as Chrome JSON, Perfetto protobuf, folded stacks or pprof" },
	{ "live", trace_cmd_live, "report's table, redrawn while a trace is being written" },
	{ "flame", trace_cmd_flame, "an SVG flame graph of a trace, or of folded stacks" },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

#ifndef FTPAD_HAVE_ATTACH
/* attach needs its architecture's hooks and loader stub (arch/). */
int cmd_attach(int argc, char **argv)
{
	(void)argc, (void)argv;
	fprintf(stderr, "ftpad: error: attach is not ported to this architecture yet\n");
	return 1;
}
#endif

#ifndef FTPAD_HAVE_PATCH
/* patch needs x86_64's site jump and elfutils' libdw (cli/CMakeLists.txt). */
int cmd_patch(int argc, char **argv)
{
	(void)argc, (void)argv;
	fprintf(stderr, "ftpad: error: patch is not available in this build (x86_64 with "
		"libdw only)\n");
	return 1;
}
#endif

static void print_help(void)
{
	fputs("usage: ftpad COMMAND [ARGS...]   ('ftpad COMMAND --help' gives its options)\n"
	      "       ftpad --help | --version\n"
	      "\n"
	      "commands:\n", stdout);
	for (size_t i = 0; i < NCOMMANDS; i++)
		printf("  %-8s %s\n", commands[i].name, commands[i].help);
	fputs("\n"
	      "docs/tracing.md shows them at work.\n"
	      "environment: FTPAD_LIB overrides the path of libftpad.so.\n", stdout);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage_error("missing %s", "command (try 'record')");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		print_help();
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("ftpad %s\n", FTPAD_VERSION);
		return 0;
	}
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	if (argv[1][0] == '-')
		return usage_error("unknown option '%s'", argv[1]);
	return usage_error("unknown command '%s'", argv[1]);
}
