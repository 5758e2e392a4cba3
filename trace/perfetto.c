/* SPDX-License-Identifier: MIT */
/*
 * perfetto.c - `ftpad dump --perfetto DIR`: Perfetto's own protobuf trace,
 * which its UI opens at sizes where JSON fails.  Encoded by hand and
 * streamed: a Trace is a run of length-delimited TracePackets, each
 * written as soon as it is made, so memory stays the same whatever the
 * trace's length.
 *
 * Small, as Perfetto's own SDK writes it (Perfetto's docs/concepts/clock-sync.md
 * and docs/reference/synthetic-track-event.md):
 *   - each thread is one packet sequence (trusted_packet_sequence_id) and
 *     one track; the sequence's first packet clears its incremental state
 *     and sets its defaults: the thread's track and clock 64;
 *   - clock 64 is sequence-scoped and incremental (a ClockSnapshot ties it
 *     to BOOTTIME), so a packet's timestamp is the nanoseconds since the
 *     sequence's previous one: a byte or two;
 *   - a name is written once a sequence (InternedData.event_names) and
 *     then referred to by its iid, given in order of first use so that the
 *     hot functions get one-byte iids.
 * A function's slice begin is then 12 bytes or less and its end 10 while
 * the steps between events stay under 128 ns and its iid under 128.
 *
 * Field numbers, from google/perfetto at ec5d16b14b743ba6063d720956d6d6af6610fd72,
 * written out as a schema in tests/trace/perfetto/perfetto_trace.proto, which
 * tests/trace/test_perfetto.py decodes this file's output with
 * (protoc --decode=perfetto.protos.Trace).
 */
#include <stdlib.h>
#include <string.h>

#include "out.h"
#include "pb.h"
#include "tree_walk.h"
#include "viewers.h"

enum {
	TRACE_PACKET = 1,
	/* TracePacket */
	PACKET_CLOCK_SNAPSHOT = 6,
	PACKET_TIMESTAMP = 8,
	PACKET_SEQUENCE_ID = 10,
	PACKET_TRACK_EVENT = 11,
	PACKET_INTERNED_DATA = 12,
	PACKET_SEQUENCE_FLAGS = 13,
	PACKET_TIMESTAMP_CLOCK_ID = 58,
	PACKET_DEFAULTS = 59,
	PACKET_TRACK_DESCRIPTOR = 60,
	SEQ_INCREMENTAL_STATE_CLEARED = 1,
	SEQ_NEEDS_INCREMENTAL_STATE = 2,
	/* TracePacketDefaults, TrackEventDefaults */
	DEFAULTS_TIMESTAMP_CLOCK_ID = 58,
	DEFAULTS_TRACK_EVENT = 11,
	EVENT_DEFAULTS_TRACK_UUID = 11,
	/* ClockSnapshot, ClockSnapshot.Clock */
	SNAPSHOT_CLOCKS = 1,
	SNAPSHOT_PRIMARY_TRACE_CLOCK = 2,
	CLOCK_ID = 1,
	CLOCK_TIMESTAMP = 2,
	CLOCK_IS_INCREMENTAL = 3,
	BUILTIN_CLOCK_BOOTTIME = 6,
	/* the first of the sequence-scoped clocks [64, 127] */
	CLOCK_THREAD_DELTAS = 64,
	/* InternedData, EventCategory, EventName */
	INTERNED_EVENT_CATEGORIES = 1,
	INTERNED_EVENT_NAMES = 2,
	INTERNED_IID = 1,
	INTERNED_NAME = 2,
	/* TrackDescriptor, ProcessDescriptor, ThreadDescriptor */
	TRACK_UUID = 1,
	TRACK_NAME = 2,
	TRACK_PROCESS = 3,
	TRACK_THREAD = 4,
	TRACK_PARENT_UUID = 5,
	PROCESS_PID = 1,
	PROCESS_NAME = 6,
	THREAD_PID = 1,
	THREAD_TID = 2,
	THREAD_NAME = 5,
	/* TrackEvent */
	EVENT_CATEGORY_IIDS = 3,
	EVENT_TYPE = 9,
	EVENT_NAME_IID = 10,
	EVENT_NAME = 23,
	TYPE_SLICE_BEGIN = 1,
	TYPE_SLICE_END = 2,
	TYPE_INSTANT = 3,
};

