/* SPDX-License-Identifier: MIT */
/*
 * record.h - what the recorder's files share (not installed): binary
 * events into a trace directory (docs/format.md "The trace directory",
 * <ftpad_trace.h>), started once from the environment that `ftpad record`
 * sets, or in sessions that `ftpad attach` starts and stops (attach.c),
 * whose request holds the same settings:
 *
 *   FTPAD_RECORD=DIR            the trace directory (made by `ftpad record`)
 *   FTPAD_RECORD_FILTER=globs   record these functions (default: all)
 *   FTPAD_RECORD_NOTRACE=globs  ... but not these
 *   FTPAD_RECORD_SIZE=bytes     cap on the trace's event bytes, all its processes
 *                               (default: while FTPAD_RECORD_MIN_FREE % of its file
 *                               system stays free, 10)
 *   FTPAD_RECORD_CHUNK=n        events per chunk (default 4096: 64 KiB)
 *   FTPAD_RECORD_CHUNKS=n       chunks in the pool (default 256: 16 MiB)
 *   FTPAD_RECORD_DEPTH=n        only frames up to depth n per thread
 *   FTPAD_RECORD_TIME_FILTER=ns drop calls shorter than ns, childless ones
 *   FTPAD_EARLY=1               also the calls before main (early.c)
 *   FTPAD_RECORD_IMAGE=pid.n    set by the recorder itself: the image this
 *                               process writes, so an exec'ed program
 *                               continues into pid.(n+1) (exec_from=)
 *   FTPAD_RECORD_EXITS=0|1      attach only: exit events too (default 1)
 *   FTPAD_RECORD_RING=bytes     keep only the newest events, in memory (--ring)
 *   FTPAD_RECORD_TRIGGER=globs  entering one of these takes a snapshot (--trigger)
 *
 * Its files, each calling only those above it in this list:
 *
 *   record_settings.c  the settings: the attach request's, or the environment's
 *   record_buffer.c    the chunks, the threads and the hot path (record_event())
 *   record_writer.c    the writer thread and the trace's files
 *   record_ring.c      --ring: the newest chunks kept in memory, written at
 *                      the end and on a snapshot (the writer hands it the
 *                      chunks it drains, and asks it to write them)
 *   record_ids.c       site ids and the `sites` file; the ops' callbacks
 *   record_session.c   start, fork, exec, end, and the ending signals
 *
 * What they share has a short name here and an ftpad_record_ symbol
 * (RECORD_SHARED): a program linked with libftpad.a may well have a
 * `drain` or an `image` of its own.
 */
#ifndef FTPAD_RUNTIME_RECORD_H
#define FTPAD_RUNTIME_RECORD_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ftpad_trace.h"
#include "internal.h"

#define RECORD_SHARED(name) __asm__("ftpad_record_" #name) FTPAD_HIDDEN

#define TLS __thread __attribute__((tls_model("initial-exec")))

struct rthread;

/* trampoline_x86_64.S's fast path writes into these two: the offsets it
 * uses come from arch/asm_offsets_x86_64.c. */
struct chunk {
	struct chunk *next;    /* in the full list */
	struct rthread *owner; /* whose events file it goes to */
	uint32_t n;            /* events in ev */
	uint32_t index;        /* in the pool, for the free list */
	struct ftpad_event ev[];
};

