/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what the generic parts of libftpad share.  Nothing here is
 * architecture specific; arch.h declares the hooks each architecture fills.
 */
#ifndef FTPAD_INTERNAL_H
#define FTPAD_INTERNAL_H

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "ftpad_clock.h"
#include "ftpad_record.h"
#include "ftpad.h"
#include "ftpad_site.h"

#define FTPAD_HIDDEN __attribute__((visibility("hidden")))

/* struct ftpad_site.state bits; written under ftpad_lock only. */
enum {
	FTPAD_S_SLOT = 1 << 0,      /* the function has an ops slot at entry - 8 */
	FTPAD_S_ENABLED = 1 << 1,   /* the site calls a stub */
	FTPAD_S_REGS = 1 << 2,      /* ... the stub of the full register save */
	FTPAD_S_WANT_REGS = 1 << 3, /* scratch: an ops on it has SAVE_REGS */
	FTPAD_S_PREP = 1 << 4,      /* needs the arch's one-time write first */
	FTPAD_S_PREPARED = 1 << 5,  /* ... which was done */
	FTPAD_S_SLOTTED = 1 << 6,   /* the slot holds a pointer to this site */
	FTPAD_S_JUMP = 1 << 7,      /* a live patch's: jumps to it (livepatch.c) */
};

/* struct ftpad_site.batch bits: what the update being made does to the
 * site (patch.c); under ftpad_lock only. */
enum {
	FTPAD_B_UP = 1 << 0,    /* in the up batch: it starts calling, or moves to the full save */
	FTPAD_B_DOWN = 1 << 1,  /* in the down batch: every other write */
	FTPAD_B_STORE = 1 << 2, /* its ->ops is stored after the up batch */
	FTPAD_B_SLOT = 1 << 3,  /* its slot is written too (struct ftpad_batch) */
};

/*
 * One patchable site, with its addresses resolved for this process.  An
 * enabled site's ops slot holds a pointer to this structure, which lives
 * as long as its module, so the slot is written only when the site goes
 * from disabled to enabled (and back to its NOPs after a grace period once
 * disabled): changing what an enabled site calls is a store to ->ops.
 */
struct ftpad_site {
	struct ftpad_ops *ops;  /* first (trampolines load it): what it dispatches to; atomic */
	uintptr_t entry;        /* the function's entry: the ip callbacks see */
	const char *name;       /* NULL when neither record nor symbols name it */
	struct ftpad_ops *want; /* scratch of ftpad_update_sites() */
	/* The patchable instruction is at entry + site_off: right behind the
	 * entry for an entry site, anywhere in the function for an exit site
	 * (before the entry too, in a cold part). */
	int32_t site_off;
	uint16_t flags;         /* enum ftpad_site_flags of the record */
	uint8_t kind;           /* which trampoline stub the site calls (arch) */
	int8_t patching;        /* atomic: +1/-1 while a call/the NOP is being written */
	uint8_t target_regs;    /* atomic: the call being written goes to the REGS stub */
	uint8_t state;          /* FTPAD_S_* */
	uint8_t batch;          /* FTPAD_B_* */
	uint8_t type;           /* enum ftpad_site_kind of the record, | FTPAD_T_NOEXIT */
	uint32_t exit_index;    /* exit sites: which of the module's exit stubs is theirs */
	/* The recorder's event word for this site plus one (0: no id yet),
	 * which x86_64's fast recording path writes as is (record_ids.c). */
	uint32_t trace_what;
};

/* struct ftpad_site.type: an entry site whose function has no exit
 * sites (an object built without exit=1): its calls have entries only. */
#define FTPAD_T_KIND_MASK 0x0f
#define FTPAD_T_NOEXIT 0x80

/* What the site is: enum ftpad_site_kind (entry, exit, tail exit). */
static inline enum ftpad_site_kind ftpad_site_kind(const struct ftpad_site *s)
{
	return (enum ftpad_site_kind)(s->type & FTPAD_T_KIND_MASK);
}

static inline bool ftpad_site_is_exit(const struct ftpad_site *s)
{
	return ftpad_site_kind(s) != FTPAD_SITE_KIND_ENTRY;
}

/* An entry site whose function has no exit sites ("entries only"). */
static inline bool ftpad_site_entries_only(const struct ftpad_site *s)
{
	return s->type & FTPAD_T_NOEXIT;
}

static inline uintptr_t ftpad_site_addr(const struct ftpad_site *s)
{
	return s->entry + s->site_off;
}

static inline uintptr_t ftpad_site_slot(const struct ftpad_site *s)
{
	return s->state & FTPAD_S_SLOT ? s->entry - 8 : 0;
}

