/* SPDX-License-Identifier: MIT */
/*
 * stats.c - per-function numbers for `ftpad report` and `ftpad live`.
 *
 * total: the time the function was on a thread's stack (a recursive
 *        function's inner calls are inside its outer one, so counted once);
 * self:  its frames' time less the frames and signal handlers directly
 *        inside them;
 * avg:   total / calls; max: its longest single call.
 * Entry-only functions have calls and no times.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdlib.h>
#include <string.h>

#include "out.h"
#include "tree_walk.h"
#include "viewers.h"

static inline TREE_INLINE struct func_stats *stats_of(struct tree_walk *w, uint32_t sym)
{
	struct stats_walk *s = w->ctx;

	if (sym >= s->nsyms) { /* a signal mark's name, interned during the walk */
		size_t n = w->trace->nsyms + 64;

		s->by_sym = realloc(s->by_sym, n * sizeof(*s->by_sym));
		if (!s->by_sym)
			abort();
		memset(s->by_sym + s->nsyms, 0, (n - s->nsyms) * sizeof(*s->by_sym));
		s->nsyms = n;
	}
	return &s->by_sym[sym];
}

static inline TREE_INLINE void stats_open(struct tree_walk *w, struct tree_frame *f)
{
	if (f->func != TRACE_NONE)
		stats_of(w, w->trace->funcs[f->func].sym)->open++;
}

static inline TREE_INLINE void stats_close(struct tree_walk *w, struct tree_frame *f, int64_t end,
					    enum tree_end how)
{
	struct func_stats *fs;
	int64_t dur = end - f->start;

	if (f->func == TRACE_NONE)
		return;
	fs = stats_of(w, w->trace->funcs[f->func].sym);
	fs->calls++;
	fs->unwound += how == TREE_UNWOUND;
	fs->cut += f->cut;
	fs->self += dur - f->child_ns;
	if (dur > fs->max)
		fs->max = dur;
	if (!--fs->open)
		fs->total += dur;
}

static void stats_entry_only(struct tree_walk *w, uint32_t func, int64_t time)
{
	struct func_stats *fs = stats_of(w, w->trace->funcs[func].sym);

	(void)time;
	fs->calls++;
	fs->entry_only++;
}

static const struct tree_ops stats_ops = {
	.open = stats_open,
	.close = stats_close,
	.entry_only = stats_entry_only,
};

void stats_collect(struct trace *t, struct stats_walk *s, struct tree_stats *total)
{
	struct tree_walk w;

	s->nsyms = t->nsyms;
	s->by_sym = calloc(s->nsyms + 1, sizeof(*s->by_sym));
	tree_walk_init(&w, t, &stats_ops, s);
	for (size_t i = 0; i < t->nimages; i++) /* the walk inlined: report's speed */
		for (size_t j = 0; j < t->images[i].nthreads; j++)
			tree_walk_thread_with(&w, &t->images[i], &t->images[i].threads[j], &stats_ops);
	*total = w.total;
	tree_walk_free(&w);
}

int stats_key_parse(const char *s, enum stats_key *key)
{
	static const char *const names[] = { "total", "self", "calls", "avg", "max", "name" };
	unsigned i;

	for (i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (!strcmp(s, names[i])) {
			*key = (enum stats_key)i;
			return 0;
		}
	return -1;
}

static int64_t avg_of(const struct func_stats *f)
{
	return f->calls ? f->total / (int64_t)f->calls : 0;
}

struct sorting {
	const struct stats_walk *s;
	struct trace *t;
	enum stats_key key;
};

static int cmp_i64_desc(int64_t a, int64_t b)
{
	return a > b ? -1 : a < b;
}

/* Largest first, then by name: the same trace always gives the same order. */
static int by_key(const void *pa, const void *pb, void *arg)
{
	const struct sorting *sorting = arg;
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	const struct func_stats *x = &sorting->s->by_sym[a], *y = &sorting->s->by_sym[b];
	int c = 0;

	switch (sorting->key) {
	case KEY_TOTAL: c = cmp_i64_desc(x->total, y->total); break;
	case KEY_SELF: c = cmp_i64_desc(x->self, y->self); break;
	case KEY_CALLS: c = cmp_i64_desc((int64_t)x->calls, (int64_t)y->calls); break;
	case KEY_AVG: c = cmp_i64_desc(avg_of(x), avg_of(y)); break;
	case KEY_MAX: c = cmp_i64_desc(x->max, y->max); break;
	case KEY_NAME: break;
	}
	return c ? c : strcmp(sorting->t->syms[a], sorting->t->syms[b]);
}

size_t stats_order(struct trace *t, const struct stats_walk *s, enum stats_key key,
		   uint32_t **order)
{
	size_t n = 0, i;

	*order = malloc((s->nsyms + 1) * sizeof(**order));
	for (i = 0; i < s->nsyms && i < t->nsyms; i++)
		if (s->by_sym[i].calls)
			(*order)[n++] = (uint32_t)i;
	qsort_r(*order, n, sizeof(**order), by_key, &(struct sorting){ s, t, key });
	return n;
}

static void time_cell(struct out *o, const struct func_stats *f, int64_t ns)
{
	out_str(o, "  ");
	if (f->entry_only == f->calls)
		out_str(o, "         -");
	else
		out_duration(o, ns);
}

void stats_print(struct out *o, struct trace *t, const struct stats_walk *s, const uint32_t *order,
		 size_t n)
{
	size_t i;

	out_str(o, "       Total        Self         Avg         Max       Calls  Function\n"
		   "  ==========  ==========  ==========  ==========  ==========  ====================\n");
	for (i = 0; i < n; i++) {
		const struct func_stats *f = &s->by_sym[order[i]];

		time_cell(o, f, f->total);
		time_cell(o, f, f->self);
		time_cell(o, f, avg_of(f));
		time_cell(o, f, f->max);
		out_str(o, "  ");
		out_u64w(o, f->calls, 10);
		out_str(o, "  ");
		out_str(o, t->syms[order[i]]);
		if (f->entry_only == f->calls)
			out_str(o, " (entry only)");
		if (f->unwound) {
			out_str(o, " (");
			out_u64(o, f->unwound);
			out_str(o, " unwound)");
		}
		if (f->cut) {
			out_str(o, " (");
			out_u64(o, f->cut);
			out_str(o, " cut at start)");
		}
		out_char(o, '\n');
	}
}
