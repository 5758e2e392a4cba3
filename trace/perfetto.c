/* SPDX-License-Identifier: MIT */
/*
 * perfetto.c - `ftpad dump --perfetto DIR`: Perfetto's own protobuf trace,
 * which its UI opens at sizes where JSON fails.  Encoded by hand: a Trace
 * is a run of length-delimited TracePackets, each written as soon as it is
 * made.
 *
 * Field numbers, from google/perfetto at ec5d16b14b743ba6063d720956d6d6af6610fd72:
 *   protos/perfetto/trace/trace.proto           Trace.packet = 1
 *   protos/perfetto/trace/trace_packet.proto    TracePacket.timestamp = 8,
 *       trusted_packet_sequence_id = 10, track_event = 11,
 *       track_descriptor = 60
 *   protos/perfetto/trace/track_event/track_descriptor.proto
 *       TrackDescriptor.uuid = 1, name = 2, process = 3, thread = 4,
 *       parent_uuid = 5
 *   protos/perfetto/trace/track_event/process_descriptor.proto
 *       ProcessDescriptor.pid = 1, process_name = 6
 *   protos/perfetto/trace/track_event/thread_descriptor.proto
 *       ThreadDescriptor.pid = 1, tid = 2, thread_name = 5
 *   protos/perfetto/trace/track_event/track_event.proto
 *       TrackEvent.type = 9 (TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2,
 *       TYPE_INSTANT = 3), track_uuid = 11, categories = 22, name = 23
 * tests/trace/test_trace_view.py checks them against `protoc --decode_raw`.
 */
#include <stdlib.h>
#include <string.h>

#include "out.h"
#include "viewers.h"

enum {
	TRACE_PACKET = 1,
	PACKET_TIMESTAMP = 8,
	PACKET_SEQUENCE_ID = 10,
	PACKET_TRACK_EVENT = 11,
	PACKET_TRACK_DESCRIPTOR = 60,
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
	EVENT_TYPE = 9,
	EVENT_TRACK_UUID = 11,
	EVENT_CATEGORIES = 22,
	EVENT_NAME = 23,
	TYPE_SLICE_BEGIN = 1,
	TYPE_SLICE_END = 2,
	TYPE_INSTANT = 3,
};

enum { WIRE_VARINT = 0, WIRE_LEN = 2 };

/* A message being built: nested ones are built first, then copied in
 * with their length. */
struct pb {
	uint8_t *buf;
	size_t len, cap;
};

static void pb_room(struct pb *m, size_t n)
{
	if (m->len + n > m->cap) {
		m->cap = (m->len + n) * 2 + 256;
		m->buf = realloc(m->buf, m->cap);
		if (!m->buf)
			abort();
	}
}

