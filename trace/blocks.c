/* SPDX-License-Identifier: MIT */
/*
 * blocks.c - version 2's blocks decoded (blocks.h): every block's header
 * checked first, which gives the number of events and where a file cut
 * short ends, then, one block at a time, its columns, from its zstd frame,
 * into struct ftpad_events: a block's worth of memory, however large the
 * file.  Nothing in a block is trusted: a length that
 * points outside it, a column that ends early or late, a frame that
 * decodes to another size are errors, never a read out of bounds.
 */
#include "blocks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FTPAD_HAVE_ZSTD
#define FTPAD_HAVE_ZSTD 1
#endif
#if FTPAD_HAVE_ZSTD
#include <zstd.h>
#endif

#define HEADER_OFFSET sizeof(struct ftpad_trace_thread_header)
/* Zero bytes after the columns: a varint never reads past them. */
#define PAD 32

static int fail(char *why, size_t size, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t size, size_t at, const char *fmt, ...)
{
	int n = snprintf(why, size, "block at byte %zu: ", at + HEADER_OFFSET);
	va_list ap;

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < size)
		vsnprintf(why + n, size - n, fmt, ap);
	va_end(ap);
	return -1;
}

/* The header at body + at checked: 0, or -1 with why. */
static int check_block(const struct ftpad_trace_block *h, size_t at, char *why, size_t size)
{
	uint64_t ev = h->events, raw = h->raw_size;

	if (memcmp(h->magic, FTPAD_TRACE_BLOCK_MAGIC, sizeof(h->magic)))
		return fail(why, size, at, "no block here (no FBLK magic)");
	if (h->coding != FTPAD_TRACE_BLOCK_VARINT && h->coding != FTPAD_TRACE_BLOCK_ZSTD)
		return fail(why, size, at, "unknown coding %u", h->coding);
	if (!ev || ev > FTPAD_TRACE_BLOCK_EVENTS_MAX)
		return fail(why, size, at, "%llu events, want 1 to %u",
			    (unsigned long long)ev, FTPAD_TRACE_BLOCK_EVENTS_MAX);
	/* Each event takes 1 to 10 bytes of time, 1 to 5 of what and of sp. */
	if (raw < 3 * ev || raw > ev * FTPAD_TRACE_BLOCK_EVENT_MAX_BYTES ||
	    h->time_size < ev || h->time_size > 10 * ev || h->what_size < ev ||
	    h->what_size > 5 * ev || raw - h->time_size - h->what_size < ev ||
	    (uint64_t)h->time_size + h->what_size > raw)
		return fail(why, size, at, "column sizes do not fit %llu events in %llu bytes",
			    (unsigned long long)ev, (unsigned long long)raw);
	if (h->coding == FTPAD_TRACE_BLOCK_VARINT && h->size != h->raw_size)
		return fail(why, size, at, "%u bytes of varint-coded data, want %u", h->size,
			    h->raw_size);
	/* So a size spoiled upwards is not taken for a block cut short. */
	if (h->coding == FTPAD_TRACE_BLOCK_ZSTD && (!h->size || h->size >= h->raw_size))
		return fail(why, size, at, "a zstd frame of %u bytes for %u bytes of columns",
			    h->size, h->raw_size);
	return 0;
}

/* Where the whole blocks end, and their events: 0, or -1 with why. */
static int walk_blocks(const uint8_t *body, size_t len, struct trace_blocks *out, char *why,
		       size_t size)
{
	size_t at = 0;

	while (len - at >= sizeof(struct ftpad_trace_block)) {
		struct ftpad_trace_block h;

		memcpy(&h, body + at, sizeof(h));
		if (check_block(&h, at, why, size))
			return -1;
		if (h.size > len - at - sizeof(h))
			break; /* cut short */
		at += sizeof(h) + h.size;
		out->nevents += h.events;
		out->max_raw = h.raw_size > out->max_raw ? h.raw_size : out->max_raw;
		out->max_events = h.events > out->max_events ? h.events : out->max_events;
		out->nblocks++;
	}
	/* A piece too short for a header: cut short, if it starts as one. */
	if (len - at < sizeof(struct ftpad_trace_block) &&
	    memcmp(body + at, FTPAD_TRACE_BLOCK_MAGIC,
		   len - at < 4 ? len - at : 4))
		return fail(why, size, at, "no block here (no FBLK magic)");
	out->whole = at;
	return 0;
}

/* The block's columns into raw (raw_size + PAD bytes): 0 or -1. */
static int unpack(const struct ftpad_trace_block *h, const uint8_t *data, uint8_t *raw,
		  void *dctx, size_t at, char *why, size_t size)
{
	if (h->coding == FTPAD_TRACE_BLOCK_VARINT) {
		memcpy(raw, data, h->raw_size);
	} else {
#if FTPAD_HAVE_ZSTD
		size_t n = ZSTD_decompressDCtx(dctx, raw, h->raw_size, data, h->size);

		if (ZSTD_isError(n)) {
			snprintf(why, size, "block at byte %zu: zstd: %s", at + HEADER_OFFSET,
				 ZSTD_getErrorName(n));
			return -1;
		}
		if (n != h->raw_size)
			return fail(why, size, at, "its zstd frame holds %zu bytes, want %u", n,
				    h->raw_size);
#else
		(void)data, (void)dctx;
		return fail(why, size, at,
			    "zstd-coded, and this ftpad was built without libzstd");
#endif
	}
	memset(raw + h->raw_size, 0, PAD);
	return 0;
}

