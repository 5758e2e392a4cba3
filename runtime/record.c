/* SPDX-License-Identifier: MIT */
/*
 * record.c - the recorder: binary events into a trace directory
 * (docs/format.md "The trace directory", <ftpad_trace.h>), started once
 * from the environment that `ftpad record` sets, or in sessions that
 * `ftpad attach` starts and stops (attach.c), whose request holds the same
 * settings:
 *
 *   FTPAD_RECORD=DIR            the trace directory (made by `ftpad record`)
 *   FTPAD_RECORD_FILTER=globs   record these functions (default: all)
 *   FTPAD_RECORD_NOTRACE=globs  ... but not these
 *   FTPAD_RECORD_SIZE=bytes     cap on the trace's event bytes, all its processes (1 GiB)
 *   FTPAD_RECORD_CHUNK=n        events per chunk (default 4096: 64 KiB)
 *   FTPAD_RECORD_CHUNKS=n       chunks in the pool (default 256: 16 MiB)
 *   FTPAD_RECORD_DEPTH=n        only frames up to depth n per thread
 *   FTPAD_RECORD_TIME_FILTER=ns drop calls shorter than ns, childless ones
 *   FTPAD_EARLY=1               also the calls before main (early.c)
 *   FTPAD_RECORD_IMAGE=pid.n    set by the recorder itself: the image this
 *                               process writes, so an exec'ed program
 *                               continues into pid.(n+1) (exec_from=)
 *   FTPAD_RECORD_EXITS=0|1      attach only: exit events too (default 1)
 *
 * Hot path (record_event()): the thread's current chunk, in initial-exec
 * TLS, gets one 16-byte event: no lock, no system call.  A full chunk is
 * pushed on a lock-free list that a writer thread empties into
 * <image>/<tid>.events, giving the chunk back to a lock-free free list.
 * The writer looks every few milliseconds, and sooner when an eighth of
 * the pool waits for it (wake_writer()).  With no free chunk (or the --size budget spent),
 * events are dropped and counted per thread; the next event that fits is
 * preceded by a LOST event with the count.  The last slot of a chunk is
 * kept for that LOST event, so a count is never without a place to go
 * while the thread has a chunk.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arch.h"
#include "ftpad_trace.h"
#include "internal.h"
#include "quiesce.h"

#define TLS __thread __attribute__((tls_model("initial-exec")))

struct rthread;

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
	uint64_t lost;        /* dropped since its last LOST event */
	uint64_t events, dropped;
	uint32_t depth;       /* frames open, as --depth counts them */
	uint32_t *open_sp;    /* --depth: sp of the open frames 1..max_depth */
	int busy;             /* in record_event(): a signal handler's events drop */
	uint64_t fast_events; /* written by the fast path (trampoline_x86_64.S) */
	int pending;          /* the fast path holds a slot of cur: keep cur */
	uint64_t lost_since;  /* the clock at the first of the lost ones */
	int fd;               /* its events file, opened by the writer */
	pid_t tid;
	char comm[16];
	/* record_event() between its first and last step: the slot it takes
	 * and the count before, for end_by_signal(). */
	int open;
	uint32_t open_index;
	uint64_t events_at_open;
};

static char dir[PATH_MAX];  /* FTPAD_RECORD */
static char image[64];      /* "<pid>.<n>" */
static int started;         /* a trace is being recorded (or was, till exit) */
static pid_t recording_pid; /* the process whose trace it is (not a vfork child) */
/* atomic: no more events; read by the fast path too */
int stopping __asm__("ftpad_record_stopping") FTPAD_HIDDEN;
static int ended;           /* atomic: the trace's end is written */
static struct ftpad_ops record_ops;

/* The settings: the attach request of the session (NAME=VALUE\0...\0\0),
 * or the environment when there is none.  bad_setting: one had a value
 * that is not a number, which fails an attach (the environment's gets
 * the default and a warning, as always). */
static const char *request;
static bool bad_setting;
/* Session ends (stop, exit, fork) one at a time; a second one finds it
 * ended. */
static pthread_mutex_t end_lock = PTHREAD_MUTEX_INITIALIZER;
/* atomic: threads in ftpad_record_signal() or a thread's exit hand-over,
 * which no unregistering waits for: a stop waits for them instead. */
static int outside_ops;

static size_t chunk_events = 4096, nchunks = 256;
static char *pool;          /* nchunks chunks of chunk_size bytes */
static size_t chunk_size;
static uint64_t free_head;  /* atomic: tag << 32 | (index + 1) */
static struct chunk *full_head; /* atomic */
static unsigned nfull;      /* atomic: chunks in the full list */
static int writer_asleep;   /* atomic, a futex word: the writer waits on it */
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
static uint64_t own_reserved;
static uint64_t *reserved = &own_reserved;

/* Without FTPAD_RECORD_SIZE (--size): a trace nobody ends (a tool that
 * missed its Ctrl-C, a program that runs for ever) must not fill the
 * disk; past this, events are dropped and counted like any others. */
#define DEFAULT_BUDGET (1024ull << 20)
static struct rthread *threads; /* atomic list head */
static uint64_t bytes_written; /* under write_lock */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t writer;
static pthread_key_t thread_key;
TLS struct rthread *self __asm__("ftpad_record_self") FTPAD_HIDDEN;

/*
 * x86_64's fast recording path (trampoline_x86_64.S "Fast recording")
 * writes an event itself, with no C, when a site's ops is
 * ftpad_record_fast_ops: the recorder's, when no option needs C per event
 * (--depth, --time-filter).  It reads a site's event word from
 * ->trace_what, the thread from self, and keeps the chunk's last slot as
 * record_event() does (below ftpad_record_fast_limit).  The offsets it
 * uses are checked here.
 */
struct ftpad_ops *ftpad_record_fast_ops FTPAD_HIDDEN;
uint32_t ftpad_record_fast_limit FTPAD_HIDDEN;

/* The session patches exit sites (record, attach --graph).  Without, every
 * site is written `noexit`: the trace holds entries only, and a viewer
 * that expected exits would close each frame as unwound. */
static bool exits_recorded;

/* --depth (0: every depth) and --time-filter (0: every call, else ticks). */
static uint32_t max_depth;
static uint64_t min_ticks;

