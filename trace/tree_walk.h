/* SPDX-License-Identifier: MIT */
/*
 * tree_walk.h - the call-tree rules of docs/format.md, one event at a time
 * (tree.h says what the walk gives a viewer).  Inline, so that a viewer
 * whose speed matters (replay) compiles its own walk with its callbacks
 * called directly: tree_walk_thread_with(w, im, th, &its_ops).
 *
 * Stack pointers are compared as signed 32-bit differences: the stack
 * grows down, so a frame whose entry sp is at or below a new entry's sp
 * cannot still be open; the thread left it without an exit.
 */
#ifndef FTPAD_TRACE_TREE_WALK_H
#define FTPAD_TRACE_TREE_WALK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tree.h"

void tree_stats_add(struct tree_stats *to, const struct tree_stats *s);

#define TREE_INLINE __attribute__((always_inline))

static inline TREE_INLINE struct tree_frame *walk_push(struct tree_walk *w)
{
	if (w->depth == w->cap) {
		w->cap = w->cap * 2 + 256;
		w->stack = realloc(w->stack, w->cap * sizeof(*w->stack));
		if (!w->stack) {
			fputs("ftpad: error: out of memory\n", stderr);
			exit(1);
		}
	}
	return &w->stack[w->depth++];
}

static inline TREE_INLINE void walk_pop(
	struct tree_walk *w, const struct tree_ops *ops, int64_t end, enum tree_end how)
{
	struct tree_frame *f = &w->stack[w->depth - 1];

	if (how == TREE_UNWOUND)
		w->st.unwound++;
	else if (how == TREE_RUNNING)
		w->st.running++;
	if (ops->close)
		ops->close(w, f, end, how);
	if (--w->depth)
		w->stack[w->depth - 1].child_ns += end - f->start;
}

/* Sp `sp` is at or above the frame's entry: the frame cannot be open. */
static inline int walk_left_behind(const struct tree_frame *f, uint32_t sp)
{
	return (int32_t)(f->sp - sp) <= 0;
}

static inline TREE_INLINE void walk_close_at_or_below(
	struct tree_walk *w, const struct tree_ops *ops, uint32_t sp)
{
	while (w->depth && walk_left_behind(&w->stack[w->depth - 1], sp))
		walk_pop(w, ops, w->last, TREE_UNWOUND);
}

static inline TREE_INLINE void walk_open_frame(
	struct tree_walk *w, const struct tree_ops *ops, uint32_t func, uint32_t signo, uint32_t sp, int64_t now)
{
	struct tree_frame *f = walk_push(w);

	*f = (struct tree_frame){ .func = func, .signo = signo, .sp = sp, .start = now };
	if (ops->open)
		ops->open(w, f);
}

static inline TREE_INLINE void walk_entry(
	struct tree_walk *w, const struct tree_ops *ops, const struct trace_site *s, uint32_t sp,
	int64_t now)
{
	uint32_t func = s->func;

	walk_close_at_or_below(w, ops, sp);
	if (s->noexit) {
		if (ops->entry_only)
			ops->entry_only(w, func, now);
		return;
	}
	walk_open_frame(w, ops, func, 0, sp, now);
}

/* Closes the innermost open frame with `func` (a signal mark: TRACE_NONE),
 * and the frames above it first, as unwound.  0 if there is none. */
static inline TREE_INLINE int walk_close_innermost(
	struct tree_walk *w, const struct tree_ops *ops, uint32_t func, int64_t now, enum tree_end how)
{
	size_t i = w->depth;

	while (i && w->stack[i - 1].func != func)
		i--;
	if (!i)
		return 0;
	while (w->depth > i)
		walk_pop(w, ops, w->last, TREE_UNWOUND);
	walk_pop(w, ops, now, how);
	return 1;
}

static inline TREE_INLINE void walk_unwind(
	struct tree_walk *w, const struct tree_ops *ops, uint32_t sp, int64_t now)
{
	while (w->depth && (int32_t)(w->stack[w->depth - 1].sp - sp) < 0)
		walk_pop(w, ops, now, TREE_UNWOUND);
}

/* Site `site` of the image (its table in locals of the loop, which the
 * callbacks cannot be assumed to leave alone otherwise), or 0 after
 * counting an unknown id. */
static inline TREE_INLINE const struct trace_site *walk_site_of(
	struct tree_walk *w, const struct trace_site *sites, uint32_t nsites, uint32_t site)
{
	const struct trace_site *s;

	if (site < nsites && (s = &sites[site])->func != TRACE_NONE)
		return s;
	w->st.unknown_sites++;
	return NULL;
}

