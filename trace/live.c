/* SPDX-License-Identifier: MIT */
/*
 * live.c - `ftpad live [DIR | -- PROG ARGS]`: a `top` of functions.
 *
 * Each refresh opens the directory afresh and walks it whole (at tens of
 * millions of events a second this is cheap, and it needs no state that a
 * growing file could put out of step).  It follows `ftpad record` and
 * `ftpad attach` as they write (the trace has its name from the start,
 * and info says state=recording, and by whom), waiting a few seconds for
 * the directory to appear.  It stops after --iterations, or once the
 * trace is finished (info's last state=), or its recorder is gone without
 * finishing it, or the program it started has ended.  With `-- PROG` it runs
 * `ftpad record -o TMPDIR -- PROG ARGS` itself and follows TMPDIR, which it
 * keeps for replay.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "out.h"
#include "viewers.h"

struct live_opts {
	const char *dir;
	char **prog;
	long interval_ms, iterations;
	size_t rows;
	enum stats_key key;
	int tty;
	unsigned open_flags; /* TRACE_OPEN_RAW_NAMES */
};

static size_t screen_rows(const struct live_opts *o)
{
	struct winsize ws;

	if (o->rows)
		return o->rows;
	if (o->tty && !ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_row > 6)
		return ws.ws_row - 5u;
	return 20;
}

/* One screen; -1 if the trace could not be opened (said on stderr).
 * how: "" while the trace is being written (its files may end in a piece
 * not written yet: read quietly), else what it is now. */