/* Site ids: each module's sites get a run of ids when first met. */
#define MAX_MODULES 1024
/* lines: the module's lines are in `sites` (under mods_lock). */
static struct {
	struct ftpad_module *m;
	uintptr_t lo;
	size_t nsites;
	uint32_t base;
	bool lines;
} mods[MAX_MODULES];
static unsigned nmods;      /* atomic: entries published */
static uint32_t next_id;    /* under mods_lock */
static int mods_lock;       /* atomic spin flag: events only try it */
static int sites_fd = -1;

_Static_assert(offsetof(struct rthread, cur) == 8 && offsetof(struct rthread, busy) == 56 &&
	       offsetof(struct rthread, fast_events) == 64 && offsetof(struct rthread, pending) == 72,
	       "trampoline_x86_64.S RT_*");
_Static_assert(offsetof(struct chunk, n) == 16 && offsetof(struct chunk, ev) == 24,
	       "trampoline_x86_64.S CH_*");
_Static_assert(offsetof(struct ftpad_site, trace_what) == 48, "trampoline_x86_64.S SITE_WHAT");

static struct chunk *chunk_at(uint32_t index)
{
	return (struct chunk *)(pool + (size_t)index * chunk_size);
}

/* Lock-free free list: the head carries a tag against ABA. */
static void put_free(struct chunk *c)
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
static void wake_writer(void)
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

/* A chunk within the --size budget, or NULL. */
static struct chunk *new_chunk(struct rthread *t)
{
	uint64_t bytes = chunk_events * sizeof(struct ftpad_event);
	struct chunk *c;

	if (__atomic_add_fetch(reserved, bytes, __ATOMIC_RELAXED) > budget) {
		__atomic_sub_fetch(reserved, bytes, __ATOMIC_RELAXED);
		return NULL;
	}
	c = take_free();
	if (!c) {
		__atomic_sub_fetch(reserved, bytes, __ATOMIC_RELAXED);
		return NULL;
	}
	c->owner = t;
	c->n = 0;
	return c;
}

/* Hand the thread's chunk to the writer, with its LOST count if any. */
static void hand_over(struct rthread *t)
{
	struct chunk *c = t->cur;

	if (!c)
		return;
	if (t->lost) {
		c->ev[c->n++] = (struct ftpad_event){ ftpad_trace_clock(),
			ftpad_event_what(FTPAD_EVENT_LOST, 0), (uint32_t)t->lost };
		t->lost = 0;
	}
	t->cur = NULL;
	put_full(c);
}

static void forget_thread_at_exit(void *arg)
{
	struct rthread *t = arg;

	/* A stop hands every thread's chunk over itself: not both at once. */
	__atomic_add_fetch(&outside_ops, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&stopping, __ATOMIC_SEQ_CST)) {
		t->busy++;
		hand_over(t);
		t->busy--;
	}
	__atomic_sub_fetch(&outside_ops, 1, __ATOMIC_RELEASE);
}

static struct rthread *thread_start(void)
{
	struct rthread *t = ftpad_alloc(sizeof(*t));