/* The categories of the frames that are not plain function calls, interned
 * at each sequence's start with these iids (a plain call has none: it is
 * the common case, and a category would cost it two bytes). */
enum category { CAT_NONE, CAT_SIGNAL, CAT_ENTRY_ONLY, CAT_LOST, CAT_UNWOUND, CAT_RUNNING, NCATS };
static const char *const category_names[NCATS] = {
	NULL, "signal", "entry_only", "lost", "unwound", "running",
};

/* Where a thread's sequence is: its id, its incremental clock, and which
 * names it has been given (iid_of[sym], valid where seq_of[sym] is this
 * sequence, so that a new sequence needs no clearing). */
struct perfetto {
	struct out *o;
	struct trace *t;
	struct pb packet, msg, inner;
	uint32_t seq;      /* the thread's trusted_packet_sequence_id */
	int64_t clock;     /* clock 64's value: the last timestamp given with it */
	uint32_t next_iid; /* the last iid given in this sequence */
	uint32_t *iid_of, *seq_of;
	size_t nsyms;      /* the room in iid_of and seq_of */
};

/* The packet is done: out it goes as one Trace.packet. */
static void emit_packet(struct perfetto *p)
{
	uint8_t head[11], *h = head;

	*h++ = TRACE_PACKET << 3 | PB_WIRE_LEN;
	h = put_varint(h, p->packet.len);
	out_mem(p->o, (const char *)head, (size_t)(h - head));
	out_mem(p->o, (const char *)p->packet.buf, p->packet.len);
	p->packet.len = 0;
}

/* The packet's timestamp: clock 64's step from its last value; a time
 * before that (a clock that went back between two events) is said
 * absolutely, in BOOTTIME, and leaves clock 64 where it was. */
static inline uint8_t *put_timestamp(struct perfetto *p, uint8_t *q, int64_t ns)
{
	*q++ = PACKET_TIMESTAMP << 3 | PB_WIRE_VARINT;
	if (ns >= p->clock) {
		q = put_varint(q, (uint64_t)(ns - p->clock));
		p->clock = ns;
		return q;
	}
	q = put_varint(q, ns < 0 ? 0 : (uint64_t)ns);
	q = put_varint(q, PACKET_TIMESTAMP_CLOCK_ID << 3 | PB_WIRE_VARINT);
	return put_varint(q, BUILTIN_CLOCK_BOOTTIME);
}

/*
 * A TrackEvent packet on the thread's track: type, the name's iid (0:
 * none) and a category iid (CAT_NONE: none).  Every field here is a
 * varint, so the packet is at most ~60 bytes and its lengths fit a byte:
 * it is built in place, without the struct pb copies.
 */
static inline void emit_event(struct perfetto *p, int64_t ns, unsigned type, uint32_t name_iid,
			      enum category cat)
{
	uint8_t buf[96], *q = buf + 2, *event;

	q = put_timestamp(p, q, ns);
	*q++ = PACKET_SEQUENCE_ID << 3 | PB_WIRE_VARINT;
	q = put_varint(q, p->seq);
	*q++ = PACKET_TRACK_EVENT << 3 | PB_WIRE_LEN;
	event = ++q;
	if (cat != CAT_NONE) {
		*q++ = EVENT_CATEGORY_IIDS << 3 | PB_WIRE_VARINT;
		*q++ = (uint8_t)cat;
	}
	*q++ = EVENT_TYPE << 3 | PB_WIRE_VARINT;
	*q++ = (uint8_t)type;
	if (name_iid) {
		*q++ = EVENT_NAME_IID << 3 | PB_WIRE_VARINT;
		q = put_varint(q, name_iid);
	}
	event[-1] = (uint8_t)(q - event);
	buf[0] = TRACE_PACKET << 3 | PB_WIRE_LEN;
	buf[1] = (uint8_t)(q - buf - 2);
	out_mem(p->o, (const char *)buf, (size_t)(q - buf));
}

