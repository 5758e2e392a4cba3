/* SPDX-License-Identifier: MIT */
/*
 * replay.c - `ftpad replay DIR`: each thread's call tree with durations,
 * as `uftrace replay` prints it.  A frame is printed when it is known to
 * be a leaf ("f();" with its duration, at its close) or when its first
 * child appears ("f() {", closed later by "} / * f * /" with the duration),
 * so replay streams: one pass, nothing kept but the open frames.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "out.h"
#include "tree_walk.h"
#include "viewers.h"

/* tree_frame.user: flags, and how many shown frames are open below it. */
#define PENDING 1u /* its "f() {" line is not out yet */
#define SHOWN 2u
#define HIDING 4u  /* it or a frame below it matched -N */
#define VDEPTH_SHIFT 3
#define PREFIX_DEPTH 256
#define NO_TEXT "\0\0\0\0\0\0\0" /* fast_line's texts are read 8 bytes at a time */

struct replay {
	struct out *o;
	uint8_t *only;   /* per sym: -F matched */
	uint8_t *hidden; /* per sym: -N matched */
	int have_only;
	uint32_t *name_len; /* per sym, so that no line needs a strlen */
	uint32_t *name_at;  /* per sym: where its name is in `names` */
	char *names;        /* every name, 16 bytes of slack at the end */
	uint8_t *has_args;  /* per func: a demangled C++ name, "f(int)": no "()" added */
	size_t nfuncs;
	size_t nnames;
	size_t tid_len;
	/* " [  1234] | " and the indentation of up to PREFIX_DEPTH levels:
	 * a line's middle is one copy. */
	char prefix[16 + 2 * PREFIX_DEPTH + 16];
};

static const char blank_duration[] = "          ";

static void line_start(struct replay *r, int64_t dur, int has_dur, uint32_t vdepth)
{
	if (has_dur)
		out_duration(r->o, dur);
	else
		out_mem(r->o, blank_duration, 10);
	if (vdepth <= PREFIX_DEPTH) {
		out_mem(r->o, r->prefix, r->tid_len + 2 * (size_t)vdepth);
	} else {
		out_mem(r->o, r->prefix, r->tid_len);
		out_fill(r->o, ' ', 2 * (size_t)vdepth);
	}
}

/* What follows a function's name in its line: "()" and then TAIL, or TAIL
 * alone after a C++ name with its own "(...)".  Both are 8-byte readable
 * literals, as fast_line wants them. */
#define CALL_TEXT(r, f, tail) \
	(takes_args(r, f) ? tail "\0\0\0\0\0\0\0" : "()" tail "\0\0\0\0\0\0\0")
#define CALL_LEN(r, f, tail) (sizeof(tail) - 1 + (takes_args(r, f) ? 0 : 2))

static inline int takes_args(const struct replay *r, const struct tree_frame *f)
{
	return f->func < r->nfuncs && r->has_args[f->func];
}

static void out_name(struct replay *r, struct trace *t, const struct tree_frame *f)
{
	uint32_t sym = f->func == TRACE_NONE ? TRACE_NONE : t->funcs[f->func].sym;

	if (sym < r->nnames)
		out_mem(r->o, t->syms[sym], r->name_len[sym]);
	else
		out_str(r->o, trace_frame_name(t, f));
}

static uint32_t vdepth_of(const struct tree_frame *f)
{
	return f->user >> VDEPTH_SHIFT;
}

/* A frame's line, "  0.123 us [  1234] |     PRE name SUF", in a few
 * copies; dur < 0 leaves the duration blank.  0 when the line needs the
 * general path (a signal mark, a deep frame, a long duration). */
