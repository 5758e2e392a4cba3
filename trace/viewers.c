/* SPDX-License-Identifier: MIT */
/* viewers.c - what the viewers share (viewers.h). */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "viewers.h"

int trace_usage_error(const char *fmt, const char *arg)
{
	fputs("ftpad: error: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry 'ftpad --help'.\n", stderr);
	return EXIT_TRACE_USAGE;
}

const char *trace_dir_arg(const char *cmd, int argc, char **argv, int *rc)
{
	char what[64];

	if (optind == argc)
		return TRACE_DEFAULT_DIR;
	if (optind == argc - 1)
		return argv[optind];
	snprintf(what, sizeof(what), "%s: want one trace directory (default %%s)", cmd);
	*rc = trace_usage_error(what, TRACE_DEFAULT_DIR);
	return NULL;
}

bool trace_has_exits(const struct trace *t)
{
	for (size_t i = 0; i < t->nfuncs; i++)
		if (!t->funcs[i].noexit)
			return true;
	return false;
}

void trace_say_no_exits(const struct trace *t, const char *level, const char *cmd)
{
	fprintf(stderr, "ftpad: %s: %s: no exit sites, so no call has a duration for %s: "
		"compile with -fplugin-arg-ftpad-exit=1 (CMake: ftpad_instrument(TARGET EXIT)), "
		"and give 'ftpad attach' --graph; 'ftpad replay' shows the calls\n", level, t->dir,
		cmd);
}

uint32_t trace_signal_sym(struct trace *t, uint32_t signo)
{
	const char *abbrev = signo < 128 ? sigabbrev_np((int)signo) : NULL;
	char name[48];

	if (abbrev)
		snprintf(name, sizeof(name), "[signal SIG%s]", abbrev);
	else
		snprintf(name, sizeof(name), "[signal %u]", signo);
	return trace_sym(t, name);
}
