/* SPDX-License-Identifier: MIT */
/*
 * tree.c - the call-tree rules of docs/format.md, one event at a time.
 *
 * Stack pointers are compared as signed 32-bit differences: the stack
 * grows down, so a frame whose entry sp is at or below a new entry's sp
 * cannot still be open; the thread left it without an exit.
 */
#include "tree.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tree_walk_init(struct tree_walk *w, struct trace *t, const struct tree_ops *ops, void *ctx)
{
	memset(w, 0, sizeof(*w));
	w->trace = t;
	w->ops = ops;
	w->ctx = ctx;
}

void tree_walk_free(struct tree_walk *w)
{
	free(w->stack);
	w->stack = NULL;
}

static struct tree_frame *push(struct tree_walk *w)
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

static void pop(struct tree_walk *w, int64_t end, enum tree_end how)
{
	struct tree_frame *f = &w->stack[w->depth - 1];

	if (how == TREE_UNWOUND)
		w->st.unwound++;
	if (w->ops->close)
		w->ops->close(w, f, end, how);
	if (--w->depth)
		w->stack[w->depth - 1].child_ns += end - f->start;
}

/* Sp `sp` is at or above the frame's entry: the frame cannot be open. */
static int left_behind(const struct tree_frame *f, uint32_t sp)
{
	return (int32_t)(f->sp - sp) <= 0;
}

static void close_at_or_below(struct tree_walk *w, uint32_t sp)
{
	while (w->depth && left_behind(&w->stack[w->depth - 1], sp))
		pop(w, w->last, TREE_UNWOUND);
}

static void open_frame(struct tree_walk *w, uint32_t func, uint32_t signo, uint32_t sp, int64_t now)
{
	struct tree_frame *f = push(w);

	*f = (struct tree_frame){ .func = func, .signo = signo, .sp = sp, .start = now };
	if (w->ops->open)
		w->ops->open(w, f);
}

static void on_entry(struct tree_walk *w, uint32_t func, uint32_t sp, int64_t now)
{
	close_at_or_below(w, sp);
	if (w->trace->funcs[func].noexit) {
		if (w->ops->entry_only)
			w->ops->entry_only(w, func, now);
		return;
	}
	open_frame(w, func, 0, sp, now);
}

/* Closes the innermost open frame with `func` (a signal mark: TRACE_NONE),
 * and the frames above it first, as unwound.  0 if there is none. */
static int close_innermost(struct tree_walk *w, uint32_t func, int64_t now, enum tree_end how)
{
	size_t i = w->depth;

	while (i && w->stack[i - 1].func != func)
		i--;
	if (!i)
		return 0;
	while (w->depth > i)
		pop(w, w->last, TREE_UNWOUND);
	pop(w, now, how);
	return 1;
}

static void on_unwind(struct tree_walk *w, uint32_t sp, int64_t now)
{
	while (w->depth && (int32_t)(w->stack[w->depth - 1].sp - sp) < 0)
		pop(w, now, TREE_UNWOUND);
}

/* Entries and exits of site `site`, or 0 after counting an unknown id. */
static const struct trace_site *site_of(struct tree_walk *w, uint32_t site)
{
	const struct trace_site *s;

	if (site < w->image->nsites && (s = &w->image->sites[site])->func != TRACE_NONE)
		return s;
	w->st.unknown_sites++;
	return NULL;
}

static void on_event(struct tree_walk *w, const struct ftpad_event *e, int64_t now)
{
	uint32_t site = ftpad_event_site(e);
	const struct trace_site *s;

	switch (ftpad_event_kind(e)) {
	case FTPAD_EVENT_ENTRY:
		if ((s = site_of(w, site)))
			on_entry(w, s->func, e->sp, now);
		break;
	case FTPAD_EVENT_EXIT:
	case FTPAD_EVENT_TAIL_EXIT:
		if ((s = site_of(w, site)) &&
		    !close_innermost(w, s->func, now,
				     ftpad_event_kind(e) == FTPAD_EVENT_EXIT ? TREE_EXITED
									     : TREE_TAIL_EXITED))
			w->st.stray_exits++;
		break;
	case FTPAD_EVENT_LOST:
		w->st.lost += e->sp;
		if (w->ops->lost)
			w->ops->lost(w, e->sp, now);
		break;
	case FTPAD_EVENT_SIGNAL:
		close_at_or_below(w, e->sp);
		open_frame(w, TRACE_NONE, site, e->sp, now);
		break;
	case FTPAD_EVENT_SIGRETURN:
		if (!close_innermost(w, TRACE_NONE, now, TREE_EXITED))
			w->st.stray_sigreturns++;
		break;
	case FTPAD_EVENT_UNWIND:
		on_unwind(w, e->sp, now);
		break;
	default:
		w->st.unknown_kinds++;
		return; /* its time says nothing we can trust */
	}
	w->last = now;
}

static void add_stats(struct tree_stats *to, const struct tree_stats *s)
{
	to->events += s->events;
	to->lost += s->lost;
	to->stray_exits += s->stray_exits;
	to->stray_sigreturns += s->stray_sigreturns;
	to->unknown_kinds += s->unknown_kinds;
	to->unknown_sites += s->unknown_sites;
	to->unwound += s->unwound;
}

void tree_walk_thread(struct tree_walk *w, const struct trace_image *im,
		      const struct trace_thread *th)
{
	const struct trace_clock clock = w->trace->clock;
	const struct ftpad_event *e = th->events, *end = e + th->nevents;

	w->image = im;
	w->thread = th;
	w->depth = 0;
	memset(&w->st, 0, sizeof(w->st));
	w->st.events = th->nevents;
	w->last = th->nevents ? trace_ticks_to_ns(&clock, e->time) : 0;
	for (; e < end; e++)
		on_event(w, e, trace_ticks_to_ns(&clock, e->time));
	while (w->depth) /* still open at the end: exit(), pthread_exit(), killed */
		pop(w, w->last, TREE_UNWOUND);
	if (w->st.unknown_kinds || w->st.unknown_sites)
		trace_warn(w->trace, "%s: %" PRIu64 " events of unknown kinds and %" PRIu64
			   " of unknown site ids skipped", th->path, w->st.unknown_kinds,
			   w->st.unknown_sites);
	add_stats(&w->total, &w->st);
}

void tree_walk_all(struct tree_walk *w)
{
	size_t i, j;

	for (i = 0; i < w->trace->nimages; i++)
		for (j = 0; j < w->trace->images[i].nthreads; j++)
			tree_walk_thread(w, &w->trace->images[i], &w->trace->images[i].threads[j]);
}

void tree_stats_say(const struct tree_stats *s, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%" PRIu64 " events", s->events);

	if (s->lost && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - n, ", %" PRIu64 " LOST (buffer full)", s->lost);
	if (s->unwound && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - n, ", %" PRIu64 " frames unwound", s->unwound);
	if (s->stray_exits && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - n, ", %" PRIu64 " exits without an entry skipped",
			      s->stray_exits);
	if (s->stray_sigreturns && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - n, ", %" PRIu64 " signal returns without a signal",
			      s->stray_sigreturns);
	if ((s->unknown_kinds || s->unknown_sites) && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - n, ", %" PRIu64 " unknown events skipped",
			 s->unknown_kinds + s->unknown_sites);
}