static inline TREE_INLINE void walk_event(
	struct tree_walk *w, const struct tree_ops *ops, const struct trace_site *sites,
	uint32_t nsites, const struct ftpad_event *e, int64_t now)
{
	uint32_t site = ftpad_event_site(e);
	const struct trace_site *s;

	switch (ftpad_event_kind(e)) {
	case FTPAD_EVENT_ENTRY:
		if ((s = walk_site_of(w, sites, nsites, site)))
			walk_entry(w, ops, s, e->sp, now);
		break;
	case FTPAD_EVENT_EXIT:
	case FTPAD_EVENT_TAIL_EXIT:
		if ((s = walk_site_of(w, sites, nsites, site)) &&
		    !walk_close_innermost(w, ops, s->func, now,
				     ftpad_event_kind(e) == FTPAD_EVENT_EXIT ? TREE_EXITED
									     : TREE_TAIL_EXITED))
			w->st.stray_exits++;
		break;
	case FTPAD_EVENT_LOST:
		w->st.events--; /* a count of others, not an event: the summary's way */
		w->st.lost += e->sp;
		w->lost_why = site < FTPAD_LOST_CAUSES ? site : FTPAD_LOST_CAUSES;
		if (!w->st.lost_by[w->lost_why] ||
		    now - w->trace->first_ns < w->st.lost_first[w->lost_why])
			w->st.lost_first[w->lost_why] = now - w->trace->first_ns;
		w->st.lost_by[w->lost_why] += e->sp;
		if (ops->lost)
			ops->lost(w, e->sp, now);
		break;
	case FTPAD_EVENT_SIGNAL:
		walk_close_at_or_below(w, ops, e->sp);
		walk_open_frame(w, ops, TRACE_NONE, site, e->sp, now);
		break;
	case FTPAD_EVENT_SIGRETURN:
		if (!walk_close_innermost(w, ops, TRACE_NONE, now, TREE_EXITED))
			w->st.stray_sigreturns++;
		break;
	case FTPAD_EVENT_UNWIND:
		walk_unwind(w, ops, e->sp, now);
		break;
	default:
		w->st.unknown_kinds++;
		return; /* its time says nothing we can trust */
	}
	w->last = now;
}

static inline TREE_INLINE void tree_walk_thread_with(
	struct tree_walk *w, const struct trace_image *im, const struct trace_thread *th,
	const struct tree_ops *ops)
{
	const struct trace_clock clock = w->trace->clock;
	const struct ftpad_event *e = th->events, *end = e + th->nevents;
	const struct trace_site *sites = im->sites;
	const uint32_t nsites = im->nsites;

	w->image = im;
	w->thread = th;
	w->depth = 0;
	memset(&w->st, 0, sizeof(w->st));
	w->st.events = th->nevents;
	w->st.snapshot = w->trace->snapshot;
	w->last = th->nevents ? trace_ticks_to_ns(&clock, th->first_time) : 0;
	/* Frames cut at the start, outermost first, as if entered at the
	 * thread's first event: their exits then close them.  Looked for
	 * where a thread may start mid-stack (the search is a pass over its
	 * events): elsewhere an exit without its entry stays stray. */
	if (w->trace->attached || w->trace->ring || im->forked_from)
		w->st.cut = tree_find_cut(w, im, th);
	for (size_t i = w->st.cut; i-- > 0;) {
		struct tree_frame *f = walk_push(w);

		*f = (struct tree_frame){ .func = w->cut[i].func, .sp = w->cut[i].sp,
					  .start = w->last, .cut = 1 };
		if (ops->open)
			ops->open(w, f);
	}
	if (th->version == FTPAD_TRACE_VERSION_RAW) {
		for (; e < end; e++)
			walk_event(w, ops, sites, nsites, e, trace_ticks_to_ns(&clock, e->time));
	} else if (th->nevents) { /* version 2: a block at a time */
		struct trace_block_reader r;
		char why[256];
		long n;

		trace_thread_blocks(th, &r);
		while ((n = trace_block_read(&r, why, sizeof(why))) > 0)
			for (e = r.ev, end = e + n; e < end; e++)
				walk_event(w, ops, sites, nsites, e,
					   trace_ticks_to_ns(&clock, e->time));
		trace_block_reader_close(&r);
		if (n < 0)
			trace_fatal("%s: %s", th->path, why);
	}
	while (w->depth) /* still open at the end: exit(), pthread_exit(), killed, detached */
		walk_pop(w, ops, w->last, w->trace->attached ? TREE_RUNNING : TREE_UNWOUND);
	if (th->unwritten) { /* where in the file they belonged is not known: at its end */
		w->st.unwritten = th->unwritten;
		memcpy(w->st.unwritten_cause, th->unwritten_cause, sizeof(w->st.unwritten_cause));
		w->st.unwritten_first = th->unwritten_since
			? trace_ticks_to_ns(&clock, th->unwritten_since) - w->trace->first_ns : -1;
		w->lost_cause = th->unwritten_cause;
		if (ops->lost)
			ops->lost(w, th->unwritten > UINT32_MAX ? UINT32_MAX : (uint32_t)th->unwritten,
				  w->last);
		w->lost_cause = NULL;
	}
	if (w->st.unknown_kinds || w->st.unknown_sites)
		trace_warn(w->trace, "%s: %" PRIu64 " events of unknown kinds and %" PRIu64
			   " of unknown site ids skipped", th->path, w->st.unknown_kinds,
			   w->st.unknown_sites);
	tree_stats_add(&w->total, &w->st);
}

#endif
