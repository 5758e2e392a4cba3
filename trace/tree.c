/* SPDX-License-Identifier: MIT */
/*
 * tree.c - the call-tree walk for any viewer (tree_walk.h holds the rules).
 */
#include "tree_walk.h"

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
	free(w->cut);
	free(w->scan);
	w->stack = NULL;
	w->cut = w->scan = NULL;
}

void tree_stats_add(struct tree_stats *to, const struct tree_stats *s)
{
	to->events += s->events;
	to->lost += s->lost;
	to->stray_exits += s->stray_exits;
	to->stray_sigreturns += s->stray_sigreturns;
	to->unknown_kinds += s->unknown_kinds;
	to->unknown_sites += s->unknown_sites;
	to->unwound += s->unwound;
	to->running += s->running;
	to->snapshot |= s->snapshot;
	to->cut += s->cut;
	if (s->unwritten && (!to->unwritten || (s->unwritten_first >= 0 &&
	    (to->unwritten_first < 0 || s->unwritten_first < to->unwritten_first)))) {
		memcpy(to->unwritten_cause, s->unwritten_cause, sizeof(to->unwritten_cause));
		to->unwritten_first = s->unwritten_first;
	}
	to->unwritten += s->unwritten;
	for (unsigned c = 0; c <= FTPAD_LOST_CAUSES; c++) {
		if (s->lost_by[c] && (!to->lost_by[c] || s->lost_first[c] < to->lost_first[c]))
			to->lost_first[c] = s->lost_first[c];
		to->lost_by[c] += s->lost_by[c];
	}
}

const char *tree_lost_text(unsigned cause)
{
	return cause < FTPAD_LOST_CAUSES ? ftpad_lost_cause_text(cause) : "a cause this ftpad does not know";
}

/* ns as "1.500 us", "2.000 ms", "1.234 s". */
static void say_time(char *buf, size_t len, int64_t ns)
{
	double v = ns < 0 ? 0 : (double)ns;

	if (v < 1e6)
		snprintf(buf, len, "%.3f us", v / 1e3);
	else if (v < 1e9)
		snprintf(buf, len, "%.3f ms", v / 1e6);
	else
		snprintf(buf, len, "%.3f s", v / 1e9);
}

/* ", N LOST (CAUSE, first at T)" per cause, then the unwritten ones. */
static int say_lost(const struct tree_stats *s, char *buf, size_t len, int n)
{
	char at[32];

	for (unsigned c = 0; c <= FTPAD_LOST_CAUSES; c++) {
		if (!s->lost_by[c] || n < 0 || (size_t)n >= len)
			continue;
		say_time(at, sizeof(at), s->lost_first[c]);
		n += snprintf(buf + n, len - n, ", %" PRIu64 " LOST (%s, first at %s)", s->lost_by[c],
			      tree_lost_text(c), at);
	}
	if (s->unwritten && n >= 0 && (size_t)n < len) {
		say_time(at, sizeof(at), s->unwritten_first);
		n += snprintf(buf + n, len - n, ", %" PRIu64 " LOST: not written (%s%s%s)", s->unwritten,
			      s->unwritten_cause, s->unwritten_first >= 0 ? ", first at " : "",
			      s->unwritten_first >= 0 ? at : "");
	}
	return n;
}

void tree_stats_say_lost(const struct trace *t, const struct tree_stats *s)
{
	char said[1024];
	int n;

	if (!s->lost && !s->unwritten)
		return;
	n = say_lost(s, said, sizeof(said), 0);
	if (n > 2)
		fprintf(stderr, "ftpad: %s: events lost:%s\n", t->dir, said + 1);
}

/* Room for n + 1 in *v, of *cap. */
static struct tree_cut *cut_room(struct tree_cut **v, size_t *cap, size_t n)
{
	if (n == *cap) {
		*cap = *cap * 2 + 64;
		*v = realloc(*v, *cap * sizeof(**v));
		if (!*v) {
			fputs("ftpad: error: out of memory\n", stderr);
			exit(1);
		}
	}
	return *v;
}

/* a is above b on the stack (an outer frame's sp), as signed 32-bit
 * differences. */
