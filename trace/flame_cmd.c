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
	"       ftpad flame [--title T] [--width PX] [--min-width PX] [--raw-names] [DIR] -o OUT.svg\n"
	"\n"
	"Write a self-contained SVG flame graph (click a frame to zoom, Ctrl-F to\n"
	"search) from folded stacks ('f1;f2;f3 NS' lines, as 'ftpad dump --folded'\n"
	"writes them; FILE '-' is stdin) or from a trace directory (default\n"
	"ftpad.data).\n"
	"  --folded FILE     read folded stacks from FILE\n"
	"  -o, --output OUT  the SVG to write ('-': stdout)\n"
	"  --title T         the title drawn above the graph (default: Flame graph)\n"
	"  --width PX        the width drawn (default: 1200); a browser fits the\n"
	"                    graph to its window\n"
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
	if (a->folded && a->dir)
		return flame_usage_error("%s", "give either --folded FILE or a trace DIR");
	if (!a->folded && !a->dir)
		a->dir = TRACE_DEFAULT_DIR;
	if (!a->output)
		return flame_usage_error("%s", "missing -o OUT.svg");
	a->opts.input_name = a->folded ? a->folded : a->dir;
	return 0;
}

/* Which paths a folded line would show: those with self time, and the
 * paths above them.  Paths come after their parents, so one backward pass
 * marks them all. */
static unsigned char *paths_shown(const struct trace_path *paths, size_t n)
{
	unsigned char *shown = calloc(n + 1, 1);

	if (!shown)
		return NULL;
	for (size_t i = n; i-- > 0;) {
		shown[i] |= paths[i].self > 0;
		if (shown[i] && paths[i].parent != TRACE_NONE)
			shown[paths[i].parent] = 1;
	}
	return shown;
}

/* The frames of the paths shown, each made from its parent's frame: one
 * step a path, where folded text would spell every stack out whole. */
static int add_paths(struct ftpad_flame_tree *tree, struct trace *t, const struct trace_path *paths,
		     size_t n, const unsigned char *shown, size_t *node)
{
	char *name = NULL;
	size_t cap = 0;
	int err = 0;

	for (size_t i = 0; i < n && !err; i++) {
		const char *sym = t->syms[paths[i].sym];
		size_t len = strlen(sym);

		if (!shown[i])
			continue;
		if (len + 1 > cap) {
			char *more = realloc(name, cap = len + 1);

			if (!more) {
				err = -1;
				fputs("ftpad: error: flame: out of memory (names)\n", stderr);
				break;
			}
			name = more;
		}
		memcpy(name, sym, len + 1);
		node[i] = ftpad_flame_tree_child(tree, paths[i].parent == TRACE_NONE
						       ? FTPAD_FLAME_ROOT : node[paths[i].parent],
						 name, len);
		if (node[i] == SIZE_MAX)
			err = -1;
		else if (paths[i].self > 0 && ftpad_flame_tree_add(tree, node[i], (uint64_t)paths[i].self))
			err = -1, fprintf(stderr, "ftpad: error: %s: total time overflows 64 bits\n", t->dir);
	}
	free(name);
	return err;
}

struct ftpad_flame_tree *ftpad_flame_tree_from_trace(const char *dir, unsigned open_flags)
{
	struct ftpad_flame_tree *tree = NULL;
	struct trace_path *paths = NULL;
	unsigned char *shown = NULL;
	size_t *node = NULL, n;
	struct trace t;

	if (trace_open(&t, dir, open_flags))
		goto out;
	if (!trace_has_exits(&t)) { /* no frame would have a width */
		trace_say_no_exits(&t, "error", "flame");
		goto out;
	}
	n = trace_collect_paths(&t, &paths);
	shown = paths_shown(paths, n);
	node = malloc((n + 1) * sizeof(*node));
	tree = ftpad_flame_tree_new();
	if (!shown || !node || !tree || add_paths(tree, &t, paths, n, shown, node)) {
		if (!shown || !node)
			fputs("ftpad: error: flame: out of memory (paths)\n", stderr);
		if (tree)
			ftpad_flame_tree_free(tree);
		tree = NULL;
	}
out:
	free(node);
	free(shown);
	free(paths);
	trace_close(&t);
	return tree;
}

/* What the SVG is drawn from: folded lines (a file, stdin), or the
 * frames of a trace directory. */
struct flame_source {
	FILE *in;
	struct ftpad_flame_tree *tree;
};

static int open_source(const struct flame_args *a, struct flame_source *src)
{
	if (a->dir) {
		src->tree = ftpad_flame_tree_from_trace(a->dir, a->open_flags);
		return src->tree ? 0 : -1;
	}
	if (!strcmp(a->folded, "-")) {
		src->in = stdin;
		return 0;
	}
	src->in = fopen(a->folded, "r");
	if (!src->in)
		fprintf(stderr, "ftpad: error: flame: cannot open '%s': %s\n", a->folded,
			strerror(errno));
	return src->in ? 0 : -1;
}

static void close_source(struct flame_source *src)
{
	if (src->tree)
		ftpad_flame_tree_free(src->tree);
	if (src->in && src->in != stdin)
		fclose(src->in);
}

static int draw(const struct flame_source *src, FILE *out, const struct flame_args *a)
{
	return src->tree ? ftpad_flame_tree_svg(src->tree, out, &a->opts)
			 : ftpad_flame_svg(src->in, out, &a->opts);
}

static mode_t current_umask(void)
{
	mode_t mask = umask(0);

	umask(mask);
	return mask;
}

static int write_svg_file(const struct flame_source *src, const struct flame_args *a)
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
	err = draw(src, out, a);
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

static int write_svg_in_place(const struct flame_source *src, const struct flame_args *a)
{
	FILE *out = fopen(a->output, "w");
	int err;

	if (!out) {
		fprintf(stderr, "ftpad: error: flame: cannot open '%s': %s\n", a->output,
			strerror(errno));
		return -1;
	}
	err = draw(src, out, a);
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
	struct flame_source src = { 0 };
	int err = parse_flame(argc, argv, &a);

	if (err)
		return err;
	if (open_source(&a, &src))
		return 1;
	if (!strcmp(a.output, "-"))
		err = draw(&src, stdout, &a);
	else if (out_is_special_file(a.output))
		err = write_svg_in_place(&src, &a);
	else
		err = write_svg_file(&src, &a);
	close_source(&src);
	return err ? 1 : 0;
}