/* One traced thread.  Never freed: the writer may hold its chunks. */
struct rthread {
	struct rthread *next; /* all threads, for the final flush */
	struct chunk *cur;
	/* dropped since its last LOST event, per cause (enum
	 * ftpad_lost_cause), and the clock at the first of each */
	uint64_t lost[FTPAD_LOST_CAUSES];
	uint64_t events, dropped;
	unsigned refused;     /* make_room()'s last refusal: its cause */
	uint32_t depth;       /* frames open, as --depth counts them */
	uint32_t *open_sp;    /* --depth: sp of the open frames 1..max_depth */
	int busy;             /* in record_event(): a signal handler's events drop */
	uint64_t fast_events; /* written by the fast path (trampoline_x86_64.S) */
	int pending;          /* the fast path holds a slot of cur: keep cur */
	uint64_t lost_since[FTPAD_LOST_CAUSES];
	uint64_t handed_last; /* the time of the last event handed to the writer */
	/* every drop of the trace, per cause, and the clock at the first */
	uint64_t dropped_by[FTPAD_LOST_CAUSES], first_drop[FTPAD_LOST_CAUSES];
	pid_t tid;
	char comm[16];
	/* record_event() between its first and last step: the slot it takes
	 * and the count before, for end_by_signal(). */
	int open;
	uint32_t open_index;
	uint64_t events_at_open;
	/* The writer's, under write_lock: its events file, <tid>.events or
	 * <tid>.<k>.events when a thread before it had the tid (file 0: none
	 * made yet, else k + 1); fd.fd -1 while closed. */
	struct ftpad_own_fd fd;
	uint32_t file;
	/* Events it recorded that no write put in the file, and the first
	 * error that kept them out (counted as dropped). */
	uint64_t unwritten;
	int unwritten_err;
	uint64_t unwritten_since; /* the clock at the first */
	/* The thread ended: its file closes once its events are written
	 * (ending: the writer saw it in ended_threads; last_chunk: its last
	 * in the chunks the writer has in hand). */
	struct rthread *ended_next;
	int ending;
	struct chunk *last_chunk;
	/* --ring: its events the ring let go for newer ones (not dropped:
	 * recorded, and older than what the ring keeps). */
	uint64_t overwritten;
	/* --ring: it ended (the writer saw it in ended_threads), so its file
	 * closes once the ring's last chunk of it is written at the end. */
	int gone;
	/* --ring: fd, file and unwritten, put aside while a snapshot writes */
	struct {
		struct ftpad_own_fd fd;
		uint32_t file;
		uint64_t unwritten;
		int err;
	} ring_saved;
};

/* ---- record_settings.c ---- */

/* The settings: the attach request of the session (NAME=VALUE\0...\0\0),
 * or the environment when there is none.  bad_setting: one had a value
 * that is not a number, which fails an attach (the environment's gets
 * the default and a warning, as always). */
extern const char *request RECORD_SHARED(request);
extern bool bad_setting RECORD_SHARED(bad_setting);
/* A setting of this session: its attach request's, or the environment's. */
const char *setting(const char *name) RECORD_SHARED(setting);
/* A number setting of at least min, else def (said, and bad_setting). */
size_t setting_size(const char *name, size_t def, size_t min) RECORD_SHARED(setting_size);

/* ---- record_buffer.c ---- */

/* atomic: no more events; read by the fast path too */
extern int stopping RECORD_SHARED(stopping);
extern TLS struct rthread *self RECORD_SHARED(self);
extern struct rthread *threads RECORD_SHARED(threads); /* atomic list head */
/* atomic: threads in ftpad_record_signal() or a thread's exit hand-over,
 * which no unregistering waits for: a stop waits for them instead. */
extern int outside_ops RECORD_SHARED(outside_ops);
extern size_t chunk_events RECORD_SHARED(chunk_events);
extern size_t nchunks RECORD_SHARED(nchunks);
/* --ring: the chunks the ring keeps (0: no ring, every chunk is written) */
extern size_t ring_chunks RECORD_SHARED(ring_chunks);
/* the full chunks that wake the writer before its pause ends */
extern unsigned wake_at RECORD_SHARED(wake_at);
extern struct chunk *full_head RECORD_SHARED(full_head); /* atomic */
extern unsigned nfull RECORD_SHARED(nfull);     /* atomic: chunks in the full list */
/* atomic, a futex word: the writer waits on it */
extern int writer_asleep RECORD_SHARED(writer_asleep);
/* The bytes of events reserved against --size (atomic): *reserved, the
 * trace's shared count (map_budget()), or own_reserved. */