/* One varint of at most max (5 or 10) bytes at p; the byte after it.  Up
 * to four bytes unrolled: site ids below 2^24, sp steps below 64 MiB and
 * time steps below 2^27 ticks (about 50 ms) take no more, so almost every
 * field of a trace. */
static inline const uint8_t *get_varint(const uint8_t *p, uint64_t *v, int max)
{
	uint64_t x = p[0], b;
	int shift = 28;

	if (__builtin_expect(x < 0x80, 1)) {
		*v = x;
		return p + 1;
	}
	x &= 0x7f;
	if ((b = p[1]) < 0x80) {
		*v = x | b << 7;
		return p + 2;
	}
	x |= (b & 0x7f) << 7;
	if ((b = p[2]) < 0x80) {
		*v = x | b << 14;
		return p + 3;
	}
	x |= (b & 0x7f) << 14;
	if ((b = p[3]) < 0x80) {
		*v = x | b << 21;
		return p + 4;
	}
	x |= (b & 0x7f) << 21;
	for (p += 4, max -= 4; max-- > 0; shift += 7) {
		b = *p++;
		x |= (b & 0x7f) << shift;
		if (b < 0x80)
			break;
	}
	*v = x;
	return p;
}

/* The three columns of raw into ev: 0, or -1 when one does not hold
 * exactly `events` varints. */
static int columns(const struct ftpad_trace_block *h, const uint8_t *raw,
		   struct ftpad_event *ev, size_t at, char *why, size_t size)
{
	const uint8_t *p = raw, *end = raw + h->time_size;
	uint64_t v, time = h->first_time;
	uint32_t sp = 0;

	for (uint32_t i = 0; i < h->events; i++) {
		p = get_varint(p, &v, 10);
		time += (v >> 1) ^ -(v & 1);
		ev[i].time = time;
	}
	if (p != end)
		return fail(why, size, at, "its time column ends at %td bytes, not %u", p - raw,
			    h->time_size);
	end += h->what_size;
	for (uint32_t i = 0; i < h->events; i++) {
		p = get_varint(p, &v, 5);
		ev[i].what = (uint32_t)(v >> 4 | v << FTPAD_EVENT_SITE_BITS);
	}
	if (p != end)
		return fail(why, size, at, "its what column ends at %td bytes, not %td", p - raw,
			    end - raw);
	end = raw + h->raw_size;
	for (uint32_t i = 0; i < h->events; i++) {
		p = get_varint(p, &v, 5);
		sp += (uint32_t)((v >> 1) ^ -(v & 1));
		ev[i].sp = sp;
	}
	if (p != end)
		return fail(why, size, at, "its sp column ends at %td bytes, not %u", p - raw,
			    h->raw_size);
	return 0;
}

int trace_blocks_scan(const uint8_t *body, size_t len, struct trace_blocks *out, char *why,
		      size_t why_size)
{
	memset(out, 0, sizeof(*out));
	return walk_blocks(body, len, out, why, why_size);
}

int trace_block_reader_open(struct trace_block_reader *r, const uint8_t *body,
			    const struct trace_blocks *b)
{
	memset(r, 0, sizeof(*r));
	r->body = body;
	r->whole = b->whole;
	r->raw = malloc(b->max_raw + PAD);
	r->ev = malloc((b->max_events ? b->max_events : 1) * sizeof(*r->ev));
#if FTPAD_HAVE_ZSTD
	r->dctx = ZSTD_createDCtx();
#endif
	if (!r->raw || !r->ev || (FTPAD_HAVE_ZSTD && !r->dctx)) {
		trace_block_reader_close(r);
		return -1;
	}
	return 0;
}

long trace_block_read(struct trace_block_reader *r, char *why, size_t why_size)
{
	struct ftpad_trace_block h;
	size_t at = r->at;

	if (at >= r->whole)
		return 0;
	memcpy(&h, r->body + at, sizeof(h));
	if (unpack(&h, r->body + at + sizeof(h), r->raw, r->dctx, at, why, why_size) ||
	    columns(&h, r->raw, r->ev, at, why, why_size))
		return -1;
	r->at = at + sizeof(h) + h.size;
	return h.events;
}

void trace_block_reader_close(struct trace_block_reader *r)
{
#if FTPAD_HAVE_ZSTD
	ZSTD_freeDCtx(r->dctx);
#endif
	free(r->raw);
	free(r->ev);
	memset(r, 0, sizeof(*r));
}
