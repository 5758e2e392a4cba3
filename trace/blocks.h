/* SPDX-License-Identifier: MIT */
/*
 * blocks.h - the body of a version 2 events file, its blocks decoded
 * (<ftpad_trace.h> "Version 2's events").  Plain C and libzstd: the
 * tests' tools use it as the reader does.
 */
#ifndef FTPAD_TRACE_BLOCKS_H
#define FTPAD_TRACE_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "ftpad_trace.h"

struct trace_blocks {
	struct ftpad_event *events; /* mapped: trace_blocks_free() */
	size_t nevents;
	size_t events_size; /* bytes mapped at events */
	size_t nblocks;
	size_t whole; /* bytes of the body in whole blocks: the rest is a block cut short */
};

/* Decodes the len bytes of body (what follows the 64-byte header) into
 * out: 0, or -1 with why (why_size bytes) saying what is wrong and at
 * which byte of the file.  A last block cut short is not an error: out
 * ends at the block before it, and out->whole says where. */
int trace_blocks_decode(const uint8_t *body, size_t len, struct trace_blocks *out, char *why,
			size_t why_size);

/* What trace_blocks_decode() gave, let go (b zeroed). */
void trace_blocks_free(struct trace_blocks *b);

#endif