extern uint64_t own_reserved RECORD_SHARED(own_reserved);
extern uint64_t *reserved RECORD_SHARED(reserved);
/* --depth (0: every depth) and --time-filter (0: every call, else ticks). */
extern uint32_t max_depth RECORD_SHARED(max_depth);
extern uint64_t min_ticks RECORD_SHARED(min_ticks);
/* Raw clone(CLONE_VM) children that may share a thread's self (atomic),
 * and their events, dropped (atomic), since the clock at the first. */
extern int foreign_clones RECORD_SHARED(foreign_clones);
extern uint64_t foreign_drops RECORD_SHARED(foreign_drops);
extern uint64_t foreign_first RECORD_SHARED(foreign_first);
extern pthread_key_t thread_key RECORD_SHARED(thread_key);
/* atomic list head: threads that ended since the writer last looked */
extern struct rthread *ended_threads RECORD_SHARED(ended_threads);
/* The ops whose sites x86_64's fast path records, and the slot below
 * which it writes (record_buffer.c). */
extern struct ftpad_ops *ftpad_record_fast_ops FTPAD_HIDDEN;
extern uint32_t ftpad_record_fast_limit FTPAD_HIDDEN;

void put_free(struct chunk *c) RECORD_SHARED(put_free);
void wake_writer(void) RECORD_SHARED(wake_writer);
void hand_over(struct rthread *t) RECORD_SHARED(hand_over);
void forget_thread_at_exit(void *arg) RECORD_SHARED(forget_thread_at_exit);
struct rthread *thread_start(void) RECORD_SHARED(thread_start);
bool make_room(struct rthread *t) RECORD_SHARED(make_room);
void count_drop(struct rthread *t, unsigned cause) RECORD_SHARED(count_drop);
void count_drops(struct rthread *t, unsigned cause, uint64_t n, uint64_t since)
	RECORD_SHARED(count_drops);
/* The thread's LOST events, one per cause it dropped events for, into c
 * while it has room; the rest stay for the next chunk. */
void put_lost(struct rthread *t, struct chunk *c, uint32_t room) RECORD_SHARED(put_lost);
/* --size sets a fixed cap (no free-space limit then). */
bool size_capped(void) RECORD_SHARED(size_capped);
/* The default cap: the reserved count past which the share of the file
 * system kept free (min_free_percent) is reached (atomic; record_writer.c's
 * check_free_space() sets it). */
extern uint64_t space_limit RECORD_SHARED(space_limit);
extern unsigned min_free_percent RECORD_SHARED(min_free_percent);
void write_event(struct rthread *t, struct chunk *c, struct ftpad_event ev)
	RECORD_SHARED(write_event);
void record_event(unsigned kind, uint32_t site, uint32_t sp, bool entries_only)
	RECORD_SHARED(record_event);
void set_filters(void) RECORD_SHARED(set_filters);
bool set_pool(void) RECORD_SHARED(set_pool);
bool reset_threads(void) RECORD_SHARED(reset_threads);
void forget_parent_buffers(void) RECORD_SHARED(forget_parent_buffers);

/* ---- record_writer.c ---- */

extern char dir[PATH_MAX] RECORD_SHARED(dir); /* FTPAD_RECORD */
extern char image[64] RECORD_SHARED(image);   /* "<pid>.<n>" */
extern uint64_t bytes_written RECORD_SHARED(bytes_written); /* under write_lock */
extern pthread_mutex_t write_lock RECORD_SHARED(write_lock);
extern pthread_t writer RECORD_SHARED(writer);
extern int writer_running RECORD_SHARED(writer_running);
extern int sites_fd RECORD_SHARED(sites_fd); /* <image>/sites */

void open_trace_dir(void) RECORD_SHARED(open_trace_dir);
/* The trace directory's descriptor (opened again if the program took it);
 * -1 when it cannot be. */
int trace_dir(void) RECORD_SHARED(trace_dir);
/* Events files are made under this directory (a descriptor) instead of
 * the trace directory; -1: the trace directory again. */
void set_events_dir(int fd) RECORD_SHARED(set_events_dir);
void put_events(struct rthread *t, const struct ftpad_event *ev, size_t n)
	RECORD_SHARED(put_events);
