/* SPDX-License-Identifier: MIT */
/*
 * tree.h - one thread's events become a call tree by the rules of
 * docs/format.md "How a reader builds the call tree".  The walker keeps
 * only the open frames and calls a viewer back as frames open and close,
 * so replay, report and the dumps stream a trace of any size.
 */
#ifndef FTPAD_TRACE_TREE_H
#define FTPAD_TRACE_TREE_H

#include "reader.h"

enum tree_end {
	TREE_EXITED,      /* through an exit site */
	TREE_TAIL_EXITED, /* through a tail exit site */
	TREE_UNWOUND,     /* left without one: longjmp, an exception, the end of the file */
	TREE_RUNNING,     /* still open when an attach ended: the program went on in it */
};

struct tree_frame {
	uint32_t func;    /* trace.funcs index; TRACE_NONE for a signal mark */
	uint32_t signo;   /* a signal mark's signal */
	uint32_t sp;
	uint32_t user;    /* the viewer's own (a path node, flags) */
	int64_t start;    /* ns */
	int64_t child_ns; /* the durations of the frames closed directly inside */
};

struct tree_stats {
	uint64_t events; /* as the summary counts them: LOST records are not */
	uint64_t lost, stray_exits, stray_sigreturns, unknown_kinds, unknown_sites, unwound;
	uint64_t running; /* frames open when the attach ended */
	uint64_t unwritten;         /* events the recorder could not write */
	char unwritten_cause[16];   /* the first cause: an errno name */
	int64_t unwritten_first;    /* ns from the trace's zero; -1: not known */
	/* lost, by the LOST events' causes (enum ftpad_lost_cause; the last
	 * slot: causes this reader does not know), and the time of the first
	 * of each, in ns from the trace's zero */
	uint64_t lost_by[FTPAD_LOST_CAUSES + 1];
	int64_t lost_first[FTPAD_LOST_CAUSES + 1];
};

struct tree_walk;

/* Each may be NULL.  `open` and `close` see the frame on top of the stack,
 * at w->stack[w->depth - 1], with its parent (if any) below it. */
struct tree_ops {
	void (*open)(struct tree_walk *w, struct tree_frame *f);
	void (*close)(struct tree_walk *w, struct tree_frame *f, int64_t end, enum tree_end how);
	void (*entry_only)(struct tree_walk *w, uint32_t func, int64_t time);
	/* count events lost here: w->lost_cause NULL, for w->lost_why (enum
	 * ftpad_lost_cause); else they were recorded but not written, for
	 * that cause (an errno name: ENOSPC, EFBIG...), and count is the
	 * thread's, at its end. */
	void (*lost)(struct tree_walk *w, uint32_t count, int64_t time);
};

struct tree_walk {
	struct trace *trace;
	const struct trace_image *image;
	const struct trace_thread *thread;
	const struct tree_ops *ops;
	void *ctx;
	struct tree_frame *stack;
	size_t depth, cap;
	int64_t last; /* the time of the last event: where frames left unseen are closed */
	const char *lost_cause; /* during ops->lost: NULL, or why events were not written */
	unsigned lost_why;      /* during ops->lost: the LOST event's cause */
	struct tree_stats st;    /* this thread's */
	struct tree_stats total; /* every thread walked so far */
};

void tree_walk_init(struct tree_walk *w, struct trace *t, const struct tree_ops *ops, void *ctx);
void tree_walk_thread(struct tree_walk *w, const struct trace_image *im,
		      const struct trace_thread *th);
/* Every thread of every image, in the reader's order. */
void tree_walk_all(struct tree_walk *w);
void tree_walk_free(struct tree_walk *w);

/* "N events lost, ..." for a viewer's last line; empty when all is well. */
void tree_stats_say(const struct tree_stats *s, char *buf, size_t len);
/* "ftpad: DIR: N events lost: CAUSE, first at T; ..." on stderr, when
 * any were: for the viewers whose output has no room to say it. */
void tree_stats_say_lost(const struct trace *t, const struct tree_stats *s);
/* What a viewer calls a LOST event's cause (ftpad_lost_cause_text()). */
const char *tree_lost_text(unsigned cause);

#endif