static inline TREE_INLINE int fast_line(struct replay *r, struct trace *t,
					const struct tree_frame *f, int64_t dur, size_t depth,
					const char *pre, size_t prelen, const char *suf,
					size_t suflen)
{
	uint32_t sym = f->func == TRACE_NONE ? TRACE_NONE : t->funcs[f->func].sym;
	size_t plen = r->tid_len + 2 * depth, nlen;
	char *p;

	if (sym >= r->nnames || depth > PREFIX_DEPTH)
		return 0;
	nlen = r->name_len[sym];
	p = out_room(r->o, 10 + plen + nlen + 64);
	if (dur < 0)
		memset(p, ' ', 10);
	else if (!put_us_duration(p, dur))
		return 0;
	p = copy_padded(p + 10, r->prefix, plen);
	memcpy(p, pre, 8); /* pre and suf: literals of at most 8 */
	p = copy_padded(p + prelen, r->names + r->name_at[sym], nlen);
	memcpy(p, suf, 8);
	r->o->len = (size_t)(p + suflen - r->o->buf);
	return 1;
}

/* The frame below `top` (the top one, or the one under a frame being
 * opened) gets its first child: out goes its "f() {" line. */
static inline TREE_INLINE void open_parent(struct tree_walk *w, size_t top)
{
	struct replay *r = w->ctx;
	struct tree_frame *p;

	if (top < 1)
		return;
	p = &w->stack[top - 1];
	if ((p->user & (PENDING | SHOWN)) != (PENDING | SHOWN))
		return;
	p->user &= ~PENDING;
	if (fast_line(r, w->trace, p, -1, vdepth_of(p) - 1, NO_TEXT, 0, CALL_TEXT(r, p, " {\n"),
		      CALL_LEN(r, p, " {\n")))
		return;
	line_start(r, 0, 0, vdepth_of(p) - 1);
	out_name(r, w->trace, p);
	if (p->func == TRACE_NONE)
		out_mem(r->o, " {\n", 3);
	else
		out_mem(r->o, CALL_TEXT(r, p, " {\n"), CALL_LEN(r, p, " {\n"));
}

static int hides(const struct replay *r, struct trace *t, uint32_t sym)
{
	return r->hidden && sym < t->nsyms && r->hidden[sym];
}

/* Is a new frame of `sym`, above the `top` open frames, shown?  Below a
 * -N frame nothing is; below a shown frame all is; else -F decides. */
static int shown_under_top(struct tree_walk *w, uint32_t sym, size_t top)
{
	struct replay *r = w->ctx;
	const struct tree_frame *p = top ? &w->stack[top - 1] : NULL;

	if ((p && p->user & HIDING) || hides(r, w->trace, sym))
		return 0;
	if (p ? !!(p->user & SHOWN) : !r->have_only)
		return 1;
	return r->only && sym < w->trace->nsyms && r->only[sym];
}

static uint32_t top_vdepth(struct tree_walk *w, size_t top)
{
	return top ? vdepth_of(&w->stack[top - 1]) : 0;
}

static inline TREE_INLINE void replay_open(struct tree_walk *w, struct tree_frame *f)
{
	struct replay *r = w->ctx;
	size_t top = w->depth - 1; /* open frames below f */
	uint32_t sym;
	int shown, hiding;

	if (!r->have_only && !r->hidden) { /* no filter: every frame is shown */
		if (top)
			open_parent(w, top);
		f->user = SHOWN | PENDING | (top_vdepth(w, top) + 1) << VDEPTH_SHIFT;
		return;
	}
	sym = f->func == TRACE_NONE ? TRACE_NONE : w->trace->funcs[f->func].sym;
	shown = shown_under_top(w, sym, top);
	hiding = (top && w->stack[top - 1].user & HIDING) || hides(r, w->trace, sym);

	if (shown)
		open_parent(w, top);
	f->user = (shown ? SHOWN | PENDING : 0) | (hiding ? HIDING : 0) |
		  (top_vdepth(w, top) + (uint32_t)shown) << VDEPTH_SHIFT;
}

static inline TREE_INLINE void replay_close(struct tree_walk *w, struct tree_frame *f, int64_t end,
					      enum tree_end how)
{
	struct replay *r = w->ctx;