static inline int sp_above(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

/*
 * The walk's rules without a viewer, on the frames the thread's own
 * events open (stack).  An exit that finds no frame of its function (the
 * walk would count it stray) closes a frame cut at the start when it can
 * be one: above every frame entered so far (whatever the thread did until
 * then nested inside it) and above the cut frames found before (each one
 * found is the next outer).  Any other such exit stays stray: its entry
 * was lost, say.
 */
/* tree_find_cut()'s state between one event and the next. */
struct cut_scan {
	struct tree_walk *w;
	const struct trace_site *sites;
	uint32_t nsites;
	struct tree_cut *stack;
	size_t ncut, depth, cap;
	uint32_t top;
	int have_top;
};

static void cut_scan_event(struct cut_scan *c, const struct ftpad_event *e)
{
	uint32_t site = ftpad_event_site(e), func, sp = e->sp;
	unsigned kind = ftpad_event_kind(e);
	size_t i;

	switch (kind) {
	case FTPAD_EVENT_ENTRY:
	case FTPAD_EVENT_SIGNAL:
		if (kind == FTPAD_EVENT_ENTRY) {
			if (site >= c->nsites || c->sites[site].func == TRACE_NONE)
				return;
			func = c->sites[site].noexit ? TRACE_NONE - 1 : c->sites[site].func;
		} else {
			func = TRACE_NONE;
		}
		if (!c->have_top || sp_above(sp, c->top))
			c->top = sp;
		c->have_top = 1;
		while (c->depth && !sp_above(c->stack[c->depth - 1].sp, sp))
			c->depth--;
		if (func == TRACE_NONE - 1) /* entries only: no frame */
			return;
		if (c->depth == c->cap)
			c->stack = cut_room(&c->w->scan, &c->cap, c->depth);
		c->stack[c->depth++] = (struct tree_cut){ func, sp };
		return;
	case FTPAD_EVENT_UNWIND:
		if (!c->have_top || sp_above(sp, c->top))
			c->top = sp;
		c->have_top = 1;
		while (c->depth && sp_above(sp, c->stack[c->depth - 1].sp))
			c->depth--;
		return;
	case FTPAD_EVENT_EXIT:
	case FTPAD_EVENT_TAIL_EXIT:
		if (site >= c->nsites || c->sites[site].func == TRACE_NONE)
			return;
		func = c->sites[site].func;
		break;
	case FTPAD_EVENT_SIGRETURN:
		func = TRACE_NONE;
		break;
	default:
		return;
	}
	for (i = c->depth; i && c->stack[i - 1].func != func; i--)
		;
	if (i) {
		c->depth = i - 1;
	} else if (kind != FTPAD_EVENT_SIGRETURN && (!c->have_top || sp_above(sp, c->top)) &&
		   (!c->ncut || sp_above(sp, c->w->cut[c->ncut - 1].sp))) {
		cut_room(&c->w->cut, &c->w->cut_cap, c->ncut)[c->ncut] =
			(struct tree_cut){ func, sp };
		c->ncut++;
		c->depth = 0;
	}
}

size_t tree_find_cut(struct tree_walk *w, const struct trace_image *im,
		     const struct trace_thread *th)
{
	struct cut_scan c = { .w = w, .sites = im->sites, .nsites = im->nsites,
			      .stack = w->scan, .cap = w->scan_cap };

	if (th->version == FTPAD_TRACE_VERSION_RAW) {
		for (size_t i = 0; i < th->nevents; i++)
			cut_scan_event(&c, &th->events[i]);
	} else if (th->nevents) { /* version 2: a block at a time, as the walk */
		struct trace_block_reader r;
		char why[256];
		long n;

		trace_thread_blocks(th, &r);
		while ((n = trace_block_read(&r, why, sizeof(why))) > 0)
			for (long i = 0; i < n; i++)
				cut_scan_event(&c, &r.ev[i]);
		trace_block_reader_close(&r);
		if (n < 0)
			trace_fatal("%s: %s", th->path, why);
	}
	w->scan_cap = c.cap;
	return c.ncut;
}

void tree_walk_thread(struct tree_walk *w, const struct trace_image *im,
		      const struct trace_thread *th)
{
	tree_walk_thread_with(w, im, th, w->ops);
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
	int n = snprintf(buf, len, "%" PRIu64 " event%s", s->events, s->events == 1 ? "" : "s");

	n = say_lost(s, buf, len, n);
	if (s->unwound && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - n, ", %" PRIu64 " frame%s unwound", s->unwound,
			      s->unwound == 1 ? "" : "s");
	if (s->running && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - n, ", %" PRIu64 " frame%s running at %s", s->running,
			      s->running == 1 ? "" : "s", s->snapshot ? "the snapshot" : "detach");
	if (s->cut && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - n, ", %" PRIu64 " frame%s cut at the start", s->cut,
			      s->cut == 1 ? "" : "s");
	if (s->stray_exits && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - n, ", %" PRIu64 " exit%s without an entry skipped",
			      s->stray_exits, s->stray_exits == 1 ? "" : "s");
	if (s->stray_sigreturns && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - n, ", %" PRIu64 " signal return%s without a signal",
			      s->stray_sigreturns, s->stray_sigreturns == 1 ? "" : "s");
	if ((s->unknown_kinds || s->unknown_sites) && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - n, ", %" PRIu64 " unknown events skipped",
			 s->unknown_kinds + s->unknown_sites);
}