/* A FUNC symbol of a module, with its run-time address. */
struct ftpad_sym {
	uintptr_t addr;
	size_t size;
	const char *name;
	bool global; /* preferred among aliases */
};

struct ftpad_segment {
	uintptr_t lo, hi; /* page-aligned run-time extent */
	int prot;         /* its PROT_* as mapped from the file */
};

#define FTPAD_MAX_SEGMENTS 8

/*
 * One loaded executable or shared object.  Modules are only added, to the
 * head of a list that readers walk without the lock (dispatch of slot-less
 * sites, symbol lookups); everything but the fields marked atomic is
 * immutable once the module is published.
 */
/* Something unpublished that a dispatching thread may still hold, freed
 * by free after a grace period (grace.c, ftpad_retire()). */
struct ftpad_retired {
	struct ftpad_retired *next;
	void (*free)(struct ftpad_retired *r);
};

struct ftpad_module {
	struct ftpad_retired retired; /* first: once unloaded (grace.c) */
	struct ftpad_module *next;
	char *path;                  /* the file its tables were read from */
	uintptr_t base;              /* dlpi_addr: file vaddr + base = address */
	uintptr_t lo, hi;            /* extent of all its PT_LOAD segments */
	struct ftpad_segment segs[FTPAD_MAX_SEGMENTS];
	int nsegs;
	struct ftpad_site *sites;    /* entry and exit sites, sorted by site address */
	size_t nsites;
	size_t nexits;               /* of which exit sites (exit_index 0..nexits-1) */
	size_t stubs_size;           /* bytes mapped at stubs */
	bool unnamed;                /* some site's record has no name */
	const void *map;             /* the file, mapped read-only; NULL: none */
	size_t map_size;
	struct ftpad_sym *syms;      /* sorted FUNC symbols, once syms_loaded */
	size_t nsyms;
	int syms_loaded;             /* atomic: syms may be read (acquire) */
	uintptr_t stubs;             /* its trampoline stub page; 0 until needed */
	bool seen;                   /* scratch of ftpad_modules_refresh() */
	unsigned long long verified_subs; /* dlpi_subs when last known the same load */
	/* Scratch of ftpad_update_sites(): the sites of its batch with
	 * FTPAD_B_UP ([0]) and FTPAD_B_DOWN ([1]) lie in [first, end). */
	struct ftpad_site *batch_first[2], *batch_end[2];
};

/* The sites of module m in [first, end) that batch bit holds. */
static inline struct ftpad_site *ftpad_batch_first(const struct ftpad_module *m, uint8_t bit)
{
	return m->batch_first[bit == FTPAD_B_DOWN];
}

static inline struct ftpad_site *ftpad_batch_end(const struct ftpad_module *m, uint8_t bit)
{
	return m->batch_end[bit == FTPAD_B_DOWN];
}

/* Every site s of every loaded module m, in module then address order. */
#define ftpad_for_each_site(m, s)                                              \
	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next)         \
		for (struct ftpad_site *s = m->sites; s < m->sites + m->nsites; s++)

/*
 * lock.c: ftpad_lock, the lock every update of modules, ops and text
 * takes.  The taker is busy until it gives it back: its own calls reach
 * no callback meanwhile.
 */
/* Take it, giving up at until (CLOCK_MONOTONIC; NULL: never): 0 or -errno. */
int ftpad_lock_take_until(const struct timespec *until) FTPAD_HIDDEN;
void ftpad_lock_take(void) FTPAD_HIDDEN;
/* Take it if that needs no waiting; whether it was taken. */
bool ftpad_lock_try(void) FTPAD_HIDDEN;
void ftpad_lock_give(void) FTPAD_HIDDEN;
/* Around fork (fork.c).  Prepare: whether this thread may wait for other
 * locks too (not from a callback, nor from a signal handler that
 * interrupted a holder).  Child: whether the lock was held by a thread
 * the child lacks, in the middle of a change, and is new now. */
bool ftpad_lock_fork_prepare(void) FTPAD_HIDDEN;
void ftpad_lock_fork_parent(void) FTPAD_HIDDEN;
bool ftpad_lock_fork_child(void) FTPAD_HIDDEN;

/* alloc.c: libftpad never calls malloc (early.c); these map memory
 * instead.  ftpad_alloc() memory is zeroed. */
