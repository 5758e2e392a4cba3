/* SPDX-License-Identifier: MIT */
/*
 * blocks.h - the body of a version 2 events file, its blocks decoded one
 * at a time (<ftpad_trace.h> "Version 2's events").  Plain C and libzstd: the
 * tests' tools use it as the reader does.
 */
#ifndef FTPAD_TRACE_BLOCKS_H
#define FTPAD_TRACE_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "ftpad_trace.h"

/* What the headers of a body's blocks say. */
struct trace_blocks {
	size_t nevents;
	size_t nblocks;
	size_t whole;      /* bytes of the body in whole blocks: the rest is a block cut short */
	size_t max_events; /* the most events in a block */
	size_t max_raw;    /* the most bytes of columns in a block */
};

/* Checks the headers of the len bytes of body (what follows the 64-byte
 * header), not their data: 0, or -1 with why (why_size bytes) saying what
 * is wrong and at which byte of the file.  A last block cut short is not
 * an error: out->whole ends before it. */
int trace_blocks_scan(const uint8_t *body, size_t len, struct trace_blocks *out, char *why,
		      size_t why_size);

/* The whole blocks of a scanned body, decoded one at a time. */
struct trace_block_reader {
	const uint8_t *body;
	size_t whole, at;
	uint8_t *raw;
	struct ftpad_event *ev; /* the last block's events */
	void *dctx;
};

/* 0, or -1: no memory. */
int trace_block_reader_open(struct trace_block_reader *r, const uint8_t *body,
			    const struct trace_blocks *b);
/* The next block's events, in r->ev: their count, 0 after the last block,
 * or -1 with why when the block's data is not what its header says. */
long trace_block_read(struct trace_block_reader *r, char *why, size_t why_size);
void trace_block_reader_close(struct trace_block_reader *r);

#endif