/* The sequence's iid for name `sym`, and whether it is new to it (then the
 * packet that first uses it must carry it). */
static inline uint32_t name_iid(struct perfetto *p, uint32_t sym, int *is_new)
{
	if (sym >= p->nsyms) { /* a signal mark's name, interned during the walk */
		size_t n = p->t->nsyms + 64;

		p->iid_of = realloc(p->iid_of, n * sizeof(*p->iid_of));
		p->seq_of = realloc(p->seq_of, n * sizeof(*p->seq_of));
		if (!p->iid_of || !p->seq_of)
			abort();
		memset(p->seq_of + p->nsyms, 0, (n - p->nsyms) * sizeof(*p->seq_of));
		p->nsyms = n;
	}
	*is_new = p->seq_of[sym] != p->seq;
	if (*is_new) {
		p->seq_of[sym] = p->seq;
		p->iid_of[sym] = ++p->next_iid;
	}
	return p->iid_of[sym];
}

/* A slice begin whose name the sequence has not seen: the packet carries
 * it in its InternedData, and so says that it adds to the sequence's
 * state.  (Packets that only use the state do not say so: the flag lets
 * a reader skip them after a lost packet, and a file written whole loses
 * none, so it would only cost two bytes an event.) */
static void emit_begin_new_name(struct perfetto *p, int64_t ns, uint32_t iid, const char *name,
				enum category cat)
{
	uint8_t stamp[32];
	size_t n = (size_t)(put_timestamp(p, stamp, ns) - stamp);