void *ftpad_alloc(size_t size) FTPAD_HIDDEN;
void *ftpad_realloc(void *block, size_t size) FTPAD_HIDDEN;
void ftpad_free(void *block) FTPAD_HIDDEN;
void ftpad_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) FTPAD_HIDDEN;
/* Whether x is one of the n sorted addresses v (async-signal-safe). */
bool ftpad_sorted_has(const uintptr_t *v, size_t n, uintptr_t x) FTPAD_HIDDEN;

/* log.c */
void ftpad_log(enum ftpad_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3))) FTPAD_HIDDEN;
#define ftpad_warn(...) ftpad_log(FTPAD_WARN, __VA_ARGS__)
/* The calling thread's warnings go to keep (NULL: the log again). */
void ftpad_log_capture(void (*keep)(const char *text)) FTPAD_HIDDEN;
#define ftpad_info(...) ftpad_log(FTPAD_INFO, __VA_ARGS__)
#define ftpad_debug(...) ftpad_log(FTPAD_DEBUG, __VA_ARGS__)

/* module.c */
int ftpad_modules_refresh(void) FTPAD_HIDDEN;            /* under ftpad_lock */
/*
 * Under ftpad_lock: refresh the list of modules, then call fn(arg) with no
 * module unmapped (nor mapped) until it returns, inside dl_iterate_phdr.
 * Every read or write of code goes through here; fn must not wait for a
 * thread that may be in a callback (no grace period).  fn's result, or
 * the refresh's error.
 */
int ftpad_modules_hold(int (*fn)(void *arg), void *arg) FTPAD_HIDDEN;
/* In a forked child: if the fork came while a thread was in a hold, glibc's
 * write lock stays held; modules are then no longer listed. */
void ftpad_modules_fork_child(void) FTPAD_HIDDEN;
/* Whether a module with sites was read since the last call; clears it. */
bool ftpad_modules_take_added(void) FTPAD_HIDDEN;
/* Under no lock, for a lookup that found nothing: refresh if ftpad_lock can
 * be had without waiting; whether it was. */
bool ftpad_modules_try_refresh(void) FTPAD_HIDDEN;
/* Whether the tables were read at least once (before that, dlopen and
 * dlclose have nothing to update). */
bool ftpad_modules_scanned(void) FTPAD_HIDDEN;
struct ftpad_module *ftpad_modules(void) FTPAD_HIDDEN;   /* list head, lock-free */
struct ftpad_module *ftpad_module_of(uintptr_t addr) FTPAD_HIDDEN;
struct ftpad_site *ftpad_site_by_addr(uintptr_t addr) FTPAD_HIDDEN;
struct ftpad_site *ftpad_site_by_entry(uintptr_t entry) FTPAD_HIDDEN;
int ftpad_module_prot(const struct ftpad_module *mod, uintptr_t addr) FTPAD_HIDDEN;
/* The end of the segment holding addr: merged writes never cross it. */
uintptr_t ftpad_module_limit(const struct ftpad_module *mod, uintptr_t addr) FTPAD_HIDDEN;

/* symtab.c: a module file's sections, and its symbol table. */
/* The module file's first section called name (NULL: any) of type (0: any). */
const ElfW(Shdr) *ftpad_module_section(const struct ftpad_module *mod, const char *name,
				       unsigned type) FTPAD_HIDDEN;
int ftpad_module_load_symbols(struct ftpad_module *mod) FTPAD_HIDDEN;
/* Whether each module's symbol table is read when the module is; set once
 * by ftpad_load_symbols_eagerly(), under ftpad_lock. */
bool ftpad_symbols_eager(void) FTPAD_HIDDEN;
void ftpad_symbols_set_eager(void) FTPAD_HIDDEN;
const struct ftpad_sym *ftpad_module_symbol(struct ftpad_module *mod, uintptr_t addr) FTPAD_HIDDEN;
/* fork: the symbol table lock, taken around fork like ftpad_lock. */
void ftpad_symbols_fork_prepare(bool may_block) FTPAD_HIDDEN;
void ftpad_symbols_fork_done(bool child) FTPAD_HIDDEN;

/* symbols.c */
/* From now on, read each module's symbol table when the module is read
 * (not in a callback, where a lookup would), and those of the modules
 * read so far now. */
void ftpad_load_symbols_eagerly(void) FTPAD_HIDDEN;
const struct ftpad_sym *ftpad_symbol_of(uintptr_t addr) FTPAD_HIDDEN;

/*
 * text.c: writing to code (or other read-only mappings) safely.  A poke
 * writes len bytes at addr, within the mapping that ends at limit.
 */
