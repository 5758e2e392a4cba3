/* SPDX-License-Identifier: MIT */
/*
 * blocks_tool.c - version 2's events files, for tests/trace/test_trace_blocks.py,
 * through the recorder's encoder (runtime/record_encode.c) and the
 * reader's decoder (trace/blocks.c):
 *
 *   blocks_tool v2 IN OUT N [varint]   IN, an events file of version 1,
 *                                      as version 2 in OUT: blocks of N
 *                                      events, zstd-coded unless `varint`
 *   blocks_tool dump FILE              FILE's events, either version, one
 *                                      a line: TIME WHAT SP (decimal)
 *
 * Exits 1 after saying why on stderr; dump says "cut B" on stderr for a
 * file cut short, B its stray bytes.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "record_encode.h"

#define HEADER sizeof(struct ftpad_trace_thread_header)

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t cap = 0;

	*len = 0;
	if (!f) {
		perror(path);
		exit(1);
	}
	for (;;) {
		if (*len == cap && !(buf = realloc(buf, cap = cap * 2 + 65536)))
			exit(1);
		size_t n = fread(buf + *len, 1, cap - *len, f);

		if (!n)
			break;
		*len += n;
	}
	fclose(f);
	if (*len < HEADER) {
		fprintf(stderr, "%s: shorter than the header\n", path);
		exit(1);
	}
	return buf;
}

static int to_v2(const char *in, const char *out, size_t per_block, int varint)
{
	size_t len, n, size = ftpad_block_encoder_size(per_block, 1);
	uint8_t *data = slurp(in, &len);
	struct ftpad_trace_thread_header h;
	struct ftpad_block_encoder e;
	struct ftpad_event *ev;
	void *mem = aligned_alloc(8, (size + 7) & ~(size_t)7);
	FILE *f = fopen(out, "wb");

	if (!mem || !f || ftpad_block_encoder_init(&e, mem, size, per_block, 1))
		return perror(out), 1;
	if (varint) /* as a recorder built without libzstd writes them */
		e.zstd = NULL;
	memcpy(&h, data, HEADER);
	h.version = FTPAD_TRACE_VERSION;
	fwrite(&h, HEADER, 1, f);
	n = (len - HEADER) / sizeof(*ev);
	ev = malloc(n * sizeof(*ev) + 1);
	memcpy(ev, data + HEADER, n * sizeof(*ev));
	for (size_t i = 0; i < n; i += per_block) {
		size_t k = n - i < per_block ? n - i : per_block;

		fwrite(e.out, ftpad_block_encode(&e, ev + i, k), 1, f);
	}
	return fclose(f) ? (perror(out), 1) : 0;
}

static void print(const struct ftpad_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%" PRIu64 " %" PRIu32 " %" PRIu32 "\n", ev[i].time, ev[i].what, ev[i].sp);
}

static int dump(const char *path)
{
	size_t len;
	uint8_t *data = slurp(path, &len);
	struct ftpad_trace_thread_header h;
	struct trace_block_reader r;
	struct trace_blocks b;
	char why[256] = "out of memory";
	long n;

	memcpy(&h, data, HEADER);
	if (h.version == FTPAD_TRACE_VERSION_RAW) {
		n = (len - HEADER) / sizeof(struct ftpad_event);
		print((const struct ftpad_event *)(data + HEADER), n);
		b.whole = n * sizeof(struct ftpad_event);
	} else {
		if (trace_blocks_scan(data + HEADER, len - HEADER, &b, why, sizeof(why)) ||
		    trace_block_reader_open(&r, data + HEADER, &b))
			return fprintf(stderr, "%s: %s\n", path, why), 1;
		while ((n = trace_block_read(&r, why, sizeof(why))) > 0)
			print(r.ev, n);
		trace_block_reader_close(&r);
		if (n < 0)
			return fprintf(stderr, "%s: %s\n", path, why), 1;
	}
	if (b.whole < len - HEADER)
		fprintf(stderr, "cut %zu\n", len - HEADER - b.whole);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "v2"))
		return to_v2(argv[2], argv[3], strtoul(argv[4], NULL, 10),
			     argc > 5 && !strcmp(argv[5], "varint"));
	if (argc == 3 && !strcmp(argv[1], "dump"))
		return dump(argv[2]);
	fputs("usage: blocks_tool v2 IN OUT N [varint] | dump FILE\n", stderr);
	return 2;
}