	if (!(f->user & SHOWN))
		return;
	if (how != TREE_UNWOUND && how != TREE_RUNNING &&
	    (f->user & PENDING ? fast_line(r, w->trace, f, end - f->start, vdepth_of(f) - 1,
					   NO_TEXT, 0, CALL_TEXT(r, f, ";\n"), CALL_LEN(r, f, ";\n"))
			       : fast_line(r, w->trace, f, end - f->start, vdepth_of(f) - 1,
					   "} /* \0\0\0", 5, " */\n\0\0\0\0", 4)))
		return;
	line_start(r, end - f->start, 1, vdepth_of(f) - 1);
	if (f->user & PENDING) {
		out_name(r, w->trace, f);
		if (f->func == TRACE_NONE)
			out_mem(r->o, " {}", 3);
		else
			out_mem(r->o, CALL_TEXT(r, f, ";"), CALL_LEN(r, f, ";"));
		if (how == TREE_UNWOUND || how == TREE_RUNNING)
			out_str(r->o, how == TREE_UNWOUND ? " /* unwound */" : " /* running */");
	} else {
		out_mem(r->o, "} /* ", 5);
		out_name(r, w->trace, f);
		if (how == TREE_UNWOUND || how == TREE_RUNNING)
			out_str(r->o, how == TREE_UNWOUND ? ", unwound" : ", running");
		out_mem(r->o, " */", 3);
	}
	out_char(r->o, '\n');
}

static void replay_entry_only(struct tree_walk *w, uint32_t func, int64_t time)
{
	struct replay *r = w->ctx;
	uint32_t sym = w->trace->funcs[func].sym;

	(void)time;
	if (!shown_under_top(w, sym, w->depth))
		return;
	open_parent(w, w->depth);
	line_start(r, 0, 0, top_vdepth(w, w->depth));
	out_str(r->o, w->trace->syms[sym]);
	out_str(r->o, r->has_args[func] ? "; /* entry only */\n" : "(); /* entry only */\n");
}

static void replay_lost(struct tree_walk *w, uint32_t count, int64_t time)
{
	struct replay *r = w->ctx;

	(void)time;
	if (w->depth && !(w->stack[w->depth - 1].user & SHOWN))
		return;
	open_parent(w, w->depth);
	line_start(r, 0, 0, top_vdepth(w, w->depth));
	out_str(r->o, "/* LOST ");
	out_u64(r->o, count);
	out_str(r->o, count == 1 ? " event: " : " events: ");
	if (w->lost_cause) {
		out_str(r->o, "not written (");
		out_str(r->o, w->lost_cause);
		out_str(r->o, ") */\n");
	} else {
		out_str(r->o, tree_lost_text(w->lost_why));
		out_str(r->o, " */\n");
	}
}

static const struct tree_ops replay_ops = {
	.open = replay_open,
	.close = replay_close,
	.entry_only = replay_entry_only,
	.lost = replay_lost,
};

/* Per-symbol flags from a list of globs. */
static uint8_t *match_globs(struct trace *t, char **globs, size_t n)
{
	uint8_t *m;
	size_t i, j;

	if (!n)
		return NULL;
	m = calloc(t->nsyms + 1, 1);
	for (i = 0; i < t->nsyms; i++)
		for (j = 0; j < n && !m[i]; j++)
			m[i] = !fnmatch(globs[j], t->syms[i], 0);
	return m;
}

static void thread_heading(struct replay *r, struct trace *t, const struct trace_image *im,
			   const struct trace_thread *th)
{
	(void)t;
	out_str(r->o, "#\n# thread ");
	out_u64(r->o, th->tid);
	out_str(r->o, " (");
	out_str(r->o, th->comm);
	out_str(r->o, ") of ");
	out_str(r->o, im->name);
	if (im->exe) {
		out_str(r->o, " ");
		out_str(r->o, im->exe);
	}
	if (im->forked_from) {
		out_str(r->o, ", forked from ");
		out_str(r->o, im->forked_from);
	}
	if (im->exec_from) {
		out_str(r->o, ", exec from ");
		out_str(r->o, im->exec_from);
	}
	out_char(r->o, '\n');
	r->tid_len = (size_t)snprintf(r->prefix, 16, " [%6u] | ", th->tid);
	memset(r->prefix + r->tid_len, ' ', sizeof(r->prefix) - r->tid_len);
}