	pb_room(&p->packet, n);
	memcpy(p->packet.buf, stamp, n);
	p->packet.len = n;
	pb_uint(&p->packet, PACKET_SEQUENCE_ID, p->seq);
	p->msg.len = 0;
	if (cat != CAT_NONE)
		pb_uint(&p->msg, EVENT_CATEGORY_IIDS, cat);
	pb_uint(&p->msg, EVENT_TYPE, TYPE_SLICE_BEGIN);
	pb_uint(&p->msg, EVENT_NAME_IID, iid);
	pb_message(&p->packet, PACKET_TRACK_EVENT, &p->msg);
	p->inner.len = 0;
	pb_uint(&p->inner, INTERNED_IID, iid);
	pb_string(&p->inner, INTERNED_NAME, name);
	p->msg.len = 0;
	pb_message(&p->msg, INTERNED_EVENT_NAMES, &p->inner);
	pb_message(&p->packet, PACKET_INTERNED_DATA, &p->msg);
	pb_uint(&p->packet, PACKET_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
	emit_packet(p);
}

static inline void emit_begin(struct perfetto *p, int64_t ns, uint32_t sym, enum category cat)
{
	int is_new;
	uint32_t iid = name_iid(p, sym, &is_new);

	if (__builtin_expect(is_new, 0))
		emit_begin_new_name(p, ns, iid, p->t->syms[sym], cat);
	else
		emit_event(p, ns, TYPE_SLICE_BEGIN, iid, cat);
}

static void perfetto_open(struct tree_walk *w, struct tree_frame *f)
{
	if (f->func == TRACE_NONE)
		emit_begin(w->ctx, f->start, trace_signal_sym(w->trace, f->signo), CAT_SIGNAL);
	else
		emit_begin(w->ctx, f->start, w->trace->funcs[f->func].sym, CAT_NONE);
}

static void perfetto_close(struct tree_walk *w, struct tree_frame *f, int64_t end, enum tree_end how)
{
	enum category cat = how == TREE_UNWOUND ? CAT_UNWOUND
			    : how == TREE_RUNNING ? CAT_RUNNING : CAT_NONE;

	(void)f;
	emit_event(w->ctx, end, TYPE_SLICE_END, 0, cat);
}

static void perfetto_entry_only(struct tree_walk *w, uint32_t func, int64_t time)
{
	emit_begin(w->ctx, time, w->trace->funcs[func].sym, CAT_ENTRY_ONLY);
	emit_event(w->ctx, time, TYPE_SLICE_END, 0, CAT_ENTRY_ONLY);
}

/* An instant with its own name, said in full: rare, and each one differs. */
static void perfetto_lost(struct tree_walk *w, uint32_t count, int64_t time)
{
	struct perfetto *p = w->ctx;
	uint8_t stamp[32];
	size_t n;
	char name[128];

	if (w->lost_cause)
		snprintf(name, sizeof(name), "LOST %u events: not written (%s)", count,
			 w->lost_cause);
	else
		snprintf(name, sizeof(name), "LOST %u events: %s", count,
			 tree_lost_text(w->lost_why));
	n = (size_t)(put_timestamp(p, stamp, time) - stamp);
	pb_room(&p->packet, n);
	memcpy(p->packet.buf, stamp, n);
	p->packet.len = n;
	pb_uint(&p->packet, PACKET_SEQUENCE_ID, p->seq);
	p->msg.len = 0;
	pb_uint(&p->msg, EVENT_CATEGORY_IIDS, CAT_LOST);
	pb_uint(&p->msg, EVENT_TYPE, TYPE_INSTANT);
	pb_string(&p->msg, EVENT_NAME, name);
	pb_message(&p->packet, PACKET_TRACK_EVENT, &p->msg);
	emit_packet(p);
}

/* The ops are called directly from the walk compiled here (its hot loop,
 * inlined: 20 million events a second and more). */
static const struct tree_ops perfetto_ops = {
	.open = perfetto_open,
	.close = perfetto_close,
	.entry_only = perfetto_entry_only,
	.lost = perfetto_lost,
};

static void process_track(struct perfetto *p, uint64_t uuid, const struct trace_image *im)
{
	p->inner.len = 0;
	pb_uint(&p->inner, PROCESS_PID, im->pid);
	pb_string(&p->inner, PROCESS_NAME, im->exe ? im->exe : im->name);
	p->msg.len = 0;
	pb_uint(&p->msg, TRACK_UUID, uuid);
	pb_string(&p->msg, TRACK_NAME, im->name);
	pb_message(&p->msg, TRACK_PROCESS, &p->inner);
	pb_message(&p->packet, PACKET_TRACK_DESCRIPTOR, &p->msg);
	emit_packet(p);
}

static void thread_track(struct perfetto *p, uint64_t uuid, uint64_t parent,
			 const struct trace_image *im, const struct trace_thread *th)
{
	p->inner.len = 0;
	pb_uint(&p->inner, THREAD_PID, im->pid);
	pb_uint(&p->inner, THREAD_TID, th->tid);
	pb_string(&p->inner, THREAD_NAME, th->comm);
	p->msg.len = 0;
	pb_uint(&p->msg, TRACK_UUID, uuid);
	pb_uint(&p->msg, TRACK_PARENT_UUID, parent);
	pb_message(&p->msg, TRACK_THREAD, &p->inner);
	pb_message(&p->packet, PACKET_TRACK_DESCRIPTOR, &p->msg);
	emit_packet(p);
}

/* The sequence's first packet: its state cleared, its defaults (the
 * thread's track, clock 64) and its categories. */
static void sequence_defaults(struct perfetto *p, uint64_t track)
{
	pb_uint(&p->packet, PACKET_SEQUENCE_ID, p->seq);
	pb_uint(&p->packet, PACKET_SEQUENCE_FLAGS,
		SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE);
	p->inner.len = 0;
	pb_uint(&p->inner, EVENT_DEFAULTS_TRACK_UUID, track);
	p->msg.len = 0;
	pb_uint(&p->msg, DEFAULTS_TIMESTAMP_CLOCK_ID, CLOCK_THREAD_DELTAS);
	pb_message(&p->msg, DEFAULTS_TRACK_EVENT, &p->inner);
	pb_message(&p->packet, PACKET_DEFAULTS, &p->msg);
	p->msg.len = 0;
	for (unsigned c = CAT_NONE + 1; c < NCATS; c++) {
		p->inner.len = 0;
		pb_uint(&p->inner, INTERNED_IID, c);
		pb_string(&p->inner, INTERNED_NAME, category_names[c]);
		pb_message(&p->msg, INTERNED_EVENT_CATEGORIES, &p->inner);
	}
	pb_message(&p->packet, PACKET_INTERNED_DATA, &p->msg);
	emit_packet(p);
}

static void snapshot_clock(struct pb *m, struct pb *clock, uint32_t id, uint64_t ns, int incremental)
{
	clock->len = 0;
	pb_uint(clock, CLOCK_ID, id);
	pb_uint(clock, CLOCK_TIMESTAMP, ns);
	if (incremental)
		pb_uint(clock, CLOCK_IS_INCREMENTAL, 1);
	pb_message(m, SNAPSHOT_CLOCKS, clock);
}

/* Clock 64 and BOOTTIME both read 0 at the sequence's start: its first
 * timestamp is a whole one, and the rest are steps.  (Its own packet: a
 * reader takes a ClockSnapshot packet for that alone.) */
static void sequence_clock(struct perfetto *p)
{
	p->clock = 0;
	pb_uint(&p->packet, PACKET_SEQUENCE_ID, p->seq);
	p->msg.len = 0;
	snapshot_clock(&p->msg, &p->inner, CLOCK_THREAD_DELTAS, (uint64_t)p->clock, 1);
	snapshot_clock(&p->msg, &p->inner, BUILTIN_CLOCK_BOOTTIME, (uint64_t)p->clock, 0);
	/* the trace's time is BOOTTIME's, the one an older ftpad's timestamps
	 * (no clock id) were in: the same numbers in the UI */
	pb_uint(&p->msg, SNAPSHOT_PRIMARY_TRACE_CLOCK, BUILTIN_CLOCK_BOOTTIME);
	pb_message(&p->packet, PACKET_CLOCK_SNAPSHOT, &p->msg);
	emit_packet(p);
}

static void start_sequence(struct perfetto *p, uint64_t track)
{
	p->seq++;
	p->next_iid = 0;
	sequence_defaults(p, track);
	sequence_clock(p);
}

int trace_dump_perfetto(struct trace *t, const char *path)
{
	struct perfetto p = { .o = out_open(path), .t = t };
	struct tree_walk w;
	size_t i, j;
	int rc;

	if (!p.o)
		return 1;
	tree_walk_init(&w, t, &perfetto_ops, &p);
	for (i = 0; i < t->nimages; i++) {
		const struct trace_image *im = &t->images[i];
		/* uuids from the reader's order: the same trace, the same bytes. */
		uint64_t process = (uint64_t)(i + 1) << 32;

		process_track(&p, process, im);
		for (j = 0; j < im->nthreads; j++) {
			uint64_t track = process | (j + 1);

			thread_track(&p, track, process, im, &im->threads[j]);
			start_sequence(&p, track);
			tree_walk_thread_with(&w, im, &im->threads[j], &perfetto_ops);
		}
	}
	tree_stats_say_lost(t, &w.total);
	tree_walk_free(&w);
	rc = out_close(p.o) ? 1 : 0;
	free(p.packet.buf);
	free(p.msg.buf);
	free(p.inner.buf);
	free(p.iid_of);
	free(p.seq_of);
	return rc;
}
