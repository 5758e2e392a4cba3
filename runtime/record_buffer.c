/* SPDX-License-Identifier: MIT */
/*
 * record_buffer.c - the recorder's chunks, its threads and its hot path
 * (record.h tells the whole).
 *
 * Hot path (record_event()): the thread's current chunk, in initial-exec
 * TLS, gets one 16-byte event: no lock, no system call.  A full chunk is
 * pushed on a lock-free list that a writer thread (record_writer.c)
 * empties into <image>/<tid>.events, giving the chunk back to a lock-free
 * free list.  The writer looks every few milliseconds, and sooner when an
 * eighth of the pool waits for it (wake_writer()).  With no free chunk (or
 * the --size budget spent), events are dropped and counted per thread; the
 * next event that fits is preceded by a LOST event with the count.  The
 * last slot of a chunk is kept for that LOST event, so a count is never
 * without a place to go while the thread has a chunk.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "record.h"

int stopping;
TLS struct rthread *self;
struct rthread *threads;
struct rthread *ended_threads;
int outside_ops;

size_t chunk_events = 4096, nchunks = 256;
static char *pool;          /* nchunks chunks of chunk_size bytes */
static size_t chunk_size;
static uint64_t free_head;  /* atomic: tag << 32 | (index + 1) */
struct chunk *full_head;
unsigned nfull;
int writer_asleep;
static uint64_t budget = UINT64_MAX; /* event bytes */
/*
 * The bytes of events reserved against the budget (atomic).  --size caps
 * the trace, every process of it together, so the count lives in
 * DIR/.budget, mapped shared (map_budget()): a forked child keeps the
 * mapping, an exec'ed image maps the file again, and the first image of a
 * trace zeroes it.  A process killed with chunks in hand leaves them
 * counted: the cap then errs low, never high.  Where the file cannot be
 * mapped, the process counts alone, in own_reserved.
 */
uint64_t own_reserved;
uint64_t *reserved = &own_reserved;

/* The reserved count past which the free space kept (check_free_space())
 * is reached (atomic); no limit with --size. */
uint64_t space_limit = UINT64_MAX;
unsigned min_free_percent = 10;
pthread_key_t thread_key;

/*
 * x86_64's fast recording path (trampoline_x86_64.S "Fast recording")
 * writes an event itself, with no C, when a site's ops is
 * ftpad_record_fast_ops: the recorder's, when no option needs C per event
 * (--depth, --time-filter).  It reads a site's event word from
 * ->trace_what, the thread from self, and keeps the chunk's last slot as
 * record_event() does (below ftpad_record_fast_limit).  The offsets it
 * uses are generated (arch/asm_offsets_x86_64.c).
 */
struct ftpad_ops *ftpad_record_fast_ops FTPAD_HIDDEN;
uint32_t ftpad_record_fast_limit FTPAD_HIDDEN;

uint32_t max_depth;
uint64_t min_ticks;

/* A clone(CLONE_VM) child without its own TLS (exechooks.c) shares the
 * self of the thread that made it: while one may run (foreign_clones,
 * atomic), the C path checks the thread id, and the child's events are
 * dropped and counted here (atomic), never written into that thread's
 * chunk. */
int foreign_clones;
uint64_t foreign_drops, foreign_first;

static struct chunk *chunk_at(uint32_t index)
{
	return (struct chunk *)(pool + (size_t)index * chunk_size);
}

