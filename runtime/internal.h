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

#include "ftpad.h"
#include "ftpad_site.h"

#define FTPAD_HIDDEN __attribute__((visibility("hidden")))

/* One patchable site, with its addresses resolved for this process. */
struct ftpad_site {
	uintptr_t entry;        /* the function's entry: the ip callbacks see */
	uintptr_t addr;         /* the patchable instruction */
	uintptr_t slot;         /* the 8-byte ops slot before the entry; 0: none */
	const char *name;       /* NULL when neither record nor symbols name it */
	struct ftpad_ops *ops;  /* what an enabled site dispatches to (atomic) */
	struct ftpad_ops *want; /* scratch of ftpad_update_sites() */
	uint16_t flags;         /* enum ftpad_site_flags */
	uint8_t kind;           /* which trampoline stub the site calls (arch) */
	int8_t patching;        /* atomic: +1/-1 while being enabled/disabled */
	bool enabled;           /* the site currently calls its stub */
	bool moving;            /* scratch: enabled, and its slot is being rewritten */
};

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
struct ftpad_module {
	struct ftpad_module *next;
	char *path;                  /* the file its tables were read from */
	uintptr_t base;              /* dlpi_addr: file vaddr + base = address */
	uintptr_t lo, hi;            /* extent of all its PT_LOAD segments */
	struct ftpad_segment segs[FTPAD_MAX_SEGMENTS];
	int nsegs;
	struct ftpad_site *sites;    /* sorted by address */
	size_t nsites;
	const void *map;             /* the file, mapped read-only; NULL: none */
	size_t map_size;
	struct ftpad_sym *syms;      /* sorted FUNC symbols, once syms_loaded */
	size_t nsyms;
	int syms_loaded;             /* atomic: syms may be read (acquire) */
	uintptr_t stubs;             /* its trampoline stub page; 0 until needed */
	bool seen;                   /* scratch of ftpad_modules_refresh() */
	struct ftpad_module *gone;   /* the list of unloaded modules to free */
};

/* Every site s of every loaded module m, in module then address order. */
#define ftpad_for_each_site(m, s)                                              \
	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next)         \
		for (struct ftpad_site *s = m->sites; s < m->sites + m->nsites; s++)

/* The lock every update of modules, ops and text takes. */
extern pthread_mutex_t ftpad_lock FTPAD_HIDDEN;

/* log.c */
void ftpad_log(enum ftpad_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3))) FTPAD_HIDDEN;
#define ftpad_warn(...) ftpad_log(FTPAD_WARN, __VA_ARGS__)
#define ftpad_info(...) ftpad_log(FTPAD_INFO, __VA_ARGS__)
#define ftpad_debug(...) ftpad_log(FTPAD_DEBUG, __VA_ARGS__)

/* module.c */
int ftpad_modules_refresh(void) FTPAD_HIDDEN;            /* under ftpad_lock */
/* Modules found unloaded by a refresh, to free after a grace period. */
bool ftpad_modules_unloaded(void) FTPAD_HIDDEN;
void ftpad_modules_free_unloaded(void) FTPAD_HIDDEN;
/* Under no lock: after dlopen or dlclose, find the new modules, forget the
 * old ones, and patch what the registered ops want in the new ones. */
void ftpad_modules_changed(void) FTPAD_HIDDEN;
struct ftpad_module *ftpad_modules(void) FTPAD_HIDDEN;   /* list head, lock-free */
struct ftpad_module *ftpad_module_of(uintptr_t addr) FTPAD_HIDDEN;
struct ftpad_site *ftpad_site_by_addr(uintptr_t addr) FTPAD_HIDDEN;
struct ftpad_site *ftpad_site_by_entry(uintptr_t entry) FTPAD_HIDDEN;
int ftpad_module_prot(const struct ftpad_module *mod, uintptr_t addr) FTPAD_HIDDEN;
const ElfW(Shdr) *ftpad_module_section(const struct ftpad_module *mod, const char *name,
				       unsigned type) FTPAD_HIDDEN;

/* symbols.c */
int ftpad_module_load_symbols(struct ftpad_module *mod) FTPAD_HIDDEN;
void ftpad_load_all_symbols(void) FTPAD_HIDDEN;
const struct ftpad_sym *ftpad_module_symbol(struct ftpad_module *mod, uintptr_t addr) FTPAD_HIDDEN;
const struct ftpad_sym *ftpad_symbol_of(uintptr_t addr) FTPAD_HIDDEN;

/* text.c: writing code (or other read-only mappings) safely. */
struct ftpad_poke {
	uintptr_t addr;
	int prot;          /* the protection to restore after an mprotect write */
	uint8_t len;       /* 1..8; an 8-byte aligned 8-byte poke is one store */
	uint8_t bytes[8];
	/*
	 * true: no thread can read these bytes as a whole while they change
	 * (or each byte alone is fine), so they may go out in one write with
	 * their neighbours, which are rewritten with their current values.
	 * false: written on their own, an aligned slot in one store.
	 */
	bool mergeable;
};
int ftpad_text_poke(struct ftpad_poke *pokes, size_t n) FTPAD_HIDDEN;
/* Make every thread of the process execute a core-serializing instruction
 * (membarrier SYNC_CORE) before it runs user code again.  0 or -errno. */
