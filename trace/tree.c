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
	w->stack = NULL;
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
		n += snprintf(buf + n, len - n, ", %" PRIu64 " frame%s running at detach", s->running,
			      s->running == 1 ? "" : "s");
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
