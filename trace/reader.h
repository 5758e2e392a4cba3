/* SPDX-License-Identifier: MIT */
/*
 * reader.h - opening a trace directory (docs/format.md "The trace
 * directory"): its info, each image's image and sites files, and each
 * thread's events, mapped read-only so that a viewer walks them in place.
 */
#ifndef FTPAD_TRACE_READER_H
#define FTPAD_TRACE_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "blocks.h"
#include "ftpad_trace.h"

#define TRACE_NONE UINT32_MAX

/* The kinds of the sites file's second column. */
enum trace_site_kind { TRACE_SITE_ENTRY, TRACE_SITE_EXIT, TRACE_SITE_TAIL_EXIT };

struct trace_site {
	uint32_t func; /* index into trace.funcs, TRACE_NONE for an id never listed */
	uint8_t kind;  /* enum trace_site_kind */
	uint8_t noexit; /* its function has entries only (the walk's test, in the same line) */
};

/*
 * A function: one entry address in one module.  Two functions can share a
 * name (static functions of two files); the call tree tells them apart by
 * `func`, and report/folded aggregate by `sym`, the name a user reads.
 */
struct trace_func {
	uint64_t addr;
	const char *module;
	uint32_t mod;  /* the module's index into trace.syms */
	uint32_t sym;  /* index into trace.syms */
	uint8_t noexit; /* entries only: the sites file said `noexit` */
};

struct trace_thread {
	char *path;
	uint32_t pid, tid;
	char comm[17];
	unsigned version; /* the file's: FTPAD_TRACE_VERSION, _RAW; 0: no header */
	const struct ftpad_event *events; /* version 1: in the mapping */
	size_t nevents;
	uint64_t first_time; /* the first event's, if any */
	void *map;
	size_t map_len;
	/* version 2: the blocks after the header, decoded as a walk goes
	 * (trace_thread_blocks()) */
	size_t body;
	struct trace_blocks blocks;
	/* events the recorder could not write into this file (the image's
	 * lost_write=), and the errno name that said why */
	uint64_t unwritten;
	char unwritten_cause[16];
	uint64_t unwritten_since; /* the clock at the first; 0: not said */
};

struct trace_lost_write {
	char *file;
	uint64_t count;
	char cause[16];
	uint64_t since; /* the clock at the first (0 in older traces) */
};

struct trace_image {
	char *name; /* "<pid>.<n>" */
	uint32_t pid, ppid, n;
	char *exe, *argv, *forked_from, *exec_from;
	struct trace_site *sites;
	uint32_t nsites;
	struct trace_thread *threads; /* sorted by tid */
	size_t nthreads;
	struct trace_lost_write *lost_writes; /* the image's lost_write= lines */
	size_t nlost_writes;
	uint64_t events_said; /* its image's events= (the last): what its files hold */
};

/* ns = ns0 + (ticks - t0) * mult >> 32: the line through the first and the
 * last clock_sync pair, in fixed point so that it is exact when a tick is
 * a nanosecond and costs one multiply an event. */
struct trace_clock {
	uint64_t t0;
	int64_t ns0;
	uint64_t mult;
};

static inline int64_t trace_ticks_to_ns(const struct trace_clock *c, uint64_t ticks)
{
	__int128 d = (__int128)(int64_t)(ticks - c->t0) * (__int128)c->mult;
	return c->ns0 + (int64_t)(d >> 32);
}

struct trace_hash {
	uint32_t *slots; /* index + 1, 0 = empty */
	size_t mask;
};

struct trace {
	char *dir;
	char arch[16], clock_name[16];
	char *command;
	struct trace_clock clock;
	int64_t first_ns; /* the earliest first event of any thread: the viewers' zero */
	struct trace_image *images; /* sorted by pid, then n */
	size_t nimages;
	struct trace_func *funcs;
	size_t nfuncs, funcs_cap;
	char **syms; /* display names: the function's name (C++ demangled), or 0xADDR@module */
	size_t nsyms, syms_cap;
	struct trace_hash func_hash, sym_hash;
	uint64_t warnings; /* cut files, unknown site ids ... said on stderr */
	int quiet;         /* live: a file being written is not cut short */
	int raw_names;     /* C++ names as the sites file has them, not demangled */
	int attached;      /* made by ftpad attach or a ring's snapshot (info's attach=,
			    * snapshot=): it ended, the program did not */
	int ring;          /* recorded with --ring (info's ring=): threads start mid-stack */
	int snapshot;      /* a snapshot of a ring (info's snapshot=): attached is set too */
	/* info's last state= is recording: being written, or its recording
	 * was killed; recorder=PID START says by whom (0: not said) */
	int recording;
	int recorder_pid;
	unsigned long long recorder_start;
};

enum trace_open_flags {
	TRACE_OPEN_QUIET = 1,     /* live: files still being written */
	TRACE_OPEN_RAW_NAMES = 2, /* --raw-names: no demangling */
};

/* Opens DIR (FLAGS: enum trace_open_flags), or says why not on stderr and
 * returns -1.  A trace whose recording did not finish (and is not going
 * on) is read, with a warning. */
int trace_open(struct trace *t, const char *dir, unsigned flags);
void trace_close(struct trace *t);

/* Where the recording of the trace is. */
enum trace_state {
	TRACE_STATE_NOT_THERE,   /* no info (or no head) yet: the recorder is making it */
	TRACE_STATE_RECORDING,   /* info says recording, and its recorder runs */
	TRACE_STATE_FINISHED,    /* info says finished (or nothing: an older trace) */
	TRACE_STATE_ABANDONED,   /* info says recording, and its recorder is gone */
	TRACE_STATE_BROKEN,      /* info is not a file a trace has: said */
};

/* DIR's state from its info's last state= and recorder= (docs/format.md).
 * A FIFO or a symbolic link put there is never followed (BROKEN, said on
 * stderr): such a trace will never finish. */
enum trace_state trace_state(const char *dir);

/* Whether the recorder of a trace still marked recording still runs. */
int trace_recorder_alive(const struct trace *t);
/* The start time of process pid (/proc/PID/stat's 22nd field), or 0:
 * with the pid, it names a process even once the pid is reused. */
unsigned long long trace_process_start(int pid);

/* Interns a display name (also for marks such as "[signal 10]"). */
uint32_t trace_sym(struct trace *t, const char *name);

/* Parses one events file's header; fills th's pid/tid/comm.  Returns 0, or
 * -1 after saying why (file names `path`). */
int trace_check_header(const struct trace *t, const char *path, const void *bytes, size_t len,
		       struct trace_thread *th);

/* Opens PATH, a file of a trace, read-only if it is a regular file and not
 * a symbolic link (nor a FIFO, which would block, nor a device, which
 * never ends); fills *st.  Returns the descriptor, or -1 with *why set to
 * the reason (errno kept: ENOENT for a file that is not there). */
int trace_open_file(const char *path, struct stat *st, const char **why);
/* The whole of such a file, NUL-terminated, no more than its size when
 * opened (in *len if len is not NULL); NULL with *why and errno as above. */
char *trace_slurp(const char *path, size_t *len, const char **why);

void trace_warn(struct trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Says the error and exits with status 1: a block of a version 2 file
 * whose data is spoiled, found as a walk decodes it. */
void trace_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* th's version 2 blocks, for trace_block_read(); exits (trace_fatal())
 * when there is no memory for them. */
void trace_thread_blocks(const struct trace_thread *th, struct trace_block_reader *r);

#endif