struct ftpad_poke {
	uintptr_t addr;
	uintptr_t limit;   /* end of the mapping addr is in: no merged write crosses it */
	int prot;          /* its segment's: restored after an mprotect write when
			    * the page's own cannot be read (text.c) */
	uint8_t len;       /* 0..24 (0: nothing to write) */
	uint8_t bytes[24];
};

/* Fills out with part number `part` of one item of a batch. */
typedef void (*ftpad_part_fn)(const void *item, int part, struct ftpad_poke *out);

/*
 * Write one part of each of n items (stride bytes apart): what part_of
 * gives for each, in the order given, which should be by address, as the
 * spans of one writer (struct ftpad_text_writer below).  With mergeable,
 * no thread reads any of these bytes as a whole while they change (or
 * each byte alone is fine), so neighbouring pokes go out in one run with
 * the bytes between them, rewritten unchanged; without, each poke is a run
 * of its own (an aligned 4 or 8 bytes in one store).  Nothing is allocated.  Returns 0, or -EPERM/-EACCES when both
 * /proc/self/mem and mprotect are refused, -EIO when the bytes of the
 * first write through /proc/self/mem, read back, differ.
 */
int ftpad_text_write(const void *items, size_t n, size_t stride, ftpad_part_fn part_of, int part,
		     bool mergeable) FTPAD_HIDDEN;
/* n pokes, as ftpad_text_write(). */
int ftpad_text_poke(const struct ftpad_poke *pokes, size_t n, bool mergeable) FTPAD_HIDDEN;

/* module.c: map and fill the module's stub page (arch.h
 * ftpad_arch_stubs_fill()), within branch reach of all its code, unless
 * it has one; written like any other code.  0, -ERANGE when no page is
 * free within reach, or the error of writing it. */
int ftpad_module_stubs(struct ftpad_module *mod) FTPAD_HIDDEN;
/* size bytes mapped PROT_READ|PROT_EXEC within branch reach of all of
 * mod's code (a live patch's stubs), or 0. */
uintptr_t ftpad_map_near(const struct ftpad_module *mod, size_t size) FTPAD_HIDDEN;

/* Where an address lies in its module: its segment's protection and end,
 * looked up once per segment while a batch walks the sites in order. */
struct ftpad_seg_cache {
	const struct ftpad_module *mod;
	uintptr_t lo, hi;
	int prot;
};

/* module.c: p->addr, ->limit and ->prot for a poke at addr in mod. */
void ftpad_poke_place(struct ftpad_poke *p, struct ftpad_seg_cache *c,
		      const struct ftpad_module *mod, uintptr_t addr) FTPAD_HIDDEN;

/*
 * A batch of site writes (arch.h ftpad_arch_batch_write()): the sites
 * whose ->batch has bit, in module then address order.  Each goes to a
 * call (->patching +1; to the full save's stub if ->target_regs) or back
 * to its NOP (-1); with FTPAD_B_SLOT its slot is written too: &site
 * before it may call, or the slot's NOPs back once no thread can read it.
 */
struct ftpad_batch {
	uint8_t bit;        /* FTPAD_B_UP or FTPAD_B_DOWN */
	bool slots_cleared; /* set by the arch: it put the NOPs back in the slots */
	size_t n;           /* sites in the batch */
	size_t slots;       /* of which going to the NOP with FTPAD_B_SLOT */
	size_t done;        /* of which ftpad_batch_written() was told */
	size_t slots_to_clear; /* sites turned off whose slot keeps its pointer */
};

/*
 * For the arch, once the bytes of the last step of the sites [first, end)
 * of one module are in memory (all of them; those not in the batch are
 * skipped): their state becomes what was written.  Sites never reported
 * are taken as left half written.
 */
void ftpad_batch_written(struct ftpad_batch *b, struct ftpad_site *first,
			 struct ftpad_site *end) FTPAD_HIDDEN;

/*
 * Writing code site by site, in steps (arch.h ftpad_arch_batch_write()):
 * each site's span of code [lo, hi), in address order, goes into the run
 * being assembled (struct ftpad_text_run, which the caller keeps in local
 * variables: a span costs a few compares); whatever of a span is not
 * stored to stays as it is.  Runs are assembled in a buffer with the code
 * around the spans, and written out whole: one pwrite to /proc/self/mem
 * (the first one read back), or, where refused, mprotect of the run's
 * pages, a copy and mprotect back.  The one way code is written:
 * ftpad_text_write() hands its pokes to a writer too.  Nothing is
 * allocated; under ftpad_lock.
 */
struct ftpad_text_run {
	uintptr_t hi;     /* the end of the last span (0: no run) */
	uintptr_t copied; /* the buffer holds the code up to here, all in one mapping */
	intptr_t delta;   /* the byte of code address a goes to a + delta */
};

