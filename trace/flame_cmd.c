/* SPDX-License-Identifier: MIT */
/*
 * `ftpad flame`: the command around ftpad_flame_svg().  The SVG is written
 * to a temporary beside OUT and renamed, so OUT is either the old file or
 * the whole new one.
 */
#define _GNU_SOURCE
#include "flame.h"
#include "out.h"
#include "viewers.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_USAGE 2

static const char flame_usage[] =
	"usage: ftpad flame [--title T] [--width PX] [--min-width PX] --folded FILE -o OUT.svg\n"
	"       ftpad flame [--title T] [--width PX] [--min-width PX] [--raw-names] DIR -o OUT.svg\n"
	"\n"
	"Write a self-contained SVG flame graph (click a frame to zoom, Ctrl-F to\n"
	"search) from folded stacks ('f1;f2;f3 NS' lines, as 'ftpad dump --folded'\n"
	"writes them; FILE '-' is stdin) or from a trace directory.\n"
	"  --folded FILE     read folded stacks from FILE\n"
	"  -o, --output OUT  the SVG to write ('-': stdout)\n"
	"  --title T         the title drawn above the graph (default: Flame graph)\n"
	"  --width PX        the image width (default: 1200)\n"
	"  --min-width PX    leave out frames narrower than PX (default: 0.1)\n"
	"  --raw-names       C++ names as the program has them, not demangled\n";

struct flame_args {
	const char *folded;
	const char *dir;
	const char *output;
	unsigned open_flags; /* the trace reader's: TRACE_OPEN_RAW_NAMES */
	struct ftpad_flame_options opts;
};

static int flame_usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "ftpad: error: flame: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'ftpad flame --help'.\n");
	return EXIT_USAGE;
}

static int parse_number(const char *text, double lo, double hi, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(text, &end);
	return errno || end == text || *end || !(*out >= lo && *out <= hi) ? -1 : 0;
}