	if (!t)
		return NULL;
	if (max_depth && !(t->open_sp = ftpad_alloc(max_depth * sizeof(t->open_sp[0]))))
		return NULL;
	t->fd = -1;
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
static bool make_room(struct rthread *t)
{
	if (t->pending)
		return false;
	hand_over(t);
	t->cur = new_chunk(t);
	if (!t->cur)
		return false;
	if (t->lost) {
		t->cur->ev[t->cur->n++] = (struct ftpad_event){ ftpad_trace_clock(),
			ftpad_event_what(FTPAD_EVENT_LOST, 0), (uint32_t)t->lost };
		t->lost = 0;
	}
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

/* One event the thread could not keep: counted, and said by the next
 * LOST event. */
static void count_drop(struct rthread *t)
{
	if (!t->lost++)
		t->lost_since = ftpad_trace_clock();
	t->dropped++;
}

/*
 * ev into c, the thread's chunk, counted: step by step, so that a signal
 * that ends the process in between (end_by_signal()) can tell from open,
 * the slot and the count whether the event is in the chunk and counted.
 */
static void write_event(struct rthread *t, struct chunk *c, struct ftpad_event ev)
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
static void record_event(unsigned kind, uint32_t site, uint32_t sp, bool entries_only)
{
	struct rthread *t = self;
	struct chunk *c;

	if (__atomic_load_n(&stopping, __ATOMIC_RELAXED))
		return;
	if (!t && !(t = thread_start()))
		return;
	/* A signal handler that interrupted this very function: dropped,
	 * counted (the interrupted event owns the chunk). */
	if (t->busy++) {
		count_drop(t);
		t->busy--;
		return;
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if ((max_depth || min_ticks) && !filters_keep(t, kind, sp, entries_only)) {
		/* filtered out: neither written nor dropped */
	} else if (c = t->cur, __builtin_expect(!c || c->n >= chunk_events - 1, 0) &&
				    (!make_room(t) || !(c = t->cur))) {
		count_drop(t);
	} else {
		write_event(t, c, (struct ftpad_event){ ftpad_trace_clock(),
							ftpad_event_what(kind, site), sp });
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->busy--;
}

/* ---- site ids ---- */

static void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n, len -= n;
	}
}

/* docs/format.md "The trace directory": a site's kind and flags columns. */
static const char *kind_word(const struct ftpad_site *s)
{
	switch (ftpad_site_kind(s)) {
	case FTPAD_SITE_KIND_EXIT:
		return "exit";
	case FTPAD_SITE_KIND_TAIL_EXIT:
		return "tail-exit";
	default:
		return "entry";
	}
}

/* Text put at p, which has room for it: the end of what was put. */
static char *put_text(char *p, const char *text, size_t len)
{
	memcpy(p, text, len);
	return p + len;
}

static char *put_decimal(char *p, uint32_t v)
{
	char digits[10];
	int n = 0;

	do
		digits[n++] = (char)('0' + v % 10);
	while (v /= 10);
	while (n)
		*p++ = digits[--n];
	return p;
}

/* As printf's %#lx: 0x and lower-case digits, or a bare 0. */
static char *put_hex(char *p, unsigned long v)
{
	int shift = v ? (63 - __builtin_clzl(v)) / 4 * 4 : 0;

	if (v)
		p = put_text(p, "0x", 2);
	for (; shift >= 0; shift -= 4)
		*p++ = "0123456789abcdef"[(v >> shift) & 15];
	return p;
}

/* One line per site of m, entry and exit sites alike, in the module's
 * order (by address): a site's id is base + its index.  Written in
 * batches (one write per line cost an attach to 20,000 sites half its
 * start), and put together by hand: snprintf made these lines most of
 * the start of an attach to 100,000 sites.  The batch is static, as its
 * caller holds mods_lock and a callback's stack may be small; a line
 * longer than the batch goes out in pieces. */
static void write_site_lines(const struct ftpad_module *m, uint32_t base)
{
	static char batch[64 * 1024];
	const char *path = m->path ? m->path : "";
	size_t used = 0, path_len = strlen(path);

	for (size_t i = 0; i < m->nsites; i++) {
		const struct ftpad_site *s = &m->sites[i];
		const char *kind = kind_word(s), *name = s->name ? s->name : "";
		const char *flags = !exits_recorded || ftpad_site_entries_only(s) ? "noexit" : "-";
		size_t name_len = strlen(name);
		/* id, kind, address, flags, name, path and their separators */
		size_t len = 10 + strlen(kind) + 18 + strlen(flags) + name_len + path_len + 6;
		char head[64], *p;

		if (len > sizeof(batch) - used) {
			write_all(sites_fd, batch, used);
			used = 0;
		}
		p = len > sizeof(batch) ? head : batch + used;
		p = put_decimal(p, base + (uint32_t)i);
		*p++ = '\t';
		p = put_text(p, kind, strlen(kind));
		*p++ = '\t';
		p = put_hex(p, (unsigned long)s->entry);
		*p++ = '\t';
		p = put_text(p, flags, strlen(flags));
		*p++ = '\t';
		if (len > sizeof(batch)) { /* a name longer than the batch */
			write_all(sites_fd, head, p - head);
			write_all(sites_fd, name, name_len);
			write_all(sites_fd, "\t", 1);
			write_all(sites_fd, path, path_len);
			write_all(sites_fd, "\n", 1);
			continue;
		}
		p = put_text(p, name, name_len);
		*p++ = '\t';
		p = put_text(p, path, path_len);
		*p++ = '\n';
		used = p - batch;
	}
	write_all(sites_fd, batch, used);
}

/* Each site's event word, for the fast path: its kind and id (base +
 * its index), plus one. */
static void set_trace_what(struct ftpad_module *m, uint32_t base)
{
	for (size_t i = 0; i < m->nsites; i++) {
		struct ftpad_site *s = &m->sites[i];
		unsigned kind = ftpad_site_kind(s) == FTPAD_SITE_KIND_EXIT	  ? FTPAD_EVENT_EXIT
				: ftpad_site_kind(s) == FTPAD_SITE_KIND_TAIL_EXIT ? FTPAD_EVENT_TAIL_EXIT
										  : FTPAD_EVENT_ENTRY;

		__atomic_store_n(&s->trace_what, ftpad_event_what(kind, base + (uint32_t)i) + 1,
				 __ATOMIC_RELAXED);
	}
}

static int module_slot(const struct ftpad_module *m)
{
	unsigned n = __atomic_load_n(&nmods, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < n; i++)
		if (mods[i].m == m && mods[i].lo == m->lo && mods[i].nsites == m->nsites)
			return i;
	return -1;
}

/* m's first id, published with its lines written to `sites` first
 * (lines), or for them to be written later (write_pending_lines()); -1 if
 * busy or full. */
static int64_t publish_module(struct ftpad_module *m, bool lines)
{
	int i = module_slot(m);

	if (i >= 0)
		return mods[i].base;
	if (__atomic_exchange_n(&mods_lock, 1, __ATOMIC_ACQUIRE))
		return -1; /* another thread (or the interrupted one) adds one */
	i = module_slot(m);
	if (i < 0 && nmods < MAX_MODULES) {
		i = nmods;
		mods[i].m = m, mods[i].lo = m->lo, mods[i].nsites = m->nsites;
		mods[i].base = next_id;
		mods[i].lines = lines;
		next_id += m->nsites;
		if (lines)
			write_site_lines(m, mods[i].base);
		set_trace_what(m, mods[i].base);
		__atomic_store_n(&nmods, i + 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&mods_lock, 0, __ATOMIC_RELEASE);
	return i < 0 ? -1 : (int64_t)mods[i].base;
}

/* A module first met by an event: its lines at once. */
static int64_t module_base(struct ftpad_module *m)
{
	return publish_module(m, true);
}

/* The id of site s (NULL: -1): O(modules) once its module has ids. */
static int64_t id_of(const struct ftpad_site *s)
{
	struct ftpad_module *m = s ? ftpad_module_of(ftpad_site_addr(s)) : NULL;
	int64_t base;

	if (!m || (base = module_base(m)) < 0)
		return -1;
	return base + (s - m->sites);
}

/* Site s's event, or, when its module has no ids (the table of modules
 * was busy or full), one dropped and counted. */
static void record_site(unsigned kind, const struct ftpad_site *s, struct ftpad_regs *regs)
{
	int64_t id = id_of(s);

	if (id < 0) {
		if (self)
			count_drop(self);
		return;
	}
	record_event(kind, (uint32_t)id, (uint32_t)ftpad_regs_get_stack_pointer(regs),
		     kind == FTPAD_EVENT_ENTRY && ftpad_site_entries_only(s));
}

static void record_entry(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
			 struct ftpad_regs *regs)
{
	(void)parent_ip, (void)ops;
	record_site(FTPAD_EVENT_ENTRY, ftpad_site_by_entry(ip), regs);
}

/* An exit or tail exit, at the exit site the dispatch is running for. */
static void record_exit(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
			struct ftpad_regs *regs)
{
	const struct ftpad_site *s = ftpad_slot->exit_site;

	(void)ip, (void)parent_ip, (void)ops;
	record_site(s && ftpad_site_kind(s) == FTPAD_SITE_KIND_TAIL_EXIT ? FTPAD_EVENT_TAIL_EXIT
									 : FTPAD_EVENT_EXIT,
		    s, regs);
}

/* ---- the writer ---- */

static void open_events(struct rthread *t)
{
	char path[PATH_MAX + 96];
	struct ftpad_trace_thread_header h = {
		.magic = FTPAD_TRACE_MAGIC,
		.version = FTPAD_TRACE_VERSION,
		.header_size = sizeof(h),
		.event_size = sizeof(struct ftpad_event),
#if defined(__x86_64__)
		.arch = FTPAD_ARCH_X86_64,
#else
		.arch = FTPAD_ARCH_AARCH64,
#endif
		.pid = getpid(),
		.tid = t->tid,
	};

	memcpy(h.comm, t->comm, sizeof(h.comm));
	snprintf(path, sizeof(path), "%s/%s/%d.events", dir, image, t->tid);
	t->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (t->fd < 0) {
		ftpad_warn("ftpad: error: cannot create '%s': %s; its events are lost\n", path,
			   strerror(errno));
		return;
	}
	write_all(t->fd, &h, sizeof(h));
	bytes_written += sizeof(h);
}

/* Write every full chunk, oldest first, and free it. */
static void drain(void)
{
	struct chunk *c, *list = NULL;

	pthread_mutex_lock(&write_lock);
	c = __atomic_exchange_n(&full_head, NULL, __ATOMIC_ACQUIRE);
	while (c) { /* pushed newest first: reverse */
		struct chunk *next = c->next;

		c->next = list, list = c, c = next;
		__atomic_sub_fetch(&nfull, 1, __ATOMIC_RELAXED);
	}
	while ((c = list)) {
		size_t len = c->n * sizeof(struct ftpad_event);

		list = c->next;
		if (c->owner->fd < 0)
			open_events(c->owner);
		if (c->owner->fd >= 0) {
			write_all(c->owner->fd, c->ev, len);
			bytes_written += len;
		}
		__atomic_sub_fetch(reserved, chunk_events * sizeof(struct ftpad_event) - len,
				   __ATOMIC_RELAXED);
		put_free(c);
	}
	pthread_mutex_unlock(&write_lock);
}

/* Until the next look: the pause, or a wake_writer() (or a stop's). */
static void writer_pause(void)
{
	const struct timespec pause = { 0, 2000000 };

	__atomic_store_n(&writer_asleep, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&nfull, __ATOMIC_SEQ_CST) < nchunks / 8 &&
	    !__atomic_load_n(&stopping, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &writer_asleep, FUTEX_WAIT_PRIVATE, 1, &pause, NULL, 0);
	__atomic_store_n(&writer_asleep, 0, __ATOMIC_RELAXED);
}

static void *writer_main(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
		drain();
		writer_pause();
	}
	return NULL;
}

/*
 * The program's signals are not the runtime's threads' (the writer's, the
 * attach control thread's); but the patch protocol needs SIGTRAP (x86_64
 * int3) and the stop signal (aarch64 MOVs) to reach every thread, or it
 * refuses sites it cannot write without them (exit sites may cross a cache
 * line), and faults stay faults.
 */
void ftpad_runtime_thread_mask(sigset_t *mask)
{
	const int open_signals[] = { SIGTRAP, FTPAD_STOP_SIGNAL, SIGSEGV, SIGBUS, SIGILL, SIGFPE };

	sigfillset(mask);
	for (size_t i = 0; i < sizeof(open_signals) / sizeof(open_signals[0]); i++)
		sigdelset(mask, open_signals[i]);
}

int ftpad_runtime_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg,
			       bool detached)
{
	pthread_attr_t attr;
	sigset_t mask;
	int err;

	ftpad_runtime_thread_mask(&mask);
	err = pthread_attr_init(&attr);
	if (err)
		return -err;
	if (detached)
		err = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (!err)
		err = pthread_attr_setsigmask_np(&attr, &mask);
	if (!err)
		err = pthread_create(thread, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return -err;
}

static int writer_running;

static void start_writer(void)
{
	sigset_t all, old;

	ftpad_runtime_thread_mask(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	writer_running = !pthread_create(&writer, NULL, writer_main, NULL);
	if (writer_running) /* named before the start is answered */
		pthread_setname_np(writer, "ftpad-writer");
	else
		ftpad_warn("ftpad: error: cannot start the trace writer; events are written at exit\n");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- info and image files ---- */

static void append_file(const char *name, const char *text)
{
	char path[PATH_MAX + 96];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	write_all(fd, text, strlen(text));
	close(fd);
}

/* info begins with format=: written by `ftpad record`, or here when the
 * program was started with FTPAD_RECORD alone (a static aarch64 program
 * under qemu, say), so that the viewers read that directory too. */
static void create_info(void)
{
	char path[PATH_MAX + 96];
	int fd;

	snprintf(path, sizeof(path), "%s/info", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return; /* there already, or the appends below will say nothing either */
	write_all(fd, "format=1\n", 9);
	close(fd);
}

static void append_image(const char *text)
{
	char name[96];

	snprintf(name, sizeof(name), "%s/image", image);
	append_file(name, text);
}

static void clock_sync(void)
{
	char line[96];

	ftpad_clock_sync_line(line, sizeof(line));
	append_file("info", line);
}

static void read_cmdline(char *out, size_t size)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? 0 : read(fd, out, size - 1);

	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	for (ssize_t i = 0; i < n; i++)
		if (!out[i] || out[i] == '\n')
			out[i] = i == n - 1 ? 0 : ' ';
	out[n] = 0;
}

/* <pid>.<n>/ with its image file; sites copied from parent_sites if set. */
static int make_image(const char *how, const char *from)
{
	char path[PATH_MAX + 96], text[PATH_MAX * 2 + 256], exe[PATH_MAX] = "", argv[2048];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, image);
	if (mkdir(path, 0755) && errno != EEXIST) {
		ftpad_warn("ftpad: error: cannot create '%s': %s; not recording\n", path,
			   strerror(errno));
		return -1;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	read_cmdline(argv, sizeof(argv));
	snprintf(text, sizeof(text), "pid=%d\nppid=%d\nexe=%s\nargv=%s\n%s%s%s", getpid(),
		 getppid(), exe, argv, how ? how : "", how ? from : "", how ? "\n" : "");
	append_image(text);
	snprintf(path, sizeof(path), "%s/%s/sites", dir, image);
	if (sites_fd >= 0)
		close(sites_fd);
	sites_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	/* An exec continues `ftpad record`'s trace; an attach session's ends
	 * there (nor would setenv() on its thread be safe for the program). */
	if (!request)
		setenv(FTPAD_ENV_RECORD_IMAGE, image, 1);
	return sites_fd < 0 ? -1 : 0;
}

static void copy_sites(const char *from_image)
{
	char path[PATH_MAX + 96], buf[65536];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s/sites", dir, from_image);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		write_all(sites_fd, buf, n);
	close(fd);
}

/* ---- start, fork, exec, end ---- */

/* Drops of a thread that got no chunk again (budget spent, no free chunk)
 * have no next event to precede: their LOST event ends its file, at the
 * time the drops began, so that every drop is in the trace (16 bytes a
 * thread beyond --size at most). */
static void write_last_lost(void)
{
	pthread_mutex_lock(&write_lock);
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
		struct ftpad_event e = { t->lost_since, ftpad_event_what(FTPAD_EVENT_LOST, 0),
					 (uint32_t)t->lost };

		if (!t->lost || t->cur)
			continue;
		if (t->fd < 0)
			open_events(t);
		if (t->fd >= 0) {
			write_all(t->fd, &e, sizeof(e));
			bytes_written += sizeof(e);
		}
		t->lost = 0;
	}
	pthread_mutex_unlock(&write_lock);
}

/* Every thread's events, written now (at exit, exec). */
static void flush_all(void)
{
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next)
		hand_over(t);
	drain();
	write_last_lost();
}

static void count_totals(struct ftpad_record_totals *tot)
{
	tot->events = tot->dropped = tot->fast = 0;
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
		tot->events += t->events + t->fast_events, tot->dropped += t->dropped;
		tot->fast += t->fast_events;
	}
	pthread_mutex_lock(&write_lock);
	tot->bytes = bytes_written;
	pthread_mutex_unlock(&write_lock);
}

/* The image's end: its totals (its `enabled` counts the sites enabled
 * now, so a stop calls this before its sites go off). */
static void write_stats(const struct ftpad_stats *st)
{
	struct ftpad_record_totals tot;
	char text[320];

	count_totals(&tot);
	snprintf(text, sizeof(text),
		 "sites=%u\nenabled=%lu\nevents=%llu\ndropped=%llu\nbytes=%llu\nfast_events=%llu\n",
		 next_id, st->enabled, (unsigned long long)tot.events,
		 (unsigned long long)tot.dropped, (unsigned long long)tot.bytes,
		 (unsigned long long)tot.fast);
	append_image(text);
	clock_sync();
}

/* No more events: wait for the threads that record outside the ops (a
 * signal's bracket, a thread's exit), which no unregistering waits for.
 * Bounded: a thread stopped there for a second loses its event. */
static void stop_events(void)
{
	__atomic_store_n(&stopping, 1, __ATOMIC_SEQ_CST);
	wake_writer();
	for (int i = 0; i < 1000 && __atomic_load_n(&outside_ops, __ATOMIC_SEQ_CST); i++)
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
}

/* The enabled= of an end from a signal handler, which must not count the
 * sites (ftpad_get_stats() takes the ops lock, which the thread it
 * interrupted may hold): the count once the trace began. */
static unsigned long enabled_at_start;
/* atomic: the thread in record_end(), and whether that end is done */
static pid_t ending_tid;
static int end_done;

/* The trace's end, as at exit.  wait: take end_lock even if that means
 * waiting; otherwise give up when another end holds it (it writes the
 * buffers itself).  in_handler: from a signal handler (end_by_signal()). */
static void record_end(bool wait, bool in_handler)
{
	struct ftpad_stats st = { .sz = sizeof(st) };

	if (wait)
		pthread_mutex_lock(&end_lock);
	else if (pthread_mutex_trylock(&end_lock))
		return;
	__atomic_store_n(&ending_tid, gettid(), __ATOMIC_RELAXED);
	if (started && !__atomic_exchange_n(&ended, 1, __ATOMIC_ACQ_REL)) {
		/* Threads still running stop adding events first, so that no
		 * chunk is written to while it is handed over (one already
		 * inside record_event() may still finish its event: a narrow
		 * window). */
		if (in_handler)
			st.enabled = enabled_at_start;
		else
			ftpad_get_stats(&st);
		stop_events();
		flush_all();
		write_stats(&st);
		__atomic_store_n(&end_done, 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&ending_tid, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&end_lock);
}

/*
 * A signal whose default action ends the process (a crash, abort(),
 * Ctrl-C, kill, a closed pipe) would take the buffered events with it,
 * the very ones that tell what happened.  While a program is recorded
 * from its start (not in an attach session: that process is not ours to
 * change), each of these that it leaves at the default action is caught
 * by end_by_signal(): the trace ends as at exit, then the default action
 * is back and the signal raised again, so the process ends by it as it
 * would have, core dump and exit status included.  A handler the program
 * installs replaces it, as it would the default (sighooks.c shows the
 * default to a query, and puts this one back for SIG_DFL).  SIGKILL cannot
 * be caught: an image so killed has no totals, which ftpad record says.
 */
static const int ending_signals[] = { SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGABRT, SIGBUS,
				      SIGFPE, SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM,
				      SIGTERM, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGSYS };

/* glibc's, as sighooks.c calls it: not the interposed sigaction. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* The event this thread was writing when a signal came, settled: in the
 * trace and counted, or neither and counted as dropped.  uc: the
 * signal's context. */
static void settle_open_event(struct rthread *t, const void *uc)
{
	struct chunk *c = t->cur;

	if (c && ftpad_arch_record_slot_open(uc)) {
		c->n--; /* the fast path's: reserved, maybe half written */
		count_drop(t);
	} else if (c && t->open) {
		bool in = c->n == t->open_index + 1, counted = t->events != t->events_at_open;

		if (counted && !in)
			t->events--;
		if (!in)
			count_drop(t);
		t->open = 0;
	}
}

static void end_by_signal(int sig, siginfo_t *info, void *uc)
{
	struct rthread *t = self;
	int saved = errno;

	(void)info;
	if (t)
		settle_open_event(t, uc);
	if (__atomic_load_n(&started, __ATOMIC_ACQUIRE) && getpid() == recording_pid) {
		record_end(false, true);
		/* Another thread's end (a crash on two threads, or exit()
		 * meeting a kill): let it finish, for at most two seconds. */
		for (int i = 0; i < 2000 && !__atomic_load_n(&end_done, __ATOMIC_ACQUIRE) &&
				__atomic_load_n(&ending_tid, __ATOMIC_RELAXED) != gettid() &&
				__atomic_load_n(&ended, __ATOMIC_ACQUIRE); i++)
			nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	/* SA_RESETHAND put the default action back, and every signal is
	 * blocked here: the process ends by sig as this returns. */
	raise(sig);
	errno = saved;
}

/* Its action: sa_mask (every signal) is filled in by catch_ending_signals(),
 * which then sets catching (atomic). */
static struct sigaction ending_action = {
	.sa_sigaction = end_by_signal,
	.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK | SA_RESTART,
};
static int catching;

static bool is_ending_signal(int sig)
{
	for (size_t i = 0; i < sizeof(ending_signals) / sizeof(ending_signals[0]); i++)
		if (ending_signals[i] == sig)
			return true;
	return false;
}

/* sighooks.c: the action that stands for SIG_DFL while the program is
 * recorded, or NULL. */
const struct sigaction *ftpad_record_default_action(int sig)
{
	if (!__atomic_load_n(&catching, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&started, __ATOMIC_ACQUIRE) || request || !is_ending_signal(sig))
		return NULL;
	return &ending_action;
}

bool ftpad_record_is_default_action(const struct sigaction *act)
{
	return (act->sa_flags & SA_SIGINFO) && act->sa_sigaction == end_by_signal;
}

static void catch_ending_signals(void)
{
	struct sigaction old;

	sigfillset(&ending_action.sa_mask);
	for (size_t i = 0; i < sizeof(ending_signals) / sizeof(ending_signals[0]); i++) {
		int sig = ending_signals[i];

		if (!__sigaction(sig, NULL, &old) && !(old.sa_flags & SA_SIGINFO) &&
		    old.sa_handler == SIG_DFL)
			__sigaction(sig, &ending_action, NULL);
	}
	__atomic_store_n(&catching, 1, __ATOMIC_RELEASE);
}

__attribute__((destructor(101))) static void record_stop(void)
{
	record_end(true, false);
}

/*
 * exechooks.c: _exit() and _Exit() skip the destructors, so the trace ends
 * here as at exit.  Not in a vfork child: it shares its parent's memory,
 * buffers and writer included, while the parent waits to go on recording
 * (no fork handler ran, so the pid tells).  And not when another end is
 * under way: a signal handler's _exit must not wait for a lock that the
 * thread it interrupted may hold.
 */
void ftpad_record_before_exit(void)
{
	if (__atomic_load_n(&started, __ATOMIC_ACQUIRE) && getpid() == recording_pid)
		record_end(false, false);
}

/* The files of a trace that ended, closed, so that the next session's
 * trace gets its own. */
static void close_trace_files(void)
{
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next)
		if (t->fd >= 0)
			close(t->fd), t->fd = -1;
	if (sites_fd >= 0)
		close(sites_fd), sites_fd = -1;
}

/*
 * attach.c: the end of a session.  The sites go off first (unregistering
 * waits until no callback runs any more); then every buffer is written,
 * the image ended as at exit, and the writer joined.  If the process's
 * exit (or a fork's child) ended the trace first, only the totals.
 */
void ftpad_record_session_stop(struct ftpad_record_totals *tot)
{
	struct ftpad_stats st = { .sz = sizeof(st) };

	pthread_mutex_lock(&end_lock);
	if (started && !__atomic_load_n(&ended, __ATOMIC_ACQUIRE)) {
		ftpad_get_stats(&st);
		ftpad_unregister_ops(&record_ops);
		stop_events();
		if (writer_running)
			pthread_join(writer, NULL);
		writer_running = 0;
		flush_all();
		write_stats(&st);
		__atomic_store_n(&ended, 1, __ATOMIC_RELEASE);
	}
	count_totals(tot);
	if (started)
		close_trace_files();
	started = 0;
	request = NULL;
	pthread_mutex_unlock(&end_lock);
}

/* --depth in a forked child: the forking thread's frames are still open. */
static void keep_depth(const struct rthread *forker)
{
	struct rthread *t;

	if (!max_depth || !forker || !(t = thread_start()))
		return;
	t->depth = forker->depth;
	memcpy(t->open_sp, forker->open_sp, max_depth * sizeof(t->open_sp[0]));
}

/*
 * The child of an attached process: no control thread came with it, so it
 * leaves the session at once.  Its sites go back to NOPs (in its own copy
 * of the text), it writes nothing (its parent's buffers are the parent's)
 * and it can be attached to on its own.  If the fork came from inside a
 * callback or while libftpad was patching, the sites cannot be written
 * here: they stay, calling a recorder that records nothing.
 */
static void leave_session_in_child(void)
{
	__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
	outside_ops = 0;
	ftpad_unregister_ops_timeout(&record_ops, 1000);
	full_head = NULL;
	for (struct rthread *t = threads; t; t = t->next)
		t->cur = NULL;
	pthread_mutex_init(&write_lock, NULL);
	pthread_mutex_init(&end_lock, NULL);
	mods_lock = 0;
	writer_running = 0;
	close_trace_files();
	started = 0;
	request = NULL;
}

static void after_fork_child(void)
{
	char parent[sizeof(image)];
	struct rthread *forker = self;

	if (!started || ended)
		return;
	if (request) {
		leave_session_in_child();
		return;
	}
	/* The parent's buffered events are the parent's: forget them. */
	full_head = NULL;
	free_head = 0;
	for (size_t i = 0; i < nchunks; i++)
		put_free(chunk_at(i));
	/* Its reservations are settled by the parent, in the shared count. */
	own_reserved = 0;
	bytes_written = 0;
	pthread_mutex_init(&write_lock, NULL);
	threads = NULL;
	self = NULL;
	mods_lock = 0;
	snprintf(parent, sizeof(parent), "%s", image);
	recording_pid = getpid();
	snprintf(image, sizeof(image), "%d.0", getpid());
	if (make_image("forked_from=", parent)) {
		__atomic_store_n(&stopping, 1, __ATOMIC_RELEASE);
		return;
	}
	copy_sites(parent);
	clock_sync();
	start_writer();
	keep_depth(forker);
}

/* The image this process writes: after an exec of a recorded one, the next. */
static void name_image(const char **how, char *from, size_t size)
{
	const char *env = getenv(FTPAD_ENV_RECORD_IMAGE);
	int pid, n;

	*how = NULL;
	if (env && sscanf(env, "%d.%d", &pid, &n) == 2) {
		snprintf(from, size, "%s", env);
		if (pid == getpid()) {
			*how = "exec_from=";
			snprintf(image, sizeof(image), "%d.%d", pid, n + 1);
			return;
		}
		*how = "forked_from="; /* vfork, posix_spawn: no fork handler ran */
	}
	snprintf(image, sizeof(image), "%d.0", getpid());
}

/* A setting of this session: its attach request's, or the environment's. */
static const char *setting(const char *name)
{
	return request ? ftpad_request_value(request, name) : getenv(name);
}

static size_t setting_size(const char *name, size_t def, size_t min)
{
	const char *v = setting(name);
	char *end;
	unsigned long long n;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (*end || n < min || errno || *v == '-') {
		ftpad_warn("ftpad: error: %s='%s' is not a number >= %zu; using %zu\n", name, v,
			   min, def);
		bad_setting = true;
		return def;
	}
	return n;
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

static void set_filters(void)
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

/* The chunks, every one free; a session after another reuses the pool of
 * the one before when its size is the same. */
static bool set_pool(void)
{
	size_t events = setting_size(FTPAD_ENV_RECORD_CHUNK, 4096, 2);
	size_t n = setting_size(FTPAD_ENV_RECORD_CHUNKS, 256, 1);
	size_t size = (sizeof(struct chunk) + events * sizeof(struct ftpad_event) + 63) & ~63ul;

	budget = setting_size(FTPAD_ENV_RECORD_SIZE, DEFAULT_BUDGET, 0);
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
static bool reset_threads(void)
{
	for (struct rthread *t = threads; t; t = t->next) {
		t->cur = NULL;
		t->lost = t->events = t->fast_events = t->dropped = 0;
		t->lost_since = 0;
		t->depth = 0;
		t->fd = -1;
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

/*
 * --early (FTPAD_EARLY): the calls early.c recorded before main, on this
 * thread, become its first events; those of other threads (rare before
 * main) and those the early buffer could not hold are counted as dropped.
 */
static void take_early(void)
{
	size_t n, dropped;
	const struct ftpad_early_entry *e;
	struct rthread *t;
	pid_t me = gettid();

	if (!ftpad_early_active())
		return;
	e = ftpad_early_stop(&n, &dropped);
	t = self ? self : thread_start();
	if (!t)
		return;
	if (dropped && !t->lost)
		t->lost_since = ftpad_trace_clock();
	t->lost += dropped, t->dropped += dropped;
	for (size_t i = 0; i < n; i++) {
		const struct ftpad_site *s = e[i].exit_site ? e[i].exit_site
							    : ftpad_site_by_entry(e[i].ip);
		int64_t id = e[i].tid == me ? id_of(s) : -1;
		unsigned kind = !e[i].exit_site ? FTPAD_EVENT_ENTRY
				: ftpad_site_kind(s) == FTPAD_SITE_KIND_TAIL_EXIT ? FTPAD_EVENT_TAIL_EXIT
										   : FTPAD_EVENT_EXIT;

		if (id < 0 || ((!t->cur || t->cur->n >= chunk_events - 1) && !make_room(t))) {
			count_drop(t);
			continue;
		}
		write_event(t, t->cur, (struct ftpad_event){ e[i].time,
			ftpad_event_what(kind, (uint32_t)id), e[i].sp });
	}
}

/* The modules, oldest first (ids go to the oldest first); n of them. */
static size_t list_modules(struct ftpad_module **list)
{
	size_t n = 0;

	for (struct ftpad_module *m = ftpad_modules(); m && n < MAX_MODULES; m = m->next)
		list[n++] = m;
	for (size_t i = 0; i < n / 2; i++) {
		struct ftpad_module *t = list[i];

		list[i] = list[n - 1 - i], list[n - 1 - i] = t;
	}
	return n;
}

/* A module without ids in this trace: a session before this one gave
 * its sites ids (set_trace_what()), which the fast path must not write
 * into this one's trace, so each of its sites takes the C path, which
 * gives the module this session's ids, till then. */
static void forget_trace_what(struct ftpad_module *m)
{
	for (size_t i = 0; i < m->nsites; i++)
		__atomic_store_n(&m->sites[i].trace_what, 0, __ATOMIC_RELAXED);
}

/*
 * Before anything is patched: ids for the sites of every module (read
 * now if they were not yet), their lines left for register_modules(), so
 * that the first events already take the fast path.  Nothing records
 * yet, so the lock is free.
 */
static void publish_modules(void)
{
	static struct ftpad_module *list[MAX_MODULES];
	size_t n;

	ftpad_modules_try_refresh();
	n = list_modules(list);
	for (size_t i = 0; i < n; i++)
		if (publish_module(list[i], false) < 0)
			forget_trace_what(list[i]);
}

/* The lines publish_modules() left, of the modules still listed, as
 * register_modules() always read them (after the patching, outside any
 * hold).  A module unloaded between the patching and here gets no lines:
 * the few events it may have recorded meanwhile are ones the viewers
 * count as of unknown sites. */
static void write_pending_lines(struct ftpad_module *const *list, size_t n)
{
	while (__atomic_exchange_n(&mods_lock, 1, __ATOMIC_ACQUIRE))
		sched_yield(); /* an event adding a module: brief */
	for (size_t k = 0; k < n; k++) {
		int i = module_slot(list[k]);

		if (i >= 0 && !mods[i].lines) {
			write_site_lines(list[k], mods[i].base);
			mods[i].lines = true;
		}
	}
	__atomic_store_n(&mods_lock, 0, __ATOMIC_RELEASE);
}

/* After the patching: ids for the modules loaded meanwhile, and every
 * module's lines, before the writer starts and puts any event in a file. */
static void register_modules(void)
{
	static struct ftpad_module *list[MAX_MODULES];
	size_t n = list_modules(list);

	for (size_t i = 0; i < n; i++)
		module_base(list[i]);
	write_pending_lines(list, n);
}

static void record_stop(void);

/* Once per process, at its first start: what every session shares. */
static int setup_once(void)
{
	static bool done;

	if (done)
		return 0;
	if (pthread_key_create(&thread_key, forget_thread_at_exit))
		return -EAGAIN;
	pthread_atfork(NULL, NULL, after_fork_child);
	atexit(record_stop);
	done = true;
	return 0;
}

static void write_info_head(void)
{
	create_info();
	append_file("info",
#if defined(__x86_64__)
		    "arch=x86_64\nclock=tsc\n"
#else
		    "arch=aarch64\nclock=cntvct\n"
#endif
	);
}

static int register_record_ops(bool exits)
{
	const char *filter = setting(FTPAD_ENV_RECORD_FILTER);
	const char *notrace = setting(FTPAD_ENV_RECORD_NOTRACE);
	int err = 0;

	record_ops.func = record_entry;
	/* Entries only: with no exit callback, no exit site is patched. */
	record_ops.exit_func = exits ? record_exit : NULL;
	/* No FTPAD_OPS_FL_RECURSION: busy keeps record_event() from
	 * recursing, and the guard would silently drop the events of a
	 * signal handler that came during a callback. */
	record_ops.flags = 0;
	ftpad_record_fast_ops = max_depth || min_ticks ? NULL : &record_ops;
	/* Reset, as a session's may follow another's; no glob: every site. */
	err = ftpad_set_filter(&record_ops, filter ? filter : "", 1);
	if (!err)
		err = ftpad_set_notrace(&record_ops, notrace ? notrace : "", 1);
	if (!err)
		err = ftpad_register_ops(&record_ops);
	if (err)
		ftpad_warn("ftpad: error: cannot start recording into '%s': %s\n", dir,
			   ftpad_strerror(err));
	return err;
}

/* The trace's shared count of reserved bytes (reserved, above); fresh:
 * this is the trace's first image, which zeroes it. */
static void map_budget(bool fresh)
{
	char path[PATH_MAX + 16];
	void *p = MAP_FAILED;
	int fd;

	if (reserved != &own_reserved)
		munmap(reserved, sizeof(*reserved));
	reserved = &own_reserved;
	own_reserved = 0;
	snprintf(path, sizeof(path), "%s/.budget", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | (fresh ? O_TRUNC : 0), 0644);
	if (fd >= 0 && !ftruncate(fd, sizeof(*reserved)))
		p = mmap(NULL, sizeof(*reserved), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p != MAP_FAILED)
		reserved = p;
	else
		ftpad_warn("ftpad: warning: cannot map '%s': %s; --size counts this process's "
			   "events only\n", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/*
 * Start a trace into trace_dir, image already named (how/from: how it
 * continues another one); the settings come from setting().  0, or a
 * negative errno, said through ftpad_warn() too; registering failed
 * leaves the trace started, with nothing patched.
 */
static int begin(const char *trace_dir, const char *how, const char *from, bool exits)
{
	int err;

	if (strlen(trace_dir) >= sizeof(dir) - 64) {
		ftpad_warn("ftpad: error: FTPAD_RECORD is too long; not recording\n");
		return -ENAMETOOLONG;
	}
	strcpy(dir, trace_dir);
	bad_setting = false;
	set_filters();
	err = setup_once();
	if (!err && !set_pool())
		err = -ENOMEM;
	if (!err && bad_setting && request)
		err = -EINVAL;
	if (!err && !reset_threads())
		err = -ENOMEM;
	/* Its own site ids and byte count: a new trace directory. */
	nmods = next_id = 0;
	mods_lock = 0;
	bytes_written = 0;
	if (!err && make_image(how, from))
		err = errno ? -errno : -EIO;
	if (err)
		return err;
	map_budget(!how);
	if (!how)
		write_info_head();
	clock_sync();
	recording_pid = getpid();
	__atomic_store_n(&stopping, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ended, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
	exits_recorded = exits;
	publish_modules();
	err = register_record_ops(exits);
	if (err)
		return err;
	register_modules();
	if (!request) {
		struct ftpad_stats st = { .sz = sizeof(st) };

		if (!ftpad_get_stats(&st))
			enabled_at_start = st.enabled;
		catch_ending_signals();
	}
	take_early();
	/* After the first patching: a thread being created has every signal
	 * blocked for a moment, and a site patched through int3 would then be
	 * refused. */
	start_writer();
	return 0;
}

/* From the start-up: `ftpad record`'s trace, if FTPAD_RECORD names one. */
void ftpad_record_start(void)
{
	const char *env = getenv(FTPAD_ENV_RECORD), *how;
	char from[64];

	if (!env || !*env || started)
		return;
	name_image(&how, from, sizeof(from));
	begin(env, how, from, true);
}

/*
 * attach.c: a session of `ftpad attach`, whose request (kept by the caller
 * until the stop) gives the settings.  -EBUSY when a trace is being
 * recorded.  On an error nothing stays patched nor started.
 */
int ftpad_record_session_start(const char *req, unsigned *sites, unsigned long *enabled)
{
	struct ftpad_stats st = { .sz = sizeof(st) };
	const char *exits;
	int err = -EBUSY;

	pthread_mutex_lock(&end_lock);
	if (started)
		goto out;
	request = req;
	exits = setting(FTPAD_ENV_RECORD_EXITS);
	snprintf(image, sizeof(image), "%d.0", getpid());
	err = begin(setting(FTPAD_ENV_RECORD), NULL, NULL, !exits || strcmp(exits, "0"));
	if (err) {
		__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
		close_trace_files();
		__atomic_store_n(&started, 0, __ATOMIC_RELEASE);
		request = NULL;
		goto out;
	}
	ftpad_get_stats(&st);
	*sites = next_id;
	*enabled = st.enabled;
out:
	pthread_mutex_unlock(&end_lock);
	return err;
}

/* Whether a trace is being recorded: `ftpad record`'s, or a session. */
bool ftpad_record_busy(void)
{
	return __atomic_load_n(&started, __ATOMIC_ACQUIRE);
}

/* exechooks.c: the image ends here as at exit, totals included, and the
 * next program continues the trace into the next image.  Should the exec
 * fail, the image goes on and its end appends later totals (the last
 * ones count: docs/format.md). */
void ftpad_record_before_exec(void)
{
	struct ftpad_stats st = { .sz = sizeof(st) };

	pthread_mutex_lock(&end_lock);
	if (started && !ended) {
		flush_all();
		ftpad_get_stats(&st);
		write_stats(&st);
	}
	pthread_mutex_unlock(&end_lock);
}

bool ftpad_record_active(void)
{
	return __atomic_load_n(&started, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&stopping, __ATOMIC_RELAXED);
}

/* sighooks.c: a handler starts or returns; sp: the wrapper's frame, below
 * the interrupted one and above the handler's calls. */
void ftpad_record_signal(unsigned kind, int sig, uintptr_t sp)
{
	/* Counted, so that a stop waits for the event (stop_events()). */
	__atomic_add_fetch(&outside_ops, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&started, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&stopping, __ATOMIC_SEQ_CST))
		record_event(kind, (uint32_t)sig, (uint32_t)sp, false);
	__atomic_sub_fetch(&outside_ops, 1, __ATOMIC_RELEASE);
}