struct ftpad_text_writer {
	bool direct;        /* the code itself was made writable: no runs */
	uintptr_t lo;       /* the run starts here */
	uintptr_t end;      /* ... and may grow up to here */
	uintptr_t pagem1;   /* the page size - 1 */
	int prot;           /* the run's mapping's protection */
	int err;            /* the first error: nothing is written after it */
	void (*written)(void *ctx); /* called after each run is written */
	void *ctx;
};

/* A writer, and its first run: into a buffer, or, with direct, into the
 * code itself, which the caller made writable (ftpad_text_unprotect()). */
struct ftpad_text_run ftpad_text_writer_init(struct ftpad_text_writer *w, bool direct,
					     void (*written)(void *ctx), void *ctx) FTPAD_HIDDEN;

/*
 * Whether code is written by mprotect, the way that worked last (or
 * FTPAD_TEXT_WRITE=mprotect).  Then a batch may make its ranges writable
 * once, before its first step, and give them back after its last: one
 * protection change per range, for the whole batch.
 */
bool ftpad_text_direct(void) FTPAD_HIDDEN;
/* Whether code may be made writable by mprotect at all (not when
 * FTPAD_TEXT_WRITE=procmem forbids it). */
bool ftpad_text_may_unprotect(void) FTPAD_HIDDEN;
/* The pages of [lo, hi) writable, or (writable false) back to the
 * protection they had (prot, the segment's, if that cannot be read); with
 * a warning when that fails. */
int ftpad_text_unprotect(uintptr_t lo, uintptr_t hi, int prot, bool writable) FTPAD_HIDDEN;

/* Whether the span [lo, hi) continues run r as it stands: it starts after
 * the last span, less than a page on (so no page without a span is
 * written), and its code is in the buffer.  pagem1: the writer's. */
static inline bool ftpad_text_run_takes(const struct ftpad_text_run *r, uintptr_t lo, uintptr_t hi,
					uintptr_t pagem1)
{
	return lo >= r->hi && lo - r->hi <= pagem1 && hi <= r->copied;
}

/* Otherwise: run r with the span [lo, hi) (in the mapping that ends at
 * limit, with protection prot) added, after r was written out if the
 * span does not continue it. */
struct ftpad_text_run ftpad_text_span(struct ftpad_text_writer *w, struct ftpad_text_run r,
				      uintptr_t lo, uintptr_t hi, uintptr_t limit,
				      int prot) FTPAD_HIDDEN;

/* Write out run r; w->err. */
int ftpad_text_flush(struct ftpad_text_writer *w, struct ftpad_text_run r) FTPAD_HIDDEN;

/* Make every thread of the process execute a core-serializing instruction
 * (membarrier SYNC_CORE) before it runs user code again.  0 or -errno. */
int ftpad_text_sync_cores(void) FTPAD_HIDDEN;

/* fd.c: a descriptor libftpad keeps open, known by its file, since the
 * program may close the number and open another file on it. */
struct ftpad_own_fd {
	int fd;
	dev_t dev;
	ino_t ino;
};
/* path opened (O_CLOEXEC added) on a high number; its file recorded in *o,
 * or with same_file, required to be the one recorded (else -ESTALE).  The
 * descriptor, or -errno; o->fd is left to the caller. */
int ftpad_own_fd_open(struct ftpad_own_fd *o, const char *path, int flags, mode_t mode,
		      bool same_file) FTPAD_HIDDEN;
/* The same, path relative to the directory descriptor dir (AT_FDCWD: the
 * working directory). */
int ftpad_own_fd_openat(struct ftpad_own_fd *o, int dir, const char *path, int flags,
			mode_t mode, bool same_file) FTPAD_HIDDEN;
/* Whether fd still holds o's file. */
bool ftpad_own_fd_valid(const struct ftpad_own_fd *o, int fd) FTPAD_HIDDEN;

/*
 * grace.c: see there for the scheme.  A thread's slot word w packs, from
 * the low bits: the depth of dispatches it is in (nested when callbacks
 * call traced functions), a busy count (inside libftpad's locked calls:
 * nothing is dispatched) and a generation that counts outermost dispatches.
 * Every change is a single read-modify-write of w by its owner, so a
 * signal handler, whose own changes are balanced, cannot corrupt it.
 */
#define FTPAD_DEPTH_MASK 0xfffful
/* Dispatches nested deeper than this are dropped: a callback that traces
 * itself (an ops with no filter and no FTPAD_OPS_FL_RECURSION) then costs
 * calls, not the stack. */
