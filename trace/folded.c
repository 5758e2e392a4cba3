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

/* A call path: (parent path, symbol), found through a hash table. */
struct path {
	uint32_t parent; /* TRACE_NONE at a thread's root */
	uint32_t sym;
	int64_t self;
};

struct folded {
	struct path *paths;
	size_t n, cap;
	uint32_t *slots; /* path index + 1 */
	size_t mask;
	struct out *o;
};

static uint64_t path_hash(uint32_t parent, uint32_t sym)
{
	return ((uint64_t)parent << 32 | sym) * 0x9e3779b97f4a7c15ull >> 17;
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
		const struct path *p = &fd->paths[fd->slots[j] - 1];

		if (p->parent == parent && p->sym == sym)
			return fd->slots[j] - 1;
	}
	if (fd->n == fd->cap) {
		fd->cap = fd->cap * 2 + 1024;
		fd->paths = realloc(fd->paths, fd->cap * sizeof(*fd->paths));
		if (!fd->paths)
			abort();
	}
	fd->paths[fd->n] = (struct path){ .parent = parent, .sym = sym };
	fd->slots[j] = (uint32_t)++fd->n;
	return (uint32_t)(fd->n - 1);
}

static void folded_open(struct tree_walk *w, struct tree_frame *f)
{
	uint32_t parent = w->depth > 1 ? w->stack[w->depth - 2].user : TRACE_NONE;
	uint32_t sym = f->func == TRACE_NONE ? trace_signal_sym(w->trace, f->signo)
					     : w->trace->funcs[f->func].sym;

	f->user = path_of(w->ctx, parent, sym);
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
};

/* "main;f;g" of path i: its names from the root down. */
static char *path_text(struct trace *t, const struct folded *fd, uint32_t i)
{
	size_t len = 0, depth = 0, k;
	uint32_t p, *chain;
	char *s;

	for (p = i; p != TRACE_NONE; p = fd->paths[p].parent, depth++)
		len += strlen(t->syms[fd->paths[p].sym]) + 1;
	chain = malloc(depth * sizeof(*chain) + 1);
	for (p = i, k = depth; p != TRACE_NONE; p = fd->paths[p].parent)
		chain[--k] = fd->paths[p].sym;
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
	struct out *o = out_open(out);

	return o ? trace_write_folded(t, o) : 1;
}

int trace_write_folded(struct trace *t, struct out *o)
{
	struct folded fd = { .o = o };
	struct tree_walk w;
	struct line *lines;
	size_t n = 0, i;
	int rc;

	tree_walk_init(&w, t, &folded_ops, &fd);
	tree_walk_all(&w);
	tree_walk_free(&w);
	lines = malloc((fd.n + 1) * sizeof(*lines));
	for (i = 0; i < fd.n; i++)
		if (fd.paths[i].self > 0)
			lines[n++] = (struct line){ path_text(t, &fd, (uint32_t)i), fd.paths[i].self };
	qsort(lines, n, sizeof(*lines), by_stack);
	for (i = 0; i < n; i++) {
		out_str(fd.o, lines[i].stack);
		out_char(fd.o, ' ');
		out_i64(fd.o, lines[i].ns);
		out_char(fd.o, '\n');
		free(lines[i].stack);
	}
	rc = out_close(fd.o) ? 1 : 0;
	free(lines);
	free(fd.paths);
	free(fd.slots);
	return rc;
}
