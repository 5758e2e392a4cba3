/* SPDX-License-Identifier: MIT */
/*
 * viewers.h - what the `ftpad` subcommands that read a trace (one file
 * each; their entry points: trace_commands.h) share.
 */
#ifndef FTPAD_TRACE_VIEWERS_H
#define FTPAD_TRACE_VIEWERS_H

#include <stdbool.h>

#include "trace_commands.h"
#include "tree.h"

#define EXIT_TRACE_USAGE 2

int trace_dump_chrome(struct trace *t, const char *out);
int trace_dump_perfetto(struct trace *t, const char *out);
int trace_dump_folded(struct trace *t, const char *out);
int trace_dump_pprof(struct trace *t, const char *out);
/* A distinct call path over every thread: the path of its caller and its
 * name (a function's symbol, or a signal mark's). */
struct trace_path {
	uint32_t parent; /* TRACE_NONE at a thread's root */
	uint32_t sym;    /* index into trace.syms */
	int64_t self;    /* ns spent in it, not in its callees */
	uint64_t calls;  /* frames of it opened, and entry-only calls */
};
/* Walks every thread into call paths, each after its parent's; returns
 * how many, in *paths (free() it). */
size_t trace_collect_paths(struct trace *t, struct trace_path **paths);
/* The folded stacks into o, which it closes; 0, or 1 after saying why. */
struct out;
int trace_write_folded(struct trace *t, struct out *o);

int trace_usage_error(const char *fmt, const char *arg);

/* Where `ftpad record` writes when -o names no directory, and so what a
 * viewer reads when it is given none. */
#define TRACE_DEFAULT_DIR "ftpad.data"

/* The trace directory a viewer named cmd reads: the one argument left at
 * argv[optind], or TRACE_DEFAULT_DIR when none is; NULL after the usage
 * error for more (*rc: its exit code). */
const char *trace_dir_arg(const char *cmd, int argc, char **argv, int *rc);

/* Whether any function of the trace has exit sites: without them no call
 * has a duration. */
bool trace_has_exits(const struct trace *t);

/* "ftpad: LEVEL: DIR: no exit sites ... for CMD" and how to get them, on
 * stderr (the directory first, as every error of a viewer). */
void trace_say_no_exits(const struct trace *t, const char *level, const char *cmd);

/* "[signal SIGUSR1]": a signal mark's name, interned. */
uint32_t trace_signal_sym(struct trace *t, uint32_t signo);

/* The name shown for a frame: its function's, or its signal mark's. */
static inline const char *trace_frame_name(struct trace *t, const struct tree_frame *f)
{
	uint32_t sym = f->func == TRACE_NONE ? trace_signal_sym(t, f->signo) : t->funcs[f->func].sym;

	return t->syms[sym]; /* read after interning, which may move t->syms */
}

/* A frame's category in the dumps: a function's, or a signal handler's. */
static inline const char *trace_frame_cat(const struct tree_frame *f)
{
	return f->func == TRACE_NONE ? "signal" : "function";
}

/* Per-function statistics, shared by report and live. */
struct func_stats {
	uint64_t calls, unwound, entry_only;
	int64_t total, self, max;
	uint32_t open; /* frames of it open now: recursion counts its time once */
};

struct stats_walk {
	struct func_stats *by_sym; /* indexed by trace.syms; marks included */
	size_t nsyms;
};

/* Walks every thread into per-symbol statistics; frees with free(s->by_sym). */
void stats_collect(struct trace *t, struct stats_walk *s, struct tree_stats *total);

/* Sort keys for report and live. */
enum stats_key { KEY_TOTAL, KEY_SELF, KEY_CALLS, KEY_AVG, KEY_MAX, KEY_NAME };
int stats_key_parse(const char *s, enum stats_key *key);
/* The symbols with calls, in order; returns their count. */
size_t stats_order(struct trace *t, const struct stats_walk *s, enum stats_key key,
		   uint32_t **order);
/* Writes the table (report's body, live's screen). */
struct out;
void stats_print(struct out *o, struct trace *t, const struct stats_walk *s, const uint32_t *order,
		 size_t n);

#endif
