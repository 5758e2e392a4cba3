/* SPDX-License-Identifier: MIT */
/*
 * record_encode.c - events into version 2's blocks (record_encode.h).
 * The columns, then one zstd frame of them, compressed by a context made
 * afresh in the workspace for each block: no allocation, and nothing left
 * half done by a block that a fork or a signal cut short can spoil the
 * next one.
 */
#include "record_encode.h"

#include <string.h>

#ifndef FTPAD_HAVE_ZSTD
#define FTPAD_HAVE_ZSTD 1
#endif
#if FTPAD_HAVE_ZSTD
#define ZSTD_STATIC_LINKING_ONLY /* the static context: ZSTD_initStaticCCtx() */
#include <zstd.h>
#endif

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static size_t raw_bound(size_t max_events)
{
	return max_events * FTPAD_TRACE_BLOCK_EVENT_MAX_BYTES;
}

static size_t zstd_workspace(size_t max_events, int level)
{
#if FTPAD_HAVE_ZSTD
	return ZSTD_estimateCCtxSize_usingCParams(ZSTD_getCParams(level, raw_bound(max_events), 0));
#else
	(void)max_events, (void)level;
	return 0;
#endif
}

static size_t out_bound(size_t max_events)
{
	size_t raw = raw_bound(max_events);
#if FTPAD_HAVE_ZSTD
	size_t z = ZSTD_compressBound(raw);

	raw = z > raw ? z : raw;
#endif
	return sizeof(struct ftpad_trace_block) + raw;
}

size_t ftpad_block_encoder_size(size_t max_events, int level)
{
	return align8(raw_bound(max_events)) + align8(out_bound(max_events)) +
	       zstd_workspace(max_events, level);
}

int ftpad_block_encoder_init(struct ftpad_block_encoder *e, void *mem, size_t size,
			     size_t max_events, int level)
{
	size_t plain = align8(raw_bound(max_events)) + align8(out_bound(max_events));

	if (!max_events || max_events > FTPAD_TRACE_BLOCK_EVENTS_MAX || size < plain)
		return -1;
	*e = (struct ftpad_block_encoder){
		.max_events = max_events,
		.level = level,
		.raw = mem,
		.out = (uint8_t *)mem + align8(raw_bound(max_events)),
		.out_size = out_bound(max_events),
	};
	if (FTPAD_HAVE_ZSTD && size - plain >= zstd_workspace(max_events, level)) {
		e->zstd = (uint8_t *)mem + plain;
		e->zstd_size = size - plain;
	}
	return 0;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)v | 0x80;
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static uint64_t zigzag64(int64_t d)
{
	return (uint64_t)d << 1 ^ (uint64_t)(d >> 63);
}

static uint32_t zigzag32(int32_t d)
{
	return (uint32_t)d << 1 ^ (uint32_t)(d >> 31);
}

/* The three columns of n events in e->raw, one after the other; their
 * sizes in h. */
static void put_columns(struct ftpad_block_encoder *e, const struct ftpad_event *ev, size_t n,
			struct ftpad_trace_block *h)
{
	uint8_t *p = e->raw;
	uint64_t time = ev[0].time;
	uint32_t sp = 0;

	for (size_t i = 0; i < n; i++) {
		p = put_varint(p, zigzag64((int64_t)(ev[i].time - time)));
		time = ev[i].time;
	}
	h->time_size = (uint32_t)(p - e->raw);
	for (size_t i = 0; i < n; i++)
		p = put_varint(p, ev[i].what << 4 | ev[i].what >> FTPAD_EVENT_SITE_BITS);
	h->what_size = (uint32_t)(p - e->raw) - h->time_size;
	for (size_t i = 0; i < n; i++) {
		p = put_varint(p, zigzag32((int32_t)(ev[i].sp - sp)));
		sp = ev[i].sp;
	}
	h->raw_size = (uint32_t)(p - e->raw);
}

/* The columns compressed into dst (cap bytes): the frame's size, or 0
 * when zstd cannot or would not make them smaller. */
static size_t compress(struct ftpad_block_encoder *e, uint8_t *dst, size_t cap, size_t raw)
{
#if FTPAD_HAVE_ZSTD
	ZSTD_CCtx *cctx = e->zstd && !e->plain ? ZSTD_initStaticCCtx(e->zstd, e->zstd_size)
					       : NULL;
	size_t z;

	if (!cctx || ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, e->level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)))
		return 0;
	z = ZSTD_compress2(cctx, dst, cap, e->raw, raw);
	return ZSTD_isError(z) || z >= raw ? 0 : z;
#else
	(void)e, (void)dst, (void)cap, (void)raw;
	return 0;
#endif
}

size_t ftpad_block_encode(struct ftpad_block_encoder *e, const struct ftpad_event *ev, size_t n)
{
	struct ftpad_trace_block h = {
		.magic = FTPAD_TRACE_BLOCK_MAGIC,
		.events = (uint32_t)n,
		.first_time = ev[0].time,
	};
	uint8_t *data = e->out + sizeof(h);
	size_t z;

	put_columns(e, ev, n, &h);
	z = compress(e, data, e->out_size - sizeof(h), h.raw_size);
	if (z) {
		h.coding = FTPAD_TRACE_BLOCK_ZSTD;
		h.size = (uint32_t)z;
	} else {
		h.coding = FTPAD_TRACE_BLOCK_VARINT;
		h.size = h.raw_size;
		memcpy(data, e->raw, h.raw_size);
	}
	memcpy(e->out, &h, sizeof(h));
	return sizeof(h) + h.size;
}