int ftpad_text_sync_cores(void) FTPAD_HIDDEN;

/* grace.c: see there for the scheme. */
struct ftpad_thread_slot {
	unsigned long seq; /* odd inside ftpad_enter()..ftpad_exit(); slot 0: a count */
	int owned;         /* atomic: a live thread owns the slot */
	int shared;        /* slot 0 only: threads that found no free slot */
	int *errno_ptr;    /* the owner's errno (NULL in the shared slot) */
} __attribute__((aligned(64)));
extern __thread struct ftpad_thread_slot *ftpad_slot
	__attribute__((tls_model("initial-exec"))) FTPAD_HIDDEN;
extern __thread int ftpad_recursion __attribute__((tls_model("initial-exec"))) FTPAD_HIDDEN;
struct ftpad_thread_slot *ftpad_claim_slot(void) FTPAD_HIDDEN;
/* Return once every thread that was dispatching when it was called is out. */
void ftpad_grace_wait(void) FTPAD_HIDDEN;

/*
 * Every arch's trampoline entry brackets reading a site's ops and the
 * dispatch with these.  ftpad_enter() returns false (and nothing must be
 * done) when this thread is already inside a callback or inside libftpad.
 */
static inline bool ftpad_enter(void)
{
	struct ftpad_thread_slot *slot;

	if (ftpad_recursion)
		return false;
	/* From here a signal handler's dispatch on this thread backs off. */
	ftpad_recursion = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	slot = ftpad_slot ? ftpad_slot : ftpad_claim_slot();
	if (__builtin_expect(slot->shared, 0))
		__atomic_fetch_add(&slot->seq, 1, __ATOMIC_SEQ_CST);
	else
		__atomic_store_n(&slot->seq, slot->seq + 1, __ATOMIC_RELAXED);
	/* The writer's membarrier orders this store before the ops load. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return true;
}

static inline void ftpad_exit(void)
{
	struct ftpad_thread_slot *slot = ftpad_slot;

	if (__builtin_expect(slot->shared, 0))
		__atomic_fetch_sub(&slot->seq, 1, __ATOMIC_SEQ_CST);
	else
		__atomic_store_n(&slot->seq, slot->seq + 1, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	ftpad_recursion = 0;
}

/* ops.c */
extern unsigned long ftpad_traps FTPAD_HIDDEN; /* atomic: see ftpad_stats.traps */
/* The ops whose callback this thread runs, for ftpad_regs_set_ip(). */
extern __thread struct ftpad_ops *ftpad_current_ops
	__attribute__((tls_model("initial-exec"))) FTPAD_HIDDEN;
/* Dispatch with its own recursion guard, for an entry without ftpad_enter(). */
void ftpad_dispatch(uintptr_t ip, uintptr_t parent_ip, struct ftpad_ops *ops,
		    struct ftpad_regs *regs) FTPAD_HIDDEN;

/*
 * Call ops (a list ops calls each of its ops), between ftpad_enter() and
 * ftpad_exit(): inlined into the arch entry, as it runs on every call.
 * The traced function has not run yet, so it must find errno untouched.
 */
static inline void ftpad_dispatch_entered(uintptr_t ip, uintptr_t parent_ip,
					  struct ftpad_ops *ops, struct ftpad_regs *regs)
{
	int *errno_ptr = ftpad_slot->errno_ptr ? ftpad_slot->errno_ptr : &errno;
	int saved_errno = *errno_ptr;

	ftpad_current_ops = ops;
	ops->func(ip, parent_ip, ops, regs);
	ftpad_current_ops = NULL;
	*errno_ptr = saved_errno;
}
struct ftpad_ops *ftpad_registered(void) FTPAD_HIDDEN;
bool ftpad_ops_match(const struct ftpad_ops *ops, const char *name) FTPAD_HIDDEN;
void ftpad_free_filter(void *filter) FTPAD_HIDDEN;
/* The sorted entries of the functions one ops traces (ops->internal.entries). */
struct ftpad_entries {
	struct ftpad_entries *retired; /* patch.c's list of replaced arrays */
	size_t n;
	uintptr_t ip[];
};

/* Dispatches to every registered ops that traces the function. */
extern struct ftpad_ops ftpad_list_ops FTPAD_HIDDEN;

/* patch.c: make every site match the registered ops; under ftpad_lock. */
int ftpad_update_sites(void) FTPAD_HIDDEN;
/*
 * For the arch entry, inside ftpad_enter(): the ops of the site at addr,
 * read from the ops slot at slot when the arch has just seen the site call
 * a stub that reads it, else (slot 0) from the site's ->ops.  NULL: the
 * call raced with disabling the site; drop it.
 */
struct ftpad_ops *ftpad_site_ops(uintptr_t addr, uintptr_t slot) FTPAD_HIDDEN;
/* Free what was replaced, after a grace period: when anything was replaced,
 * or always with force (an ops was unregistered).  Under ftpad_lock. */
void ftpad_reclaim(bool force) FTPAD_HIDDEN;

/* tracer.c */
void ftpad_tracer_start(void) FTPAD_HIDDEN;

#endif /* FTPAD_INTERNAL_H */
