/* SPDX-License-Identifier: MIT */
/*
 * ftpad_trace.h - the one definition of a trace directory's binary parts,
 * which libftpad's recorder writes and `ftpad replay/report/dump/flame/live`
 * read.  docs/format.md "The trace directory" says the same in prose, with
 * the text files beside them; keep the two in step.
 *
 * Everything is little-endian, whatever machine wrote it, so a trace taken
 * on one machine reads on another.  Plain C with nothing beyond <stdint.h>.
 */
#ifndef FTPAD_TRACE_H
#define FTPAD_TRACE_H

#include <stdint.h>

/* Version 2: events in compressed blocks (below); version 1 (events as
 * they are, 16 bytes each, after the header) is still read. */
#define FTPAD_TRACE_VERSION 2
#define FTPAD_TRACE_VERSION_RAW 1
#define FTPAD_TRACE_MAGIC "FTPADTRC" /* 8 bytes, no NUL */

/* What an event says (the top 4 bits of struct ftpad_event.what). */
enum ftpad_event_kind {
	FTPAD_EVENT_ENTRY = 0,     /* a function was entered at site `site` */
	FTPAD_EVENT_EXIT = 1,      /* it returned, through exit site `site` */
	FTPAD_EVENT_TAIL_EXIT = 2, /* it left by a tail call through `site` */
	FTPAD_EVENT_LOST = 3,      /* `sp` events were dropped just before; `site`: why (enum ftpad_lost_cause) */
	FTPAD_EVENT_SIGNAL = 4,    /* a signal handler starts; `site` holds the signal number */
	FTPAD_EVENT_SIGRETURN = 5, /* ... and returned normally; `site`: the signal number */
	/* The thread jumped out of frames (longjmp, an exception, a context
	 * switch) to stack pointer `sp`: every open frame entered below it has
	 * been left.  Optional: a reader finds the same from the sp of the
	 * next entry or exit, but later. */
	FTPAD_EVENT_UNWIND = 6,
};
#define FTPAD_EVENT_KINDS 16 /* a reader skips (and counts) kinds it does not know */

/*
 * Why events were dropped: a LOST event's `site`, and the `dropped_by=`
 * lines of the summaries (docs/format.md).  0 is what traces written
 * before causes were recorded have there: it keeps meaning a full buffer.
 * A reader names a cause it does not know by its number.
 */
enum ftpad_lost_cause {
	FTPAD_LOST_BUFFER_FULL = 0,   /* no free chunk: the writer was behind */
	FTPAD_LOST_SIZE_CAP = 1,      /* --size (FTPAD_RECORD_SIZE) was reached */
	FTPAD_LOST_FREE_SPACE = 2,    /* the default cap: the file system's free space kept */
	FTPAD_LOST_DISK_FULL = 3,     /* a write found no room (ENOSPC, EDQUOT, EFBIG) */
	FTPAD_LOST_WRITE_ERROR = 4,   /* a write failed otherwise (EIO ...) */
	FTPAD_LOST_REENTERED = 5,     /* a signal handler's event while the thread wrote one */
	FTPAD_LOST_FOREIGN_CLONE = 6, /* a clone(CLONE_VM) child running on a thread's TLS */
	FTPAD_LOST_EARLY = 7,         /* before main: the early buffer was full, or another thread */
	FTPAD_LOST_NO_ID = 8,         /* the site's module got no ids (its table was full) */
	FTPAD_LOST_CUT = 9,           /* held in memory when the process ended (exec, a signal) */
	FTPAD_LOST_CAUSES
};

/* A cause's name in the summaries' dropped_by= lines: one word. */
static inline const char *ftpad_lost_cause_name(unsigned cause)
{
	static const char *const names[FTPAD_LOST_CAUSES] = {
		"buffer_full", "size_cap", "free_space", "disk_full", "write_error",
		"reentered", "foreign_clone", "early", "no_id", "cut",
	};

	return cause < FTPAD_LOST_CAUSES ? names[cause] : "unknown";
}

/* What a viewer says of a cause. */
static inline const char *ftpad_lost_cause_text(unsigned cause)
{
	static const char *const texts[FTPAD_LOST_CAUSES] = {
		"buffer full",
		"--size cap reached",
		"free-space limit reached",
		"disk full",
		"write error",
		"signal handler during an event",
		"clone child without its own TLS",
		"early buffer full",
		"no site ids",
		"held when the process ended",
	};

	return cause < FTPAD_LOST_CAUSES ? texts[cause] : "unknown cause";
}

#define FTPAD_EVENT_SITE_BITS 28
#define FTPAD_EVENT_SITE_MASK ((1u << FTPAD_EVENT_SITE_BITS) - 1)

/*
 * One event: 16 bytes.
 *
 * time: the clock's raw ticks (TSC on x86_64, CNTVCT_EL0 on aarch64); the
 *       trace's info file says how ticks become nanoseconds.
 * what: kind << 28 | site, where site is the site's id in its image's
 *       `sites` file (ENTRY, EXIT, TAIL_EXIT), or what the kind says.
 * sp:   the low 32 bits of the stack pointer the function had at the site:
 *       at an entry it points at the return address on x86_64 and is the
 *       caller's sp on aarch64, and an exit site sits after the epilogue,
 *       so a function's exit has its entry's sp.  The reader compares
 *       stack pointers as signed 32-bit differences, so a stack may be up
 *       to 2 GiB deep.  LOST: the number of events dropped.
 */
