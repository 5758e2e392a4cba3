/* SPDX-License-Identifier: MIT */
/* main.c - the viewers' entry from ftpad.c, and what they share. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "viewers.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{ "replay", trace_cmd_replay },
	{ "report", trace_cmd_report },
	{ "dump", trace_cmd_dump },
	{ "live", trace_cmd_live },
};

int ftpad_trace_is_command(const char *cmd)
{
	size_t i;

	for (i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		if (!strcmp(cmd, commands[i].name))
			return 1;
	return 0;
}

int ftpad_trace_main(const char *cmd, int argc, char **argv)
{
	size_t i;

	for (i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		if (!strcmp(cmd, commands[i].name))
			return commands[i].run(argc, argv);
	return trace_usage_error("unknown command '%s'", cmd);
}

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