#define FTPAD_MAX_DEPTH 255ul
#define FTPAD_BUSY_ONE 0x10000ul
#define FTPAD_BUSY_MASK 0xff0000ul
#define FTPAD_GEN_ONE 0x1000000ul

struct ftpad_thread_slot {
	unsigned long w;     /* see above */
	int *errno_ptr;      /* the owner's errno */
	unsigned long guard; /* FTPAD_OPS_FL_RECURSION callbacks running on the owner */
	int owner;           /* atomic: the owner's tid; 0: free */
	int waiters;         /* atomic futex word: a writer sleeps until the owner is out */
	struct ftpad_site *exit_site; /* whose exit callbacks run on the owner, for the recorder */
} __attribute__((aligned(64)));
extern __thread struct ftpad_thread_slot *ftpad_slot
	__attribute__((tls_model("initial-exec"))) FTPAD_HIDDEN;
/* The calling thread's slot, claimed without malloc (also in a signal
 * handler); NULL if none can be had. */
struct ftpad_thread_slot *ftpad_claim_slot(void) FTPAD_HIDDEN;
/* The slots held, free or not: they grow with the threads that dispatch
 * at the same time, not with all that ever did. */
unsigned long ftpad_grace_slots(void) FTPAD_HIDDEN;
/* ftpad_grace_wait() gives up at until (CLOCK_MONOTONIC); NULL: never.
 * Under ftpad_lock, for one call (ftpad_unregister_ops_timeout()). */
void ftpad_grace_set_deadline(const struct timespec *until) FTPAD_HIDDEN;
/* Return once every thread that was dispatching when it was called is
 * out (true), sleeping meanwhile; false if the deadline passed first. */
bool ftpad_grace_wait(void) FTPAD_HIDDEN;
/* The same, unless a thread stays in its dispatch for more than a few
 * yields: then false, and no grace period can be assumed. */
bool ftpad_grace_try(void) FTPAD_HIDDEN;
void ftpad_grace_fork_child(void) FTPAD_HIDDEN;
/*
 * Deferred freeing, under ftpad_lock.  A pointer dispatching threads may
 * hold was just unpublished: the next ftpad_reclaim() must wait for a
 * grace period even if one just ended.
 */
void ftpad_note_unpublished(void) FTPAD_HIDDEN;
/* r was unpublished: free_fn(r) after a grace period (ftpad_reclaim()). */
void ftpad_retire(struct ftpad_retired *r,
		  void (*free_fn)(struct ftpad_retired *r)) FTPAD_HIDDEN;
/* Free what was retired, after a grace period: when anything was, or
 * always with force (an ops was unregistered).  Whether it had its grace
 * period (false: the deadline of ftpad_grace_set_deadline() passed; the
 * rest is freed next time). */
bool ftpad_reclaim(bool force) FTPAD_HIDDEN;
/* A grace period (ftpad_grace_wait()) after which nothing unpublished
 * before is held any more; false if the deadline passed first. */
bool ftpad_grace_unpublished(void) FTPAD_HIDDEN;
/* For the arch, between the steps of a batch: the same, if it can be had
 * without waiting for long (ftpad_grace_try()); whether it was. */
bool ftpad_grace_try_unpublished(void) FTPAD_HIDDEN;
/* For ftpad_exit(): a writer sleeps on t; wake it. */
void ftpad_grace_wake(struct ftpad_thread_slot *t) FTPAD_HIDDEN;

/*
 * Every dispatch is bracketed by these.  ftpad_enter() returns NULL (and
 * nothing must be done) when this thread is inside libftpad's locked calls,
 * nested FTPAD_MAX_DEPTH deep, or has no slot.
 */