/* Lock-free free list: the head carries a tag against ABA. */
void put_free(struct chunk *c)
{
	uint64_t old = __atomic_load_n(&free_head, __ATOMIC_RELAXED), new;

	do {
		c->next = (uint32_t)old ? chunk_at((uint32_t)old - 1) : NULL;
		new = ((old >> 32) + 1) << 32 | (c->index + 1);
	} while (!__atomic_compare_exchange_n(&free_head, &old, new, true, __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
}

static struct chunk *take_free(void)
{
	uint64_t old = __atomic_load_n(&free_head, __ATOMIC_ACQUIRE), new;
	struct chunk *c;

	do {
		if (!(uint32_t)old)
			return NULL;
		c = chunk_at((uint32_t)old - 1);
		new = ((old >> 32) + 1) << 32 | (c->next ? c->next->index + 1 : 0);
	} while (!__atomic_compare_exchange_n(&free_head, &old, new, true, __ATOMIC_ACQUIRE,
					      __ATOMIC_ACQUIRE));
	return c;
}

/*
 * The writer, woken before its pause ends once an eighth of the pool is
 * full: a thread that records 1-2 GB of events a second (the fast path's
 * tight loop) fills the pool in a few milliseconds, and would otherwise
 * drop events while the writer sleeps.  One system call per eighth of the
 * pool, and only while the writer sleeps; a signal handler may call it.
 * The pool (16 MiB) is large for the same reason: a write(2) may stall
 * for milliseconds, and each thread holds a chunk of it.  Chunks are
 * taken most recently freed first, so a writer that keeps up keeps few of
 * them in memory.
 */
void wake_writer(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* the push before, the flag after */
	if (__atomic_load_n(&writer_asleep, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&writer_asleep, 0, __ATOMIC_RELAXED))
		syscall(SYS_futex, &writer_asleep, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void put_full(struct chunk *c)
{
	struct chunk *old = __atomic_load_n(&full_head, __ATOMIC_RELAXED);

	do
		c->next = old;
	while (!__atomic_compare_exchange_n(&full_head, &old, c, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
	if (__atomic_add_fetch(&nfull, 1, __ATOMIC_RELAXED) >= nchunks / 8)
		wake_writer();
}

/* A chunk within the --size budget and the free space kept, or NULL
 * with *cause saying which stood in the way. */
static struct chunk *new_chunk(struct rthread *t, unsigned *cause)
{
	uint64_t bytes = chunk_events * sizeof(struct ftpad_event);
	uint64_t now = __atomic_add_fetch(reserved, bytes, __ATOMIC_RELAXED);
	struct chunk *c;

	if (now > budget || now > __atomic_load_n(&space_limit, __ATOMIC_RELAXED)) {
		*cause = now > budget ? FTPAD_LOST_SIZE_CAP : FTPAD_LOST_FREE_SPACE;
		__atomic_sub_fetch(reserved, bytes, __ATOMIC_RELAXED);
		return NULL;
	}
	c = take_free();
	if (!c) {
		*cause = FTPAD_LOST_BUFFER_FULL;
		__atomic_sub_fetch(reserved, bytes, __ATOMIC_RELAXED);
		return NULL;
	}
	c->owner = t;
	c->n = 0;
	return c;
}

/* Hand the thread's chunk to the writer, with its LOST count if any. */
void hand_over(struct rthread *t)
{
	struct chunk *c = t->cur;

	if (!c)
		return;
	put_lost(t, c, chunk_events);
	if (c->n)
		t->handed_last = c->ev[c->n - 1].time;
	t->cur = NULL;
	put_full(c);
}

void forget_thread_at_exit(void *arg)
{
	struct rthread *t = arg;

	/* A stop hands every thread's chunk over itself: not both at once. */
	__atomic_add_fetch(&outside_ops, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&stopping, __ATOMIC_SEQ_CST)) {
		t->busy++;
		hand_over(t);
		t->busy--;
		/* After its last chunk: the writer, which takes this list
		 * before the full chunks, closes the file once they are in. */
		t->ended_next = __atomic_load_n(&ended_threads, __ATOMIC_RELAXED);
		while (!__atomic_compare_exchange_n(&ended_threads, &t->ended_next, t, true,
						    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
	}
	__atomic_sub_fetch(&outside_ops, 1, __ATOMIC_RELEASE);
}

struct rthread *thread_start(void)
{
	struct rthread *t = ftpad_alloc(sizeof(*t));

	if (!t)
		return NULL;
	if (max_depth && !(t->open_sp = ftpad_alloc(max_depth * sizeof(t->open_sp[0]))))
		return NULL;
	t->fd.fd = -1;
	t->tid = gettid();
	prctl(PR_GET_NAME, t->comm);
	t->next = __atomic_load_n(&threads, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&threads, &t->next, t, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
	self = t;
	pthread_setspecific(thread_key, t);
	return t;
}

/* Slow path: the chunk is full or absent.  Not in a signal handler that
 * came while the fast path held a slot it has not written yet: that chunk
 * is not handed over before the slot is written. */
bool make_room(struct rthread *t)
{
	unsigned cause = FTPAD_LOST_BUFFER_FULL;

	if (t->pending) {
		t->refused = FTPAD_LOST_REENTERED;
		return false;
	}
	hand_over(t);
	t->cur = new_chunk(t, &cause);
	if (!t->cur) {
		t->refused = cause;
		return false;
	}
	/* One slot stays for the event that asked for room. */
	put_lost(t, t->cur, chunk_events - 1);
	return true;
}

/*
 * --depth: t->depth counts the thread's open frames; only entries and
 * exits of frames at depth <= max_depth are written.  Frames left without
 * an exit (longjmp, exceptions, functions with entries only) are closed by
 * the stack-pointer rule the reader uses (docs/format.md "How a reader
 * builds the call tree"): a frame is gone once an entry comes at or above
 * its sp, or an exit above it.  Only the sps of frames up to max_depth are
 * kept, so frames left below that are found when the stack comes back up
 * to a kept one: until then the count is high, and fewer frames are
 * written, never more.
 */
static bool frame_gone(uint32_t frame_sp, uint32_t sp, bool at_too)
{
	int32_t above = (int32_t)(sp - frame_sp); /* > 0: sp is above the frame */

	return above > 0 || (at_too && above == 0);
}

static void close_left_frames(struct rthread *t, uint32_t sp, bool at_too)
{
	uint32_t known = t->depth < max_depth ? t->depth : max_depth, k = known;

	while (k && frame_gone(t->open_sp[k - 1], sp, at_too))
		k--;
	if (k < known)
		t->depth = k;
}

/* An entry's frame is counted, and its sp kept when it is at most
 * max_depth deep.  A function with entries only never exits, so its frame
 * is counted only where its sp is kept: there the sp rule closes it. */
static bool depth_keeps_entry(struct rthread *t, uint32_t sp, bool entries_only)
{
	close_left_frames(t, sp, true);
	if (t->depth >= max_depth) {
		t->depth += !entries_only;
		return false;
	}
	t->open_sp[t->depth++] = sp;
	return true;
}

static bool depth_keeps_exit(struct rthread *t, uint32_t sp)
{
	uint32_t known;

	close_left_frames(t, sp, false);
	known = t->depth < max_depth ? t->depth : max_depth;
	/* The exit of the deepest kept frame: frames counted below it are
	 * gone (a frame below it always has a lower sp). */
	if (known && t->open_sp[known - 1] == sp) {
		t->depth = known - 1;
		return true;
	}
	if (t->depth > max_depth) {
		t->depth--;
		return false;
	}
	/* An exit whose entry came before the recorder started: written, and
	 * the count is left alone. */
	return true;
}

/*
 * --time-filter, as uftrace does it: an exit within min_ticks of its entry,
 * while that entry is still the chunk's last event (so the call had no
 * event written inside it), takes the entry back and writes nothing.  A
 * call with kept children, or whose entry went to the writer with a full
 * chunk, is kept.  The entry is known by its sp: events after it inside
 * the call all have lower sps.
 */
static bool took_entry_back(struct rthread *t, uint32_t sp)
{
	struct chunk *c = t->cur;
	const struct ftpad_event *last;

	if (!c || !c->n)
		return false;
	last = &c->ev[c->n - 1];
	if (ftpad_event_kind(last) != FTPAD_EVENT_ENTRY || last->sp != sp ||
	    ftpad_trace_clock() - last->time >= min_ticks)
		return false;
	c->n--;
	t->events--;
	return true;
}

/* Whether --depth and --time-filter keep this event; entries_only: a
 * function without exit sites, whose entries both options keep. */
static bool filters_keep(struct rthread *t, unsigned kind, uint32_t sp, bool entries_only)
{
	bool is_exit = kind == FTPAD_EVENT_EXIT || kind == FTPAD_EVENT_TAIL_EXIT;

	if (max_depth && kind == FTPAD_EVENT_ENTRY && !depth_keeps_entry(t, sp, entries_only) &&
	    !entries_only)
		return false;
	if (max_depth && is_exit && !depth_keeps_exit(t, sp))
		return false;
	return !(min_ticks && is_exit && took_entry_back(t, sp));
}

/* n events the thread could not keep, for cause, the first of them at
 * the clock's since: counted, and said by the next LOST event. */
void count_drops(struct rthread *t, unsigned cause, uint64_t n, uint64_t since)
{
	if (!n)
		return;
	if (!t->lost[cause])
		t->lost_since[cause] = since;
	if (!t->dropped_by[cause])
		t->first_drop[cause] = since;
	t->lost[cause] += n;
	t->dropped_by[cause] += n;
	t->dropped += n;
}

void count_drop(struct rthread *t, unsigned cause)
{
	count_drops(t, cause, 1, ftpad_trace_clock());
}

/* A LOST event is dated at the first of its drops, but never before an
 * event before it in the file (a signal handler's drop comes before the
 * rest of the interrupted chunk): the file stays in time order.  It says
 * at most UINT32_MAX drops: more take several. */
void put_lost(struct rthread *t, struct chunk *c, uint32_t room)
{
	uint64_t not_before = c->n ? c->ev[c->n - 1].time : t->handed_last;

	for (unsigned cause = 0; cause < FTPAD_LOST_CAUSES; cause++) {
		while (t->lost[cause] && c->n < room) {
			uint32_t n = t->lost[cause] > UINT32_MAX ? UINT32_MAX
								   : (uint32_t)t->lost[cause];
			uint64_t at = t->lost_since[cause] > not_before ? t->lost_since[cause]
									 : not_before;

			c->ev[c->n++] = (struct ftpad_event){ at,
				ftpad_event_what(FTPAD_EVENT_LOST, cause), n };
			t->lost[cause] -= n;
		}
	}
}

/*
 * ev into c, the thread's chunk, counted: step by step, so that a signal
 * that ends the process in between (end_by_signal()) can tell from open,
 * the slot and the count whether the event is in the chunk and counted.
 */
void write_event(struct rthread *t, struct chunk *c, struct ftpad_event ev)
{
	uint32_t n = c->n;

	t->open_index = n;
	t->events_at_open = t->events;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->open = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->events++;
	c->ev[n] = ev;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	c->n = n + 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->open = 0;
}

/*
 * One event on the calling thread: the entry and exit callbacks come
 * here, as do signal brackets.
 */
void record_event(unsigned kind, uint32_t site, uint32_t sp, bool entries_only)
{
	struct rthread *t = self;
	struct chunk *c;

	if (__atomic_load_n(&stopping, __ATOMIC_RELAXED))
		return;
	if (!t && !(t = thread_start()))
		return;
	if (__builtin_expect(__atomic_load_n(&foreign_clones, __ATOMIC_RELAXED), 0) &&
	    t->tid != gettid()) {
		uint64_t none = 0;

		if (__atomic_add_fetch(&foreign_drops, 1, __ATOMIC_RELAXED) == 1)
			__atomic_compare_exchange_n(&foreign_first, &none, ftpad_trace_clock(),
						    false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
		return;
	}
	/* A signal handler that interrupted this very function: dropped,
	 * counted (the interrupted event owns the chunk). */
	if (t->busy++) {
		count_drop(t, FTPAD_LOST_REENTERED);
		t->busy--;
		return;
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if ((max_depth || min_ticks) && !filters_keep(t, kind, sp, entries_only)) {
		/* filtered out: neither written nor dropped */
	} else if (c = t->cur, __builtin_expect(!c || c->n >= chunk_events - 1, 0) &&
				    (!make_room(t) || !(c = t->cur))) {
		count_drop(t, t->refused);
	} else {
		write_event(t, c, (struct ftpad_event){ ftpad_trace_clock(),
							ftpad_event_what(kind, site), sp });
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->busy--;
}

/* Clock ticks per nanosecond: CNTFRQ_EL0 says it on aarch64; the TSC is
 * timed against CLOCK_MONOTONIC for 2 ms (only with --time-filter). */
static double ticks_per_ns(void)
{
#if defined(__aarch64__)
	uint64_t hz;

	__asm__ volatile("mrs %0, cntfrq_el0" : "=r"(hz));
	return hz / 1e9;
#else
	struct timespec a, b;
	uint64_t t0, t1;
	int64_t ns;

	clock_gettime(CLOCK_MONOTONIC, &a);
	t0 = ftpad_trace_clock();
	do {
		clock_gettime(CLOCK_MONOTONIC, &b);
		ns = (b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec);
	} while (ns < 2000000);
	t1 = ftpad_trace_clock();
	return (double)(t1 - t0) / ns;
#endif
}

void set_filters(void)
{
	size_t ns;

	max_depth = setting_size(FTPAD_ENV_RECORD_DEPTH, 0, 1);
	if (max_depth > 1u << 20)
		max_depth = 1u << 20;
	ns = setting_size(FTPAD_ENV_RECORD_TIME_FILTER, 0, 1);
	min_ticks = 0;
	if (ns && !(min_ticks = (uint64_t)(ns * ticks_per_ns())))
		min_ticks = 1;
}

bool size_capped(void)
{
	return budget != UINT64_MAX;
}

/* The chunks, every one free; a session after another reuses the pool of
 * the one before when its size is the same. */
bool set_pool(void)
{
	size_t events = setting_size(FTPAD_ENV_RECORD_CHUNK, 4096, 2);
	size_t n = setting_size(FTPAD_ENV_RECORD_CHUNKS, 256, 1);
	size_t size = (sizeof(struct chunk) + events * sizeof(struct ftpad_event) + 63) & ~63ul;

	budget = setting_size(FTPAD_ENV_RECORD_SIZE, UINT64_MAX, 0);
	min_free_percent = setting_size(FTPAD_ENV_RECORD_MIN_FREE, 10, 0);
	if (min_free_percent > 100)
		min_free_percent = 100;
	space_limit = UINT64_MAX;
	ftpad_record_fast_limit = events - 1 > UINT32_MAX ? UINT32_MAX : events - 1;
	if (pool && (size != chunk_size || n != nchunks)) {
		munmap(pool, chunk_size * nchunks);
		pool = NULL;
	}
	chunk_events = events, nchunks = n, chunk_size = size;
	if (!pool) {
		pool = mmap(NULL, chunk_size * nchunks, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (pool == MAP_FAILED) {
			pool = NULL;
			ftpad_warn("ftpad: error: no memory for the trace buffers; not recording\n");
			return false;
		}
	}
	free_head = 0;
	full_head = NULL;
	ended_threads = NULL;
	for (size_t i = nchunks; i-- > 0;) {
		chunk_at(i)->index = i;
		put_free(chunk_at(i));
	}
	return true;
}

/*
 * A session after another: the threads met before start from zero, with
 * room for this session's --depth (none of them records until the ops is
 * registered; their chunks went back with the pool).
 */
bool reset_threads(void)
{
	for (struct rthread *t = threads; t; t = t->next) {
		t->cur = NULL;
		t->events = t->fast_events = t->dropped = 0;
		memset(t->lost, 0, sizeof(t->lost));
		memset(t->dropped_by, 0, sizeof(t->dropped_by));
		t->unwritten_since = 0;
		t->handed_last = 0;
		t->depth = 0;
		t->fd.fd = -1;
		t->file = 0;
		t->unwritten = 0;
		t->unwritten_err = 0;
		if (!max_depth)
			continue;
		if (t->open_sp)
			ftpad_free(t->open_sp);
		t->open_sp = ftpad_alloc(max_depth * sizeof(t->open_sp[0]));
		if (!t->open_sp)
			return false;
	}
	return true;
}

/* In a forked child: the parent's buffered events are the parent's, and
 * its reservations are settled by the parent, in the shared count. */
void forget_parent_buffers(void)
{
	full_head = NULL;
	ended_threads = NULL;
	free_head = 0;
	for (size_t i = 0; i < nchunks; i++)
		put_free(chunk_at(i));
	own_reserved = 0;
}
