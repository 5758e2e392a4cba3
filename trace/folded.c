/* SPDX-License-Identifier: MIT */
/*
 * folded.c - `ftpad dump --folded DIR`: one line per distinct stack,
 * "main;f;g N" with N the nanoseconds of self time spent there, over all
 * threads, sorted by stack: what flamegraph.pl and `ftpad flame` read.
 * Stacks with no time (entry-only functions) have no line.
 */
#include <stdlib.h>
#include <string.h>

#include "out.h"
#include "viewers.h"

/* The call paths (struct trace_path), found through a hash table. */
struct folded {
	struct trace_path *paths;
	size_t n, cap;
	uint32_t *slots; /* path index + 1 */
	size_t mask;
};

/* Every bit of the key reaches the low bits that index the table: a plain
 * multiply leaves them to `sym` alone, and the paths of one recursion
 * (one sym, parents 1, 2, 3 ...) then share a handful of slots, which made
 * collecting them quadratic in its depth. */
static uint64_t path_hash(uint32_t parent, uint32_t sym)
{
	uint64_t h = ((uint64_t)parent << 32 | sym) * 0x9e3779b97f4a7c15ull;

	h ^= h >> 32;
	h *= 0xff51afd7ed558ccdull;
	return h ^ h >> 29;
}

static void grow_slots(struct folded *fd)
{
	size_t size = fd->mask ? (fd->mask + 1) * 2 : 1024, i;

	free(fd->slots);
	fd->slots = calloc(size, sizeof(*fd->slots));
	fd->mask = size - 1;
	for (i = 0; i < fd->n; i++) {
		size_t j = path_hash(fd->paths[i].parent, fd->paths[i].sym) & fd->mask;

		while (fd->slots[j])
			j = (j + 1) & fd->mask;
		fd->slots[j] = (uint32_t)i + 1;
	}
}

static uint32_t path_of(struct folded *fd, uint32_t parent, uint32_t sym)
{
	size_t j;

	if ((fd->n + 1) * 2 > fd->mask + 1)
		grow_slots(fd);
	for (j = path_hash(parent, sym) & fd->mask; fd->slots[j]; j = (j + 1) & fd->mask) {
		const struct trace_path *p = &fd->paths[fd->slots[j] - 1];

		if (p->parent == parent && p->sym == sym)
			return fd->slots[j] - 1;
	}
	if (fd->n == fd->cap) {
		fd->cap = fd->cap * 2 + 1024;
		fd->paths = realloc(fd->paths, fd->cap * sizeof(*fd->paths));
		if (!fd->paths)
			abort();
	}
	fd->paths[fd->n] = (struct trace_path){ .parent = parent, .sym = sym };
	fd->slots[j] = (uint32_t)++fd->n;
	return (uint32_t)(fd->n - 1);
}

static void folded_open(struct tree_walk *w, struct tree_frame *f)
{
	struct folded *fd = w->ctx;
	uint32_t parent = w->depth > 1 ? w->stack[w->depth - 2].user : TRACE_NONE;
	uint32_t sym = f->func == TRACE_NONE ? trace_signal_sym(w->trace, f->signo)
					     : w->trace->funcs[f->func].sym;

	f->user = path_of(fd, parent, sym);
	fd->paths[f->user].calls++;
}

/* A call with no time: a path of its own, which no folded line or flame
 * frame shows (they show time), but whose calls pprof counts. */
static void folded_entry_only(struct tree_walk *w, uint32_t func, int64_t time)
{
	struct folded *fd = w->ctx;
	uint32_t parent = w->depth ? w->stack[w->depth - 1].user : TRACE_NONE;
	uint32_t path = path_of(fd, parent, w->trace->funcs[func].sym); /* may move fd->paths */

	(void)time;
	fd->paths[path].calls++;
}

static void folded_close(struct tree_walk *w, struct tree_frame *f, int64_t end, enum tree_end how)
{
	struct folded *fd = w->ctx;

	(void)how;
	fd->paths[f->user].self += end - f->start - f->child_ns;
}

static const struct tree_ops folded_ops = {
	.open = folded_open,
	.close = folded_close,
	.entry_only = folded_entry_only,
};

/* "main;f;g" of path i: its names from the root down. */
static char *path_text(struct trace *t, const struct trace_path *paths, uint32_t i)
{
	size_t len = 0, depth = 0, k;
	uint32_t p, *chain;
	char *s;

	for (p = i; p != TRACE_NONE; p = paths[p].parent, depth++)
		len += strlen(t->syms[paths[p].sym]) + 1;
	chain = malloc(depth * sizeof(*chain) + 1);
	for (p = i, k = depth; p != TRACE_NONE; p = paths[p].parent)
		chain[--k] = paths[p].sym;
	s = malloc(len + 1);
	for (len = 0, k = 0; k < depth; k++) {
		size_t n = strlen(t->syms[chain[k]]);

		if (k)
			s[len++] = ';';
		memcpy(s + len, t->syms[chain[k]], n);
		/* ';' separates frames: inside a name (a demangled C++ name
		 * could, in principle, hold one) it would split the frame. */
		for (char *c = s + len; (c = memchr(c, ';', (size_t)(s + len + n - c))); c++)
			*c = ':';
		len += n;
	}
	s[len] = 0;
	free(chain);
	return s;
}

struct line {
	char *stack;
	int64_t ns;
};

static int by_stack(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->stack, ((const struct line *)b)->stack);
}

int trace_dump_folded(struct trace *t, const char *out)
{
	struct out *o;

	if (!trace_has_exits(t)) { /* every line would be empty */
		trace_say_no_exits(t, "error", "dump --folded");
		return 1;
	}
	o = out_open(out);

	return o ? trace_write_folded(t, o) : 1;
}

size_t trace_collect_paths(struct trace *t, struct trace_path **paths)
{
	struct folded fd = { 0 };
	struct tree_walk w;

	tree_walk_init(&w, t, &folded_ops, &fd);
	tree_walk_all(&w);
	tree_stats_say_lost(t, &w.total); /* no room for it in the folded lines */
	tree_walk_free(&w);
	free(fd.slots);
	*paths = fd.paths;
	return fd.n;
}

int trace_write_folded(struct trace *t, struct out *o)
{
	struct trace_path *paths;
	size_t npaths = trace_collect_paths(t, &paths), n = 0, i;
	struct line *lines = malloc((npaths + 1) * sizeof(*lines));
	int rc;

	for (i = 0; i < npaths; i++)
		if (paths[i].self > 0)
			lines[n++] = (struct line){ path_text(t, paths, (uint32_t)i), paths[i].self };
	qsort(lines, n, sizeof(*lines), by_stack);
	for (i = 0; i < n; i++) {
		out_str(o, lines[i].stack);
		out_char(o, ' ');
		out_i64(o, lines[i].ns);
		out_char(o, '\n');
		free(lines[i].stack);
	}
	rc = out_close(o) ? 1 : 0;
	free(lines);
	free(paths);
	return rc;
}