struct ftpad_event {
	uint64_t time;
	uint32_t what;
	uint32_t sp;
};

static inline unsigned ftpad_event_kind(const struct ftpad_event *e)
{
	return e->what >> FTPAD_EVENT_SITE_BITS;
}

static inline uint32_t ftpad_event_site(const struct ftpad_event *e)
{
	return e->what & FTPAD_EVENT_SITE_MASK;
}

static inline uint32_t ftpad_event_what(unsigned kind, uint32_t site)
{
	return (uint32_t)kind << FTPAD_EVENT_SITE_BITS | (site & FTPAD_EVENT_SITE_MASK);
}

/*
 * The start of each thread's events file, <image>/<tid>.events: 64 bytes,
 * then, in version 2, blocks of events (struct ftpad_trace_block) to the
 * end of the file; in version 1, struct ftpad_events to the end of the
 * file.  A file cut short (the process was killed while writing) ends at
 * its last whole block (version 1: event).  event_size is 16 in both: the
 * size of an event once decoded.
 */
struct ftpad_trace_thread_header {
	char magic[8];        /* FTPAD_TRACE_MAGIC */
	uint16_t version;     /* FTPAD_TRACE_VERSION */
	uint16_t header_size; /* sizeof(struct ftpad_trace_thread_header): 64 */
	uint16_t event_size;  /* sizeof(struct ftpad_event): 16 */
	uint16_t arch;        /* enum ftpad_site_arch (<ftpad_site.h>) */
	uint32_t pid;
	uint32_t tid;
	char comm[16];        /* the thread's name at its first event, NUL-padded */
	uint64_t reserved[3]; /* 0 */
};

/*
 * Version 2's events: blocks, each this header then `size` bytes of data,
 * which hold `events` events (1 to FTPAD_TRACE_BLOCK_EVENTS_MAX) as three
 * columns of LEB128 varints (7 bits a byte, low first, the top bit set on
 * every byte but the last), one after the other, `raw_size` bytes in all:
 *
 *   time:  per event, zigzag(time - the previous event's time), as a
 *          signed 64-bit difference; the first event's previous time is
 *          first_time (so its own is 0).  zigzag(d) = d << 1 ^ d >> 63.
 *   what:  per event, site << 4 | kind (what rotated left by 4 bits), so
 *          that small site ids take one or two bytes whatever the kind.
 *   sp:    per event, zigzag(sp - the previous event's sp), as a signed
 *          32-bit difference; the first event's previous sp is 0.
 *
 * The time column is time_size bytes, the what column what_size bytes, the
 * sp column the rest.  Every field of every kind, known to the reader or
 * not, goes through the same way.  With coding FTPAD_TRACE_BLOCK_ZSTD the
 * data is one zstd frame (RFC 8878, with its content checksum) of the
 * columns, and smaller than they are (else the block is written
 * varint-coded); with FTPAD_TRACE_BLOCK_VARINT it is the columns
 * themselves (a recorder built without libzstd writes these).  Each block stands alone:
 * a reader may start at any block, and one cut short ends the file.
 */
#define FTPAD_TRACE_BLOCK_MAGIC "FBLK" /* 4 bytes, no NUL */
#define FTPAD_TRACE_BLOCK_EVENTS_MAX (1u << 20)
/* The most bytes an event takes in the columns: 10 + 5 + 5. */
#define FTPAD_TRACE_BLOCK_EVENT_MAX_BYTES 20

enum ftpad_trace_block_coding {
	FTPAD_TRACE_BLOCK_VARINT = 0, /* the columns as they are */
	FTPAD_TRACE_BLOCK_ZSTD = 1,   /* the columns in one zstd frame */
};

struct ftpad_trace_block {
	char magic[4];        /* FTPAD_TRACE_BLOCK_MAGIC */
	uint8_t coding;       /* enum ftpad_trace_block_coding */
	uint8_t reserved[3];  /* 0 */
	uint32_t size;        /* bytes of data after this header */
	uint32_t events;      /* events in the block */
	uint32_t raw_size;    /* bytes of the three columns */
	uint32_t time_size;   /* bytes of the time column (the first) */
	uint32_t what_size;   /* bytes of the what column (the second) */
	uint32_t reserved2;   /* 0 */
	uint64_t first_time;  /* the time of the block's first event */
};

#ifdef __cplusplus
static_assert(sizeof(struct ftpad_trace_block) == 40, "a block header is 40 bytes");
static_assert(sizeof(struct ftpad_event) == 16, "an event is 16 bytes");
static_assert(sizeof(struct ftpad_trace_thread_header) == 64, "the header is 64 bytes");
#else
_Static_assert(sizeof(struct ftpad_trace_block) == 40, "a block header is 40 bytes");
_Static_assert(sizeof(struct ftpad_event) == 16, "an event is 16 bytes");
_Static_assert(sizeof(struct ftpad_trace_thread_header) == 64, "the header is 64 bytes");
#endif

#endif /* FTPAD_TRACE_H */