static inline struct ftpad_thread_slot *ftpad_enter(void)
{
	struct ftpad_thread_slot *t = ftpad_slot;
	unsigned long w;

	if (!t && !(t = ftpad_claim_slot()))
		return NULL;
	w = __atomic_load_n(&t->w, __ATOMIC_RELAXED);
	if ((w & FTPAD_BUSY_MASK) || (w & FTPAD_DEPTH_MASK) >= FTPAD_MAX_DEPTH)
		return NULL;
	/* A new generation for an outermost dispatch: the writer tells it
	 * from the one it saw.  Computed from a read a signal handler may
	 * follow, but that handler leaves the depth as it found it. */
	__atomic_fetch_add(&t->w, (w & FTPAD_DEPTH_MASK) ? 1 : FTPAD_GEN_ONE + 1,
			   __ATOMIC_RELAXED);
	/* The writer's membarrier orders this before the ops loads. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return t;
}

static inline void ftpad_exit(struct ftpad_thread_slot *t)
{
	unsigned long w;

	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	w = __atomic_fetch_sub(&t->w, 1, __ATOMIC_RELEASE);
	/* Read after the store (the writer's membarrier orders the two, see
	 * grace.c); set only while a writer sleeps on this thread. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (__builtin_expect(__atomic_load_n(&t->waiters, __ATOMIC_RELAXED), 0) &&
	    (w & FTPAD_DEPTH_MASK) == 1)
		ftpad_grace_wake(t);
}

/* Whether this thread is inside a callback (or a lookup). */
static inline bool ftpad_in_dispatch(void)
{
	struct ftpad_thread_slot *t = ftpad_slot;

	return t && (__atomic_load_n(&t->w, __ATOMIC_RELAXED) & FTPAD_DEPTH_MASK);
}

/* ops.c */
extern unsigned long ftpad_traps FTPAD_HIDDEN; /* atomic: see ftpad_stats.traps */
/* Under no lock: after dlopen or dlclose, find the new modules, forget the
 * old ones, and patch what the registered ops want in the new ones. */
void ftpad_modules_changed(void) FTPAD_HIDDEN;

/*
 * The registers a trampoline saved: struct ftpad_pt_regs (arch, ftpad.h),
 * then the ops being called (for ftpad_regs_set_ip()), whether everything
 * was saved (FTPAD_OPS_FL_SAVE_REGS), and the 8 vector argument registers
 * (q0-q7; on x86_64 xmm0-7 in the first 16 bytes of each vec[i], and with
 * AVX the upper half of ymm0-7 in the next 16; the trampoline keeps
 * AVX-512's bits 256-511 past the end).  trampoline_<arch>.S builds it;
 * keep them in step.
 */
#if defined(__x86_64__)
#define FTPAD_VEC_BYTES 32
#else
#define FTPAD_VEC_BYTES 16
#endif
/* struct ftpad_regs.full: which trampoline saved them. */
#define FTPAD_REGS_ARGS 0 /* an entry's argument registers */
#define FTPAD_REGS_FULL 1 /* every register (FTPAD_OPS_FL_SAVE_REGS) */
#define FTPAD_REGS_EXIT 2 /* an exit's (arch.h ftpad_arch_regs_return_reg()) */
struct ftpad_regs {
	struct ftpad_pt_regs pt;
	struct ftpad_ops *ops;
	unsigned long full;
	unsigned char vec[8][FTPAD_VEC_BYTES] __attribute__((aligned(FTPAD_VEC_BYTES)));
};

/*
 * The dispatch of one call, for every trampoline path written in C: find
 * the site's ops (through the slot when the site, read now, calls a stub,
 * else by address), call it with errno preserved.
 */
void ftpad_dispatch_site(uintptr_t ip, uintptr_t parent_ip, struct ftpad_regs *regs,
			 uintptr_t site, uintptr_t slot) FTPAD_HIDDEN;
/* The same at the exit site at site: the exit callbacks of its function.
 * known: its struct ftpad_site when the stub said it (x86_64), else NULL
 * (found by address). */
void ftpad_dispatch_exit(uintptr_t site, struct ftpad_site *known, uintptr_t parent_ip,
			 struct ftpad_regs *regs) FTPAD_HIDDEN;

/* filter.c: an ops' glob lists (ops->internal.filter and .notrace). */
struct ftpad_filter;
/* A new list: old's globs, then those of "a, b*,c"; NULL without memory. */
struct ftpad_filter *ftpad_filter_parse(const struct ftpad_filter *old,
					const char *globs) FTPAD_HIDDEN;
void ftpad_free_filter(void *filter) FTPAD_HIDDEN;
/* Whether ops traces the function called name (NULL: unnamed). */
bool ftpad_ops_match(const struct ftpad_ops *ops, const char *name) FTPAD_HIDDEN;
/* An ops that traces every site: no filter, no notrace list. */
bool ftpad_ops_all(const struct ftpad_ops *ops) FTPAD_HIDDEN;
/* The sorted entries of the functions one ops traces (ops->internal.entries). */
struct ftpad_entries {
	struct ftpad_retired retired;  /* first: once replaced (grace.c) */
	bool all;                      /* every site: ip[] is empty */
	size_t n;
	uintptr_t ip[];
};


/* patch.c: make every site match what the registered ops want (the list
 * linked by ->internal.next; a site that more than one wants calls
 * several); under ftpad_lock.  -ETIMEDOUT when a deadline is set (ftpad_grace_set_deadline()) and
 * passes before the slots of sites turned off can get their NOPs back:
 * those sites are off, and keep their pointer in their slot meanwhile. */
int ftpad_update_sites(struct ftpad_ops *registered, struct ftpad_ops *several) FTPAD_HIDDEN;
/* In a child forked in the middle of an update: the state from the code. */
void ftpad_sites_resync(void) FTPAD_HIDDEN;
/* tracer.c */
void ftpad_tracer_start(void) FTPAD_HIDDEN;
/* record_session.c: the recorder, if FTPAD_RECORD names a trace directory. */
void ftpad_record_start(void) FTPAD_HIDDEN;
/* Write every buffered event now: an exec comes (exechooks.c). */
void ftpad_record_before_exec(void) FTPAD_HIDDEN;
/* ... and the end: _exit() skips the destructors (exechooks.c). */
void ftpad_record_before_exit(void) FTPAD_HIDDEN;
/* A clone(CLONE_VM) child sharing this thread's TLS is coming (whether
 * the recorder counted it); a CLONE_VFORK one it counted is gone
 * (exechooks.c). */
bool ftpad_record_before_clone(void) FTPAD_HIDDEN;
void ftpad_record_after_vfork_clone(void) FTPAD_HIDDEN;
/* For sighooks.c: whether the recorder runs; a SIGNAL or SIGRETURN event. */
bool ftpad_record_active(void) FTPAD_HIDDEN;
void ftpad_record_signal(unsigned kind, int sig, uintptr_t sp) FTPAD_HIDDEN;
/* sighooks.c: what stands for SIG_DFL while a program is recorded (the
 * recorder's end by that signal), or NULL; and whether act is it. */
struct sigaction;
const struct sigaction *ftpad_record_default_action(int sig) FTPAD_HIDDEN;
bool ftpad_record_is_default_action(const struct sigaction *act) FTPAD_HIDDEN;
/* attach.c's sessions: start one with the settings of req (kept by the
 * caller until the stop): 0 and the sites known and enabled, or a negative
 * errno (said through ftpad_warn() too), -EBUSY while a trace is being
 * recorded; stop it, with its totals.  Whether a trace is being recorded. */
struct ftpad_record_totals {
	unsigned long long events, dropped, bytes;
	unsigned long long fast; /* of events, those the fast path wrote */
};
int ftpad_record_session_start(const char *req, unsigned *sites,
			       unsigned long *enabled) FTPAD_HIDDEN;
void ftpad_record_session_stop(struct ftpad_record_totals *tot) FTPAD_HIDDEN;
bool ftpad_record_busy(void) FTPAD_HIDDEN;
/* thread.c: the signal mask of the runtime's own threads (writer, attach
 * control). */
void ftpad_runtime_thread_mask(sigset_t *mask) FTPAD_HIDDEN;
/* A runtime thread running fn(arg), with that mask given through its
 * attributes (the caller's own mask is not touched), detached or to be
 * joined: 0 or -errno. */
int ftpad_runtime_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg,
			       bool detached) FTPAD_HIDDEN;