static int tid_wanted(const char *tids, uint32_t tid)
{
	char buf[16];
	const char *p;
	size_t n;

	if (!tids)
		return 1;
	n = (size_t)snprintf(buf, sizeof(buf), "%u", tid);
	for (p = tids; (p = strstr(p, buf)); p += n)
		if ((p == tids || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return 1;
	return 0;
}

static const char replay_usage[] =
	"usage: ftpad replay [-F GLOB]... [-N GLOB]... [--tid TID[,TID...]] [--raw-names] [DIR]\n";

int trace_cmd_replay(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "filter", required_argument, NULL, 'F' },
		{ "notrace", required_argument, NULL, 'N' },
		{ "tid", required_argument, NULL, 't' },
		{ "raw-names", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char **only = calloc((size_t)argc, sizeof(char *)), **hide = calloc((size_t)argc, sizeof(char *));
	size_t nonly = 0, nhide = 0, i, j;
	const char *tids = NULL, *dir;
	unsigned open_flags = 0;
	struct replay r = { 0 };
	struct tree_walk w;
	struct trace t;
	char said[1024];
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "F:N:h", longopts, NULL)) != -1) {
		if (c == 'F')
			only[nonly++] = optarg;
		else if (c == 'N')
			hide[nhide++] = optarg;
		else if (c == 't')
			tids = optarg;
		else if (c == 'r')
			open_flags |= TRACE_OPEN_RAW_NAMES;
		else if (c == 'h')
			return fputs(replay_usage, stdout), 0;
		else
			return trace_usage_error("replay: bad option '%s'", argv[optind - 1]);
	}
	dir = trace_dir_arg("replay", argc, argv, &rc);
	if (!dir)
		return rc;
	if (trace_open(&t, dir, open_flags))
		return 1;
	r.o = out_open(NULL);
	r.only = match_globs(&t, only, nonly);
	r.hidden = match_globs(&t, hide, nhide);
	r.have_only = nonly > 0;
	r.nnames = t.nsyms;
	r.name_len = malloc((t.nsyms + 1) * sizeof(*r.name_len));
	r.name_at = malloc((t.nsyms + 1) * sizeof(*r.name_at));
	for (i = 0, j = 0; i < t.nsyms; i++) {
		r.name_len[i] = (uint32_t)strlen(t.syms[i]);
		r.name_at[i] = (uint32_t)j;
		j += r.name_len[i];
	}
	r.names = calloc(j + 16, 1);
	for (i = 0; i < t.nsyms; i++)
		memcpy(r.names + r.name_at[i], t.syms[i], r.name_len[i]);
	r.nfuncs = t.nfuncs;
	r.has_args = malloc(t.nfuncs + 1);
	for (i = 0; i < t.nfuncs; i++)
		r.has_args[i] = strchr(t.syms[t.funcs[i].sym], '(') != NULL;
	tree_walk_init(&w, &t, &replay_ops, &r);
	out_str(r.o, "# DURATION     TID     FUNCTION\n");
	for (i = 0; i < t.nimages; i++)
		for (j = 0; j < t.images[i].nthreads; j++) {
			const struct trace_thread *th = &t.images[i].threads[j];

			if (!tid_wanted(tids, th->tid))
				continue;
			thread_heading(&r, &t, &t.images[i], th);
			tree_walk_thread_with(&w, &t.images[i], th, &replay_ops);
			tree_stats_say(&w.st, said, sizeof(said));
			out_str(r.o, "# ");
			out_str(r.o, said);
			out_char(r.o, '\n');
		}
	rc = out_close(r.o) ? 1 : 0;
	tree_walk_free(&w);
	free(r.only);
	free(r.hidden);
	free(r.name_len);
	free(r.name_at);
	free(r.names);
	free(r.has_args);
	free(only);
	free(hide);
	trace_close(&t);
	return rc;
}