static int refresh(const struct live_opts *o, long iteration, const char *how)
{
	struct out *out = out_open(NULL);
	struct stats_walk s;
	struct tree_stats total;
	struct trace t;
	uint32_t *order;
	char said[1024];
	size_t n;

	if (o->tty)
		out_str(out, "\033[H\033[J");
	out_str(out, "ftpad live: ");
	out_str(out, o->dir);
	out_str(out, how);
	out_str(out, ", refresh ");
	out_u64(out, (uint64_t)iteration);
	out_char(out, '\n');
	snprintf(said, sizeof(said), "%s/info", o->dir);
	/* Until the recorder's summary is there, files may be half written. */
	if (access(said, F_OK) || trace_open(&t, o->dir, o->open_flags | (*how ? 0 : TRACE_OPEN_QUIET))) {
		if (!access(said, F_OK))
			trace_close(&t); /* what it had mapped before it failed */
		out_str(out, "  (no trace yet)\n");
		out_close(out);
		return -1;
	}
	stats_collect(&t, &s, &total);
	n = stats_order(&t, &s, o->key, &order);
	stats_print(out, &t, &s, order, n < screen_rows(o) ? n : screen_rows(o));
	tree_stats_say(&total, said, sizeof(said));
	out_str(out, "# ");
	out_str(out, said);
	out_char(out, '\n');
	out_close(out);
	free(order);
	free(s.by_sym);
	trace_close(&t);
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, ms % 1000 * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* `ftpad record -o DIR -- PROG ARGS` from this very binary. */
static pid_t start_record(const struct live_opts *o)
{
	size_t n = 0, i;
	char **argv;
	pid_t pid;

	while (o->prog[n])
		n++;
	argv = calloc(n + 6, sizeof(*argv));
	argv[0] = "ftpad";
	argv[1] = "record";
	argv[2] = "-o";
	argv[3] = (char *)o->dir;
	argv[4] = "--";
	for (i = 0; i < n; i++)
		argv[5 + i] = o->prog[i];
	pid = fork();
	if (pid == 0) {
		/* The program's own output would scroll the table away. */
		if (o->tty && freopen("/dev/null", "w", stdout) == NULL)
			_exit(127);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	free(argv);
	return pid;
}

/* How long `ftpad live DIR` waits for a recording to make DIR and its
 * info: the recorder starts in the same moment, on a busy machine. */
#define APPEAR_MS 10000

/*
 * Refreshes until the trace is finished (child: the recording this live
 * started, which finishes it as it ends), or its recorder is gone without
 * finishing it, or --iterations; never for ever.
 */
static int follow(struct live_opts *o, pid_t child)
{
	enum trace_state state = TRACE_STATE_NOT_THERE;
	long i, waited = 0;
	int status = 0, done = 0;

	for (i = 1; !done; i++) {
		if (child > 0 && waitpid(child, &status, WNOHANG) == child)
			child = 0, done = 1;
		if (child < 0) {
			state = trace_state(o->dir);
			done = state >= TRACE_STATE_FINISHED;
			if (state == TRACE_STATE_NOT_THERE && (waited += o->interval_ms) > APPEAR_MS) {
				fprintf(stderr, "ftpad: error: %s: no trace appeared in %d s\n",
					o->dir, APPEAR_MS / 1000);
				return 1;
			}
		}
		if (o->iterations && i >= o->iterations)
			done = 1;
		if (state == TRACE_STATE_BROKEN)
			return 1; /* not a trace: nothing to show */
		/* A finished trace that cannot be read will not get better. */
		if (refresh(o, i, child == 0 || state == TRACE_STATE_FINISHED ? " (finished)"
				  : state == TRACE_STATE_ABANDONED ? " (incomplete)" : "") &&
		    state >= TRACE_STATE_FINISHED)
			return 1;
		if (!done)
			sleep_ms(o->interval_ms);
	}
	if (state == TRACE_STATE_ABANDONED)
		fprintf(stderr, "ftpad: warning: %s: its recorder ended without finishing it: "
			"incomplete\n", o->dir);
	if (child > 0)
		waitpid(child, &status, 0);
	if (!o->dir || child < 0)
		return 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char live_usage[] =
	"usage: ftpad live [--interval MS] [--iterations N] [-n ROWS] [-s KEY] [--raw-names] [DIR]\n"
	"       ftpad live [--interval MS] [--iterations N] [-n ROWS] [-s KEY] [--raw-names]\n"
	"                  -- PROG [ARGS...]\n";

int trace_cmd_live(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "iterations", required_argument, NULL, 'I' },
		{ "rows", required_argument, NULL, 'n' },
		{ "sort", required_argument, NULL, 's' },
		{ "raw-names", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct live_opts o = { .interval_ms = 1000, .tty = isatty(STDOUT_FILENO) };
	char tmp[] = "/tmp/ftpad-live.XXXXXX";
	char *end;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+n:s:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			o.interval_ms = strtol(optarg, &end, 10);
			if (*end || o.interval_ms < 1)
				return trace_usage_error("live: bad --interval '%s' (milliseconds)", optarg);
			break;
		case 'I':
			o.iterations = strtol(optarg, &end, 10);
			if (*end || o.iterations < 1)
				return trace_usage_error("live: bad --iterations '%s'", optarg);
			break;
		case 'n':
			o.rows = (size_t)strtoul(optarg, &end, 10);
			if (*end || !o.rows)
				return trace_usage_error("live: bad row count '%s'", optarg);
			break;
		case 's':
			if (stats_key_parse(optarg, &o.key))
				return trace_usage_error("live: unknown sort key '%s'", optarg);
			break;
		case 'r':
			o.open_flags |= TRACE_OPEN_RAW_NAMES;
			break;
		case 'h':
			return fputs(live_usage, stdout), 0;
		default:
			return trace_usage_error("live: bad option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc && !strcmp(argv[optind - 1], "--")) {
		if (!mkdtemp(tmp))
			return fprintf(stderr, "ftpad: error: %s: %s\n", tmp, strerror(errno)), 1;
		rmdir(tmp); /* record makes it */
		o.dir = tmp;
		o.prog = argv + optind;
		rc = follow(&o, start_record(&o));
		fprintf(stderr, "ftpad: live: the trace is kept in %s\n", tmp);
		return rc;
	}
	o.dir = optind == argc ? TRACE_DEFAULT_DIR : argv[optind];
	if (optind < argc - 1)
		return trace_usage_error("live: want a trace directory (default %s), or -- PROG ARGS",
					 TRACE_DEFAULT_DIR);
	for (long waited = 0; access(o.dir, F_OK); waited += 100) {
		if (errno != ENOENT || waited >= APPEAR_MS)
			return fprintf(stderr, "ftpad: error: %s: %s\n", o.dir, strerror(errno)), 1;
		sleep_ms(100); /* a recording about to start */
	}
	return follow(&o, -1);
}
