/* SPDX-License-Identifier: MIT */
/*
 * chrome.c - `ftpad dump --chrome DIR`: the Trace Event Format (JSON
 * object form) that chrome://tracing, the Perfetto UI and speedscope open.
 * A frame is a B event and an E event on its thread ("ts" in microseconds
 * from the trace's first event, with nanosecond decimals); an entry-only
 * call is a B and an E at the same time; process_name and thread_name
 * metadata name the tracks.  One event a line, in each thread's order.
 */
#include <inttypes.h>

#include "out.h"
#include "viewers.h"

struct chrome {
	struct out *o;
	const char *sep; /* "" before the first event, then ",\n" */
	char pid_tid[48]; /* ,"pid":P,"tid":T} */
};

static void event_head(struct chrome *c, struct trace *t, const char *name, const char *cat,
		       char ph, int64_t ns)
{
	out_str(c->o, c->sep);
	out_str(c->o, "{\"name\":");
	out_json_str(c->o, name);
	c->sep = ",\n";
	out_str(c->o, ",\"cat\":\"");
	out_str(c->o, cat);
	out_str(c->o, "\",\"ph\":\"");
	out_char(c->o, ph);
	out_str(c->o, "\",\"ts\":");
	out_us(c->o, ns - t->first_ns);
}

static void chrome_open(struct tree_walk *w, struct tree_frame *f)
{
	struct chrome *c = w->ctx;

	event_head(c, w->trace, trace_frame_name(w->trace, f), trace_frame_cat(f), 'B', f->start);
	out_str(c->o, c->pid_tid);
}

static void chrome_close(struct tree_walk *w, struct tree_frame *f, int64_t end, enum tree_end how)
{
	struct chrome *c = w->ctx;

	event_head(c, w->trace, trace_frame_name(w->trace, f), trace_frame_cat(f), 'E', end);
	if (how == TREE_UNWOUND)
		out_str(c->o, ",\"args\":{\"unwound\":true}");
	else if (how == TREE_RUNNING)
		out_str(c->o, ",\"args\":{\"running\":true}");
	else if (how == TREE_TAIL_EXITED)
		out_str(c->o, ",\"args\":{\"tail_call\":true}");
	out_str(c->o, c->pid_tid);
}

static void chrome_entry_only(struct tree_walk *w, uint32_t func, int64_t time)
{
	struct chrome *c = w->ctx;
	const char *name = w->trace->syms[w->trace->funcs[func].sym];

	event_head(c, w->trace, name, "entry_only", 'B', time);
	out_str(c->o, c->pid_tid);
	event_head(c, w->trace, name, "entry_only", 'E', time);
	out_str(c->o, ",\"args\":{\"entry_only\":true}");
	out_str(c->o, c->pid_tid);
}

static void chrome_lost(struct tree_walk *w, uint32_t count, int64_t time)
{
	struct chrome *c = w->ctx;

	event_head(c, w->trace, "LOST", "lost", 'i', time);
	out_str(c->o, ",\"s\":\"t\",\"args\":{\"events\":");
	out_u64(c->o, count);
	if (w->lost_cause) { /* an errno name: nothing to escape */
		out_str(c->o, ",\"not_written\":\"");
		out_str(c->o, w->lost_cause);
		out_char(c->o, '"');
	} else { /* a fixed text: nothing to escape either */
		out_str(c->o, ",\"cause\":\"");
		out_str(c->o, tree_lost_text(w->lost_why));
		out_char(c->o, '"');
	}
	out_char(c->o, '}');
	out_str(c->o, c->pid_tid);
}

static const struct tree_ops chrome_ops = {
	.open = chrome_open,
	.close = chrome_close,
	.entry_only = chrome_entry_only,
	.lost = chrome_lost,
};

static void metadata(struct chrome *c, const char *what, uint32_t pid, uint32_t tid,
		     const char *name)
{
	struct out *o = c->o;

	out_str(o, c->sep);
	c->sep = ",\n";
	out_str(o, "{\"name\":\"");
	out_str(o, what);
	out_str(o, "\",\"ph\":\"M\",\"pid\":");
	out_u64(o, pid);
	out_str(o, ",\"tid\":");
	out_u64(o, tid);
	out_str(o, ",\"args\":{\"name\":");
	out_json_str(o, name);
	out_str(o, "}}");
}

int trace_dump_chrome(struct trace *t, const char *path)
{
	struct chrome c = { .o = out_open(path), .sep = "" };
	struct tree_walk w;
	size_t i, j;

	if (!c.o)
		return 1;
	tree_walk_init(&w, t, &chrome_ops, &c);
	out_str(c.o, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"tool\":\"ftpad\"},\n"
		     "\"traceEvents\":[\n");
	for (i = 0; i < t->nimages; i++) {
		const struct trace_image *im = &t->images[i];

		metadata(&c, "process_name", im->pid, im->pid, im->exe ? im->exe : im->name);
		for (j = 0; j < im->nthreads; j++) {
			const struct trace_thread *th = &im->threads[j];

			metadata(&c, "thread_name", im->pid, th->tid, th->comm);
			snprintf(c.pid_tid, sizeof(c.pid_tid), ",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32 "}",
				 im->pid, th->tid);
			tree_walk_thread(&w, im, th);
		}
	}
	out_str(c.o, "\n]}\n");
	tree_stats_say_lost(t, &w.total);
	tree_walk_free(&w);
	return out_close(c.o) ? 1 : 0;
}
