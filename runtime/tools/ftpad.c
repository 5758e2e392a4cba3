/* SPDX-License-Identifier: MIT */
/*
 * ftpad - the command-line front end.
 *
 *   ftpad record [-f|--filter GLOBS] [-o|--output FILE] [--] PROG [ARGS...]
 *
 * runs PROG with libftpad.so preloaded and its built-in tracer switched on
 * through FTPAD_FILTER and FTPAD_OUTPUT, so a program built with pads needs
 * no link against libftpad to be traced.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flame.h"   /* trace/: ftpad flame */
#include "viewers.h" /* trace/: replay, report, dump, live */

#ifndef FTPAD_VERSION
#define FTPAD_VERSION "unknown"
#endif
#ifndef FTPAD_INSTALL_LIBDIR
#define FTPAD_INSTALL_LIBDIR "lib"
#endif
/* Where the build tree keeps libftpad.so, from the tool's directory:
 * build/bin/ftpad, or build/runtime/aarch64/bin/ftpad for the aarch64 one. */
#ifndef FTPAD_BUILD_LIB
#define FTPAD_BUILD_LIB "../runtime/libftpad.so"
#endif

#define EXIT_USAGE 2

struct record_opts {
	const char *filter;
	const char *output;
	char **argv; /* PROG and its arguments */
};

static const char usage_text[] =
	"usage: ftpad record [-f|--filter GLOBS] [-o|--output FILE] [--] PROG [ARGS...]\n"
	"       ftpad replay|report|dump|live ...   (docs/tracing.md; each takes --help)\n"
	"       ftpad flame --folded FILE -o OUT.svg   (see 'ftpad flame --help')\n"
	"       ftpad --help | --version\n"
	"\n"
	"record  run PROG with libftpad.so preloaded, tracing calls to its padded\n"
	"        functions: one line '<comm>-<tid> <function> <-<caller>' per call,\n"
	"        then 'ftpad: N sites found, M sites enabled, K calls seen' at exit.\n"
	"  -f, --filter GLOBS   comma-separated globs on function names (default: *)\n"
	"  -o, --output FILE    write the trace to FILE, truncated first (default: stderr)\n"
	"\n"
	"environment: FTPAD_LIB overrides the path of libftpad.so.\n";

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "ftpad: error: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'ftpad --help'.\n");
	return EXIT_USAGE;
}

/* libftpad.so beside the tool: in the build tree, then as installed (the
 * runtime package of a distribution has only the soname's file). */
static int find_library(char *out, size_t size)
{
	const char *env = getenv("FTPAD_LIB");
	char self[PATH_MAX], *dir;
	ssize_t n;
	static const char *const rel[] = { FTPAD_BUILD_LIB,
					   "../" FTPAD_INSTALL_LIBDIR "/libftpad.so",
					   "../" FTPAD_INSTALL_LIBDIR "/libftpad.so.1" };

	if (env && *env) {
		if (access(env, R_OK)) {
			fprintf(stderr, "ftpad: error: FTPAD_LIB '%s': %s\n", env, strerror(errno));
			return -1;
		}
		snprintf(out, size, "%s", env);
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0) {
		fprintf(stderr, "ftpad: error: /proc/self/exe: %s\n", strerror(errno));
		return -1;
	}
	self[n] = 0;
	dir = dirname(self);
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", dir, rel[i]);
		if (!access(path, R_OK) && realpath(path, out))
			return 0;
	}
	fprintf(stderr, "ftpad: error: cannot find libftpad.so as %s/%s or in %s/../%s; "
		"set FTPAD_LIB\n", dir, FTPAD_BUILD_LIB, dir, FTPAD_INSTALL_LIBDIR);
	return -1;
}

static int parse_record(int argc, char **argv, struct record_opts *o)
{
	static const struct option longopts[] = {
		{ "filter", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	o->filter = "*";
	opterr = 0;
	optind = 1;
	/* '+': options end at PROG, so PROG's own options are left alone. */
	while ((c = getopt_long(argc, argv, "+:f:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			o->filter = optarg;
			if (!*optarg || strspn(optarg, ", \t") == strlen(optarg))
				return usage_error("record: option '%s' needs at least one glob",
						   argv[optind - 2]);
			break;
		case 'o':
			o->output = optarg;
			if (!*optarg)
				return usage_error("record: option '%s' needs a file name",
						   argv[optind - 2]);
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case ':':
			return usage_error("record: option '%s' needs an argument", argv[optind - 1]);
		default:
			return usage_error("record: unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("record: missing %s", "PROG: the program to run");
	o->argv = &argv[optind];
	return 0;
}

/* FILE, truncated now and made absolute: PROG may change directory. */
static int prepare_output(const char *output, char *abs)
{
	int fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || !realpath(output, abs)) {
		fprintf(stderr, "ftpad: error: --output '%s': %s\n", output, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int set_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	char *value;
	int err;

	if (old && *old) {
		if (asprintf(&value, "%s:%s", lib, old) < 0)
			return -1;
	} else {
		value = strdup(lib);
		if (!value)
			return -1;
	}
	err = setenv("LD_PRELOAD", value, 1);
	free(value);
	return err;
}

static int cmd_record(int argc, char **argv)
{
	struct record_opts o = { 0 };
	char lib[PATH_MAX], out[PATH_MAX];
	int err = parse_record(argc, argv, &o);

	if (err)
		return err;
	if (find_library(lib, sizeof(lib)))
		return 1;
	if (o.output && prepare_output(o.output, out))
		return 1;
	if (setenv("FTPAD_FILTER", o.filter, 1) ||
	    (o.output ? setenv("FTPAD_OUTPUT", out, 1) : unsetenv("FTPAD_OUTPUT")) ||
	    set_preload(lib)) {
		fprintf(stderr, "ftpad: error: cannot set the environment: %s\n", strerror(errno));
		return 1;
	}
	execvp(o.argv[0], o.argv);
	fprintf(stderr, "ftpad: error: cannot run '%s': %s\n", o.argv[0], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage_error("missing %s", "command (try 'record')");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("ftpad %s\n", FTPAD_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "record"))
		return cmd_record(argc - 1, argv + 1);
	if (!strcmp(argv[1], "flame"))
		return ftpad_flame_command(argc - 1, argv + 1);
	if (ftpad_trace_is_command(argv[1]))
		return ftpad_trace_main(argv[1], argc - 1, argv + 1);
	if (argv[1][0] == '-')
		return usage_error("unknown option '%s'", argv[1]);
	return usage_error("unknown command '%s'", argv[1]);
}