static int parse_flame(int argc, char **argv, struct flame_args *a)
{
	enum { OPT_FOLDED = 256, OPT_TITLE, OPT_WIDTH, OPT_MIN_WIDTH, OPT_RAW_NAMES };
	static const struct option longopts[] = {
		{ "folded", required_argument, NULL, OPT_FOLDED },
		{ "output", required_argument, NULL, 'o' },
		{ "title", required_argument, NULL, OPT_TITLE },
		{ "width", required_argument, NULL, OPT_WIDTH },
		{ "min-width", required_argument, NULL, OPT_MIN_WIDTH },
		{ "raw-names", no_argument, NULL, OPT_RAW_NAMES },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	double v;
	int c;

	a->opts.min_frame_px = -1;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_FOLDED: a->folded = optarg; break;
		case 'o': a->output = optarg; break;
		case OPT_TITLE: a->opts.title = optarg; break;
		case OPT_RAW_NAMES: a->open_flags |= TRACE_OPEN_RAW_NAMES; break;
		case OPT_WIDTH:
			if (parse_number(optarg, 120, 100000, &v) || v != (unsigned)v)
				return flame_usage_error("--width '%s': expected whole pixels, 120 to 100000", optarg);
			a->opts.width = (unsigned)v;
			break;
		case OPT_MIN_WIDTH:
			if (parse_number(optarg, 0, 1e6, &v))
				return flame_usage_error("--min-width '%s': expected pixels, 0 or more", optarg);
			a->opts.min_frame_px = v;
			break;
		case 'h':
			fputs(flame_usage, stdout);
			exit(0);
		case ':':
			return flame_usage_error("option '%s' needs an argument", argv[optind - 1]);
		default:
			return flame_usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		a->dir = argv[optind++];
	if (optind < argc)
		return flame_usage_error("unexpected argument '%s'", argv[optind]);
	if (!a->folded == !a->dir)
		return flame_usage_error("%s", "give either --folded FILE or a trace DIR");
	if (!a->output)
		return flame_usage_error("%s", "missing -o OUT.svg");
	a->opts.input_name = a->folded ? a->folded : a->dir;
	return 0;
}

int ftpad_flame_folded_from_trace(const char *dir, unsigned open_flags, FILE *out)
{
	struct trace t;
	struct out *o;
	int rc;

	if (trace_open(&t, dir, open_flags))
		return -1;
	o = out_of_file(out);
	rc = o ? trace_write_folded(&t, o) : -1;
	trace_close(&t);
	return rc;
}

/* The folded stacks as a stream: the file, stdin, or the trace directory's
 * stacks in a temporary file. */
static FILE *open_folded(const struct flame_args *a)
{
	FILE *in;

	if (a->dir) {
		in = tmpfile();
		if (!in) {
			fprintf(stderr, "ftpad: error: flame: cannot make a temporary file: %s\n",
				strerror(errno));
			return NULL;
		}
		if (ftpad_flame_folded_from_trace(a->dir, a->open_flags, in) || fflush(in) || fseek(in, 0, SEEK_SET)) {
			fclose(in);
			return NULL;
		}
		return in;
	}
	if (!strcmp(a->folded, "-"))
		return stdin;
	in = fopen(a->folded, "r");
	if (!in)
		fprintf(stderr, "ftpad: error: flame: cannot open '%s': %s\n", a->folded,
			strerror(errno));
	return in;
}

static mode_t current_umask(void)
{
	mode_t mask = umask(0);

	umask(mask);
	return mask;
}

static int write_svg_file(FILE *in, const struct flame_args *a)
{
	size_t len = strlen(a->output);
	char *tmp = malloc(len + sizeof(".tmpXXXXXX"));
	int fd, err;
	FILE *out;

	if (!tmp)
		return -1;
	memcpy(tmp, a->output, len);
	memcpy(tmp + len, ".tmpXXXXXX", sizeof(".tmpXXXXXX"));
	fd = mkstemp(tmp);
	/* mkstemp makes it 0600; the SVG is for sharing, like any new file */
	if (fd >= 0)
		fchmod(fd, 0666 & ~current_umask());
	if (fd < 0 || !(out = fdopen(fd, "w"))) {
		fprintf(stderr, "ftpad: error: flame: cannot create '%s': %s\n", tmp, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		free(tmp);
		return -1;
	}
	err = ftpad_flame_svg(in, out, &a->opts);
	if (fclose(out) && !err) {
		fprintf(stderr, "ftpad: error: flame: writing '%s' failed: %s\n", tmp, strerror(errno));
		err = -1;
	}
	if (!err && rename(tmp, a->output)) {
		fprintf(stderr, "ftpad: error: flame: cannot rename '%s' to '%s': %s\n", tmp,
			a->output, strerror(errno));
		err = -1;
	}
	if (err)
		unlink(tmp);
	free(tmp);
	return err;
}

static int write_svg_in_place(FILE *in, const struct flame_args *a)
{
	FILE *out = fopen(a->output, "w");
	int err;

	if (!out) {
		fprintf(stderr, "ftpad: error: flame: cannot open '%s': %s\n", a->output,
			strerror(errno));
		return -1;
	}
	err = ftpad_flame_svg(in, out, &a->opts);
	if (fclose(out) && !err) {
		fprintf(stderr, "ftpad: error: flame: writing '%s' failed: %s\n", a->output,
			strerror(errno));
		err = -1;
	}
	return err;
}

int trace_cmd_flame(int argc, char **argv)
{
	struct flame_args a = { 0 };
	int err = parse_flame(argc, argv, &a);
	FILE *in;

	if (err)
		return err;
	in = open_folded(&a);
	if (!in)
		return 1;
	if (!strcmp(a.output, "-"))
		err = ftpad_flame_svg(in, stdout, &a.opts);
	else if (out_is_special_file(a.output))
		err = write_svg_in_place(in, &a);
	else
		err = write_svg_file(in, &a);
	if (in != stdin)
		fclose(in);
	return err ? 1 : 0;
}