static void pb_varint(struct pb *m, uint64_t v)
{
	pb_room(m, 10);
	while (v >= 0x80) {
		m->buf[m->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	m->buf[m->len++] = (uint8_t)v;
}

static void pb_uint(struct pb *m, unsigned field, uint64_t v)
{
	pb_varint(m, (uint64_t)field << 3 | WIRE_VARINT);
	pb_varint(m, v);
}

static void pb_bytes(struct pb *m, unsigned field, const void *data, size_t n)
{
	pb_varint(m, (uint64_t)field << 3 | WIRE_LEN);
	pb_varint(m, n);
	pb_room(m, n);
	memcpy(m->buf + m->len, data, n);
	m->len += n;
}

static void pb_string(struct pb *m, unsigned field, const char *s)
{
	pb_bytes(m, field, s, strlen(s));
}

static void pb_message(struct pb *m, unsigned field, const struct pb *inner)
{
	pb_bytes(m, field, inner->buf, inner->len);
}

struct perfetto {
	struct out *o;
	struct pb packet, event, inner;
	uint64_t track;   /* the thread's track uuid */
	uint32_t sequence; /* the thread's trusted_packet_sequence_id */
};

/* The packet is done: out it goes as one Trace.packet. */
static void emit_packet(struct perfetto *p)
{
	uint8_t head[11];
	struct pb h = { head, 0, sizeof(head) };

	pb_varint(&h, TRACE_PACKET << 3 | WIRE_LEN);
	pb_varint(&h, p->packet.len);
	out_mem(p->o, (const char *)head, h.len);
	out_mem(p->o, (const char *)p->packet.buf, p->packet.len);
	p->packet.len = 0;
}

static void emit_event(struct perfetto *p, int64_t ns, unsigned type, const char *name,
		       const char *cat)
{
	p->event.len = 0;
	pb_uint(&p->event, EVENT_TYPE, type);
	pb_uint(&p->event, EVENT_TRACK_UUID, p->track);
	if (cat)
		pb_string(&p->event, EVENT_CATEGORIES, cat);
	if (name)
		pb_string(&p->event, EVENT_NAME, name);
	pb_uint(&p->packet, PACKET_TIMESTAMP, ns < 0 ? 0 : (uint64_t)ns);
	pb_uint(&p->packet, PACKET_SEQUENCE_ID, p->sequence);
	pb_message(&p->packet, PACKET_TRACK_EVENT, &p->event);
	emit_packet(p);
}

static void perfetto_open(struct tree_walk *w, struct tree_frame *f)
{
	emit_event(w->ctx, f->start, TYPE_SLICE_BEGIN, trace_frame_name(w->trace, f),
		   f->cut ? "cut_at_start" : trace_frame_cat(f));
}

static void perfetto_close(struct tree_walk *w, struct tree_frame *f, int64_t end, enum tree_end how)
{
	const char *why = how == TREE_UNWOUND ? "unwound" : how == TREE_RUNNING ? "running" : NULL;

	(void)f;
	emit_event(w->ctx, end, TYPE_SLICE_END, NULL, why);
}

static void perfetto_entry_only(struct tree_walk *w, uint32_t func, int64_t time)
{
	const char *name = w->trace->syms[w->trace->funcs[func].sym];

	emit_event(w->ctx, time, TYPE_SLICE_BEGIN, name, "entry_only");
	emit_event(w->ctx, time, TYPE_SLICE_END, NULL, "entry_only");
}

static void perfetto_lost(struct tree_walk *w, uint32_t count, int64_t time)
{
	char name[64];

	if (w->lost_cause)
		snprintf(name, sizeof(name), "LOST %u events: not written (%s)", count,
			 w->lost_cause);
	else
		snprintf(name, sizeof(name), "LOST %u events", count);
	emit_event(w->ctx, time, TYPE_INSTANT, name, "lost");
}

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
	p->event.len = 0;
	pb_uint(&p->event, TRACK_UUID, uuid);
	pb_string(&p->event, TRACK_NAME, im->name);
	pb_message(&p->event, TRACK_PROCESS, &p->inner);
	pb_message(&p->packet, PACKET_TRACK_DESCRIPTOR, &p->event);
	emit_packet(p);
}

static void thread_track(struct perfetto *p, uint64_t uuid, uint64_t parent,
			 const struct trace_image *im, const struct trace_thread *th)
{
	p->inner.len = 0;
	pb_uint(&p->inner, THREAD_PID, im->pid);
	pb_uint(&p->inner, THREAD_TID, th->tid);
	pb_string(&p->inner, THREAD_NAME, th->comm);
	p->event.len = 0;
	pb_uint(&p->event, TRACK_UUID, uuid);
	pb_uint(&p->event, TRACK_PARENT_UUID, parent);
	pb_message(&p->event, TRACK_THREAD, &p->inner);
	pb_message(&p->packet, PACKET_TRACK_DESCRIPTOR, &p->event);
	emit_packet(p);
}

int trace_dump_perfetto(struct trace *t, const char *path)
{
	struct perfetto p = { .o = out_open(path) };
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
			p.track = process | (j + 1);
			p.sequence++;
			thread_track(&p, p.track, process, im, &im->threads[j]);
			tree_walk_thread(&w, im, &im->threads[j]);
		}
	}
	tree_walk_free(&w);
	rc = out_close(p.o) ? 1 : 0;
	free(p.packet.buf);
	free(p.event.buf);
	free(p.inner.buf);
	return rc;
}