void close_events(struct rthread *t) RECORD_SHARED(close_events);
/* t ended and its events are written: its last LOST count, its file closed. */
void end_file(struct rthread *t) RECORD_SHARED(end_file);
void hold_xfsz(sigset_t *old) RECORD_SHARED(hold_xfsz);
void release_xfsz(const sigset_t *old) RECORD_SHARED(release_xfsz);
void write_all(int fd, const void *buf, size_t len) RECORD_SHARED(write_all);
void start_writer(void) RECORD_SHARED(start_writer);
/* The writer's encoder sized for chunk_events (after set_pool()); not
 * from a signal handler. */
void setup_encoder(void) RECORD_SHARED(setup_encoder);
void flush_all(void) RECORD_SHARED(flush_all);
void flush_thread(struct rthread *t) RECORD_SHARED(flush_thread);
void count_totals(struct ftpad_record_totals *tot) RECORD_SHARED(count_totals);
void append_file(const char *name, const char *text) RECORD_SHARED(append_file);
void create_info(void) RECORD_SHARED(create_info);
void append_image(const char *text) RECORD_SHARED(append_image);
void clock_sync(void) RECORD_SHARED(clock_sync);
int make_image(const char *how, const char *from) RECORD_SHARED(make_image);
void copy_sites(const char *from_image) RECORD_SHARED(copy_sites);
void close_trace_files(void) RECORD_SHARED(close_trace_files);
void end_thread(void *arg) RECORD_SHARED(end_thread);
void append_unwritten(void) RECORD_SHARED(append_unwritten);
void append_drops(uint64_t held, uint64_t held_at) RECORD_SHARED(append_drops);
void check_sites_fd(void) RECORD_SHARED(check_sites_fd);
void map_budget(bool fresh) RECORD_SHARED(map_budget);
/* The free space the default cap keeps (no --size): looked at by the
 * writer a few times a second, not per event. */
void check_free_space(void) RECORD_SHARED(check_free_space);

/* ---- record_ring.c ---- */

/* Under write_lock: c, drained, kept; the oldest let go past the ring's size. */
void ring_keep(struct chunk *c) RECORD_SHARED(ring_keep);
/* Under write_lock: the ring's chunks written to the trace, and freed. */
void ring_write_out(void) RECORD_SHARED(ring_write_out);
/* The writer, at each look: the snapshots asked for, written. */
void ring_serve(void) RECORD_SHARED(ring_serve);
/* A trace starts (DIR/.ring mapped; fresh: its first image), and a
 * session ends (the trigger off, DIR/.ring unmapped: after the writer). */
void ring_start(bool fresh) RECORD_SHARED(ring_start);
int ring_register_trigger(void) RECORD_SHARED(ring_register_trigger);
void ring_stop(void) RECORD_SHARED(ring_stop);
/* In a forked child: the parent's ring is the parent's. */
void ring_forget(void) RECORD_SHARED(ring_forget);
/* The image's end under --ring: overwritten= and its snapshots. */
void ring_append_totals(void) RECORD_SHARED(ring_append_totals);

/* ---- record_ids.c ---- */

/* The session patches exit sites (record, attach --graph).  Without, every
 * site is written `noexit`: the trace holds entries only, and a viewer
 * that expected exits would close each frame as unwound. */
extern bool exits_recorded RECORD_SHARED(exits_recorded);

int64_t id_of(const struct ftpad_site *s) RECORD_SHARED(id_of);
uint32_t site_id_count(void) RECORD_SHARED(site_id_count);
void forget_site_ids(void) RECORD_SHARED(forget_site_ids);
void reset_site_ids_lock(void) RECORD_SHARED(reset_site_ids_lock);
void publish_modules(void) RECORD_SHARED(publish_modules);
void register_modules(void) RECORD_SHARED(register_modules);
void record_entry(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		  struct ftpad_regs *regs) RECORD_SHARED(record_entry);
void record_exit(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		 struct ftpad_regs *regs) RECORD_SHARED(record_exit);

#endif /* FTPAD_RUNTIME_RECORD_H */