/* record_settings.c: the value of setting name in an attach request, or
 * NULL. */
const char *ftpad_request_value(const char *request, const char *name) FTPAD_HIDDEN;

/* early.c: very early tracing (FTPAD_EARLY). */
struct ftpad_early_entry {
	/* An exit's site (the recorder's exits, early.c); NULL: an entry, of
	 * the function at ip. */
	const struct ftpad_site *exit_site;
	unsigned long ip, parent_ip;
	uint64_t time; /* ftpad_trace_clock() */
	uint32_t sp;   /* the low 32 bits of the function's sp at its site */
	int tid;
	char comm[17];
};

/* envp: the environment (getenv() finds nothing before libc is set up). */
void ftpad_early_start(char **envp) FTPAD_HIDDEN;
bool ftpad_early_active(void) FTPAD_HIDDEN;
/* Stop: the n entries recorded (and how many did not fit). */
const struct ftpad_early_entry *ftpad_early_stop(size_t *n, size_t *dropped) FTPAD_HIDDEN;
/*
 * The start-up: a constructor in early_preinit.c (libftpad.a) or
 * starthook.c (libftpad.so), each of which defines this: 's' or 'd'.  ops.c
 * refers to it so that an archive link takes the start-up in.
 */
extern const char ftpad_start_up FTPAD_HIDDEN;
/* fork.c: the fork handlers, installed once at load by the start-up. */
void ftpad_install_fork_handlers(void) FTPAD_HIDDEN;

#endif /* FTPAD_INTERNAL_H */
