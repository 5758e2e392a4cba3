/* SPDX-License-Identifier: MIT */
/*
 * pb.h - writing protocol buffers by hand, for the dumps whose formats are
 * protobuf (perfetto.c, pprof.c): varints and length-delimited fields into
 * a growing buffer.  A nested message is built in a buffer of its own,
 * then copied in with its length.  Out of memory aborts, as the walk's
 * own tables do.
 */
#ifndef FTPAD_TRACE_PB_H
#define FTPAD_TRACE_PB_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { PB_WIRE_VARINT = 0, PB_WIRE_LEN = 2 };

struct pb {
	uint8_t *buf;
	size_t len, cap;
};

static inline void pb_room(struct pb *m, size_t n)
{
	if (m->len + n > m->cap) {
		m->cap = (m->len + n) * 2 + 256;
		m->buf = realloc(m->buf, m->cap);
		if (!m->buf)
			abort();
	}
}

/* v as a varint at p, which has room for 10 bytes; returns the end. */
static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline void pb_varint(struct pb *m, uint64_t v)
{
	pb_room(m, 10);
	m->len = (size_t)(put_varint(m->buf + m->len, v) - m->buf);
}

static inline void pb_uint(struct pb *m, unsigned field, uint64_t v)
{
	pb_varint(m, (uint64_t)field << 3 | PB_WIRE_VARINT);
	pb_varint(m, v);
}

static inline void pb_bytes(struct pb *m, unsigned field, const void *data, size_t n)
{
	pb_varint(m, (uint64_t)field << 3 | PB_WIRE_LEN);
	pb_varint(m, n);
	pb_room(m, n);
	memcpy(m->buf + m->len, data, n);
	m->len += n;
}

static inline void pb_string(struct pb *m, unsigned field, const char *s)
{
	pb_bytes(m, field, s, strlen(s));
}

/* inner, done, as field `field` of m; inner is emptied for the next one. */
static inline void pb_message(struct pb *m, unsigned field, struct pb *inner)
{
	pb_bytes(m, field, inner->buf, inner->len);
	inner->len = 0;
}

#endif
