/* SPDX-License-Identifier: MIT */
/* viewers.c - what the viewers share (viewers.h). */
#define _GNU_SOURCE
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
