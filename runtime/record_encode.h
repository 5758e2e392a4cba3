/* SPDX-License-Identifier: MIT */
/*
 * record_encode.h - events into version 2's blocks (<ftpad_trace.h>
 * "Version 2's events"), for the recorder's writer and for tools that
 * write traces (bench/trace_gen.c, the tests').  Depends on nothing of the
 * runtime: plain C, and libzstd where FTPAD_HAVE_ZSTD is 1.
 *
 * All the memory is given at the start (ftpad_block_encoder_init()): an
 * encode allocates nothing and takes no lock, so that the recorder may
 * flush from a signal handler.  One encode at a time per encoder.
 */
#ifndef FTPAD_RUNTIME_RECORD_ENCODE_H
#define FTPAD_RUNTIME_RECORD_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "ftpad_trace.h"

struct ftpad_block_encoder {
	size_t max_events; /* the most events a block takes */
	int level;         /* zstd's; the block is zstd-coded unless no libzstd */
	uint8_t *raw;      /* the columns: max_events * 20 bytes */
	uint8_t *out;      /* the block: header and data */
	size_t out_size;
	void *zstd;        /* workspace for the compressor, NULL without one */
	int plain;         /* 1: the varint columns only, no zstd (its caller is
			    * short of time: a writer falling behind) */
	size_t zstd_size;
};

/* Bytes of memory an encoder of blocks of max_events events at zstd level
 * `level` takes. */
size_t ftpad_block_encoder_size(size_t max_events, int level);

/* e set up in mem (size bytes, at least ftpad_block_encoder_size(), 8-byte
 * aligned).  A size too small for the compressor leaves blocks varint-coded
 * (as does a build without libzstd); too small for that: -1. */
int ftpad_block_encoder_init(struct ftpad_block_encoder *e, void *mem, size_t size,
			     size_t max_events, int level);

/* n events (1 to e->max_events) as one block, in e->out: its bytes. */
size_t ftpad_block_encode(struct ftpad_block_encoder *e, const struct ftpad_event *ev,
			  size_t n);

#endif /* FTPAD_RUNTIME_RECORD_ENCODE_H */
