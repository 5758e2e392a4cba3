/* SPDX-License-Identifier: MIT */
/*
 * trace_gen.c - a large trace directory for bench/trace_read.py, in the
 * documented format (docs/format.md "The trace directory"), written
 * through <ftpad_trace.h>.
 *
 *   trace_gen DIR EVENTS [VERSION]
 *
 * VERSION 2 (the default): blocks of 4096 events, zstd-coded by the
 * recorder's encoder (runtime/record_encode.c, linked in), as the
 * recorder writes them; 1: the events as they are.
 *
 * One thread: main calls 64 functions in turn; each calls a few others,
 * down to depth 6, so that the walk sees a real tree (nesting, siblings,
 * a stack that grows and shrinks), 10 ns apart (3 ticks a ns).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ftpad_trace.h"
#include "record_encode.h"

#define FUNCS 64
#define BUF_EVENTS 65536

static struct ftpad_event buf[BUF_EVENTS];
static size_t nbuf;
static FILE *out;
static uint64_t now, written, wanted;

#define BLOCK_EVENTS 4096
static struct ftpad_block_encoder *encoder; /* version 2; NULL: version 1 */

static void flush(void)
{
	if (!encoder) {
		fwrite(buf, sizeof(*buf), nbuf, out);
	} else {
		for (size_t i = 0; i < nbuf; i += BLOCK_EVENTS) {
			size_t n = nbuf - i < BLOCK_EVENTS ? nbuf - i : BLOCK_EVENTS;

			fwrite(encoder->out, ftpad_block_encode(encoder, buf + i, n), 1, out);
		}
	}
	nbuf = 0;
}

static void put(unsigned kind, uint32_t site, uint32_t sp)
{
	buf[nbuf++] = (struct ftpad_event){ now += 30, ftpad_event_what(kind, site), sp };
	written++;
	if (nbuf == BUF_EVENTS)
		flush();
}

static struct ftpad_block_encoder *new_encoder(void)
{
	static struct ftpad_block_encoder e;
	size_t size = ftpad_block_encoder_size(BLOCK_EVENTS, 1);
	void *mem = aligned_alloc(8, (size + 7) & ~(size_t)7);

	if (!mem || ftpad_block_encoder_init(&e, mem, size, BLOCK_EVENTS, 1)) {
		fputs("trace_gen: no memory for the encoder\n", stderr);
		exit(1);
	}
	return &e;
}

/* Function f: entry site 2f, exit site 2f + 1. */
static void call(unsigned f, uint32_t sp, unsigned depth)
{
	unsigned i;

	put(FTPAD_EVENT_ENTRY, 2 * f, sp);
	for (i = 0; depth < 6 && i < (f + depth) % 3 && written + 4 < wanted; i++)
		call((f * 7 + i * 13 + depth) % FUNCS, sp - 64, depth + 1);
	put(FTPAD_EVENT_EXIT, 2 * f + 1, sp);
}

static void file(const char *dir, const char *name, const char *text)
{
	char path[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		fprintf(stderr, "trace_gen: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	struct ftpad_trace_thread_header h = { .version = FTPAD_TRACE_VERSION,
					       .header_size = sizeof(h),
					       .event_size = sizeof(struct ftpad_event),
					       .arch = 1, .pid = 1, .tid = 1, .comm = "bench" };
	char image[4100], path[4200], sites[FUNCS * 2 * 64], *p = sites;
	unsigned f;

	if (argc != 3 && argc != 4)
		return fputs("usage: trace_gen DIR EVENTS [VERSION]\n", stderr), 2;
	wanted = strtoull(argv[2], NULL, 10);
	if (argc == 4 && atoi(argv[3]) == FTPAD_TRACE_VERSION_RAW)
		h.version = FTPAD_TRACE_VERSION_RAW;
	else
		encoder = new_encoder();
	snprintf(image, sizeof(image), "%s/1.0", argv[1]);
	if ((mkdir(argv[1], 0777) && errno != EEXIST) || (mkdir(image, 0777) && errno != EEXIST))
		return perror(argv[1]), 1;
	file(argv[1], "info", "format=2\narch=x86_64\nclock=tsc\nclock_sync=0 0\n"
			      "clock_sync=3000000000 1000000000\ncommand=bench\n");
	file(image, "image", "pid=1\nppid=0\nexe=/bench\nargv=bench\n");
	for (f = 0; f < FUNCS; f++)
		p += sprintf(p, "%u\tentry\t%x\t-\tfunc_%02u\t/bench\n%u\texit\t%x\t-\tfunc_%02u\t/bench\n",
			     2 * f, 0x1000 + 64 * f, f, 2 * f + 1, 0x1000 + 64 * f, f);
	file(image, "sites", sites);
	snprintf(path, sizeof(path), "%s/1.events", image);
	out = fopen(path, "w");
	if (!out)
		return perror(path), 1;
	memcpy(h.magic, FTPAD_TRACE_MAGIC, 8);
	fwrite(&h, sizeof(h), 1, out);
	while (written + 2 <= wanted)
		call(written / 2 % FUNCS, 0x7fff0000, 0);
	flush();
	if (fclose(out))
		return perror(path), 1;
	printf("%llu\n", (unsigned long long)written);
	return 0;
}
