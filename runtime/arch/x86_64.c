/* SPDX-License-Identifier: MIT */
/*
 * x86_64.c - writing x86_64 sites while threads run: the int3 protocol,
 * its guarded variant without int3, the cores' sync, and the C side of
 * the trampolines.  What the sites and stubs hold is x86_64_encode.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <ucontext.h>
#include <cpuid.h>

#include "x86_64_encode.h"
#include "../quiesce.h"

/* The trampoline's offsets are generated (asm_offsets_x86_64.c); this
 * file's own copy of its frame's tail (R_ST0 ...) is checked here. */
_Static_assert(sizeof(struct ftpad_regs) == 416, "R_ST0, as trampoline_x86_64.S");

/* The exit trampoline's frame (trampoline_x86_64.S): st(0), st(1) and how
 * many of them were on the x87 stack, behind struct ftpad_regs. */
#define R_ST0 416
#define R_NST 428
#define R_ST1 432

void ftpad_trampoline_entry(unsigned long ret, unsigned long parent_ip,
			    struct ftpad_regs *regs, unsigned long kind) FTPAD_HIDDEN;
void ftpad_trampoline_at_exit(unsigned long ret, unsigned long parent_ip,
			      struct ftpad_regs *regs, struct ftpad_site *site) FTPAD_HIDDEN;

unsigned long *ftpad_arch_regs_argument_slot(struct ftpad_regs *regs, unsigned int n)
{
	unsigned long *const in_regs[] = {
		&regs->pt.rdi, &regs->pt.rsi, &regs->pt.rdx, &regs->pt.rcx, &regs->pt.r8, &regs->pt.r9,
	};

	if (n < 6)
		return in_regs[n];
	/* The 7th argument sits just above the return address. */
	return &((unsigned long *)regs->pt.rsp)[1 + n - 6];
}

void *ftpad_arch_regs_return_reg(struct ftpad_regs *regs, enum ftpad_return_reg r)
{
	uint32_t nst;

	memcpy(&nst, (char *)regs + R_NST, sizeof(nst));
	switch (r) {
	case FTPAD_RET_INT0:
		return &regs->pt.rax;
	case FTPAD_RET_INT1:
		return &regs->pt.rdx;
	case FTPAD_RET_VEC0:
	case FTPAD_RET_VEC1:
		return regs->vec[r - FTPAD_RET_VEC0];
	case FTPAD_RET_X87_0:
		return nst >= 1 ? (char *)regs + R_ST0 : NULL;
	case FTPAD_RET_X87_1:
		return nst >= 2 ? (char *)regs + R_ST1 : NULL;
	}
	return NULL;
}

unsigned long ftpad_arch_regs_stack_pointer(const struct ftpad_regs *regs)
{
	return regs->pt.rsp;
}

void ftpad_arch_regs_set_ip(struct ftpad_regs *regs, unsigned long ip)
{
	/* The trampoline's ret goes there, with rsp pointing at parent_ip as
	 * at the entry: ip runs as if the caller had called it. */
	regs->pt.rip = ip;
}

/*
 * The int3 protocol (docs/design.md "Patching at run time", after Linux's
 * text_poke_bp_batch): int3 on every site's first byte, sync; the other
 * four bytes, sync; the first byte, sync.  A thread reaching a site in the
 * middle traps, and on_sigtrap() emulates the new instruction.  Each sync
 * is membarrier SYNC_CORE for the other threads plus CPUID on this one.
 */
static struct sigaction chained; /* the SIGTRAP action installed before ours */
static bool trap_installed;       /* under ftpad_lock */

static void serialize_this_core(void)
{
	unsigned int a, b, c, d;

	__cpuid(0, a, b, c, d);
	(void)a, (void)b, (void)c, (void)d;
}

static int sync_all_cores(void)
{
	int err = ftpad_text_sync_cores();

	serialize_this_core();
	return err;
}

/*
 * Someone else's trap: hand it to the action installed before ours, with
 * the mask the kernel would have given it: the interrupted thread's
 * (uc_sigmask, which sigreturn puts back), its action's, and SIGTRAP
 * unless SA_NODEFER.  Ours ran with every signal blocked; without the
 * thread's own mask, a signal it blocks would come inside that handler.
 */
static void chain_sigtrap(int sig, siginfo_t *info, void *ctx)
{
	const ucontext_t *uc = ctx;
	sigset_t mask;

	sigorset(&mask, &uc->uc_sigmask, &chained.sa_mask);
	if (!(chained.sa_flags & SA_NODEFER))
		sigaddset(&mask, SIGTRAP);
	pthread_sigmask(SIG_SETMASK, &mask, NULL);
	if (chained.sa_flags & SA_SIGINFO) {
		chained.sa_sigaction(sig, info, ctx);
	} else if (chained.sa_handler == SIG_DFL) {
		/* Pending until we return, then the default action (a core). */
		sigaction(SIGTRAP, &chained, NULL);
		raise(SIGTRAP);
	} else if (chained.sa_handler != SIG_IGN) {
		chained.sa_handler(sig);
	}
}

/*
 * A site caught mid-patch: rip is just past our int3.  Emulate the
 * instruction being written (a call into the stub, or the NOP), or, when
 * the patch finished before this handler ran, execute the site again.
 */
/* The live patch's sites being written (ftpad_arch_sites_jump()), each
 * with the function it goes to (0: back to its NOP): what a trap at one
 * of them emulates.  n is published last and cleared first.  The table
 * only grows, and a table outgrown is never freed: a trap may still be
 * reading it while a later batch runs (under ftpad_lock, one at a time). */
struct jump_entry {
	uintptr_t at, to;
};
static struct {
	struct jump_entry *table;
	size_t n, cap;
} jumping;

/* Where a trap at at goes, if at is a live patch's site being written. */
static bool jumping_to(uintptr_t at, uintptr_t *to)
{
	size_t n = __atomic_load_n(&jumping.n, __ATOMIC_ACQUIRE);
	const struct jump_entry *j = __atomic_load_n(&jumping.table, __ATOMIC_RELAXED);

	for (size_t i = 0; i < n; i++) {
		if (j[i].at == at) {
			*to = j[i].to;
			return true;
		}
	}
	return false;
}

/* jumps in the table, room made; 0 or -ENOMEM.  Not yet published. */
static int fill_jumping(const struct ftpad_site_jump *jumps, size_t n)
{
	if (n > jumping.cap) {
		struct jump_entry *t = ftpad_alloc(n * sizeof(*t));

		if (!t)
			return -ENOMEM;
		__atomic_store_n(&jumping.table, t, __ATOMIC_RELAXED);
		jumping.cap = n;
	}
	for (size_t i = 0; i < n; i++)
		jumping.table[i] = (struct jump_entry){ ftpad_site_addr(jumps[i].site),
							jumps[i].target };
	return 0;
}

static bool emulate_site(greg_t *gr)
{
	uintptr_t at = (uintptr_t)gr[REG_RIP] - 1;
	struct ftpad_site *s;
	struct ftpad_module *m;
	int8_t dir;
	uint8_t call[8];
	int32_t rel32;

	uintptr_t to;

	if (jumping_to(at, &to)) {
		/* A jmp leaves the stack as it is: the new function returns
		 * to the caller. */
		gr[REG_RIP] = (greg_t)(to ? to : at + sizeof(nop5));
		return true;
	}
	s = ftpad_site_by_addr(at);
	m = s ? ftpad_module_of(at) : NULL;
	if (!s || !m)
		return false;
	dir = __atomic_load_n(&s->patching, __ATOMIC_ACQUIRE);
	if (dir > 0 && m->stubs &&
	    !ftpad_arch_site_call(s, m->stubs, __atomic_load_n(&s->target_regs, __ATOMIC_RELAXED),
				  call)) {
		memcpy(&rel32, call + 1, sizeof(rel32));
		/* The signal frame lies below the red zone: rsp - 8 is free. */
		gr[REG_RSP] -= 8;
		*(unsigned long *)gr[REG_RSP] = at + sizeof(nop5);
		gr[REG_RIP] = (greg_t)(at + sizeof(nop5) + rel32);
		return true;
	}
	if (dir < 0) {
		gr[REG_RIP] = (greg_t)(at + sizeof(nop5));
		return true;
	}
	if (*(volatile const uint8_t *)at != 0xcc) {
		gr[REG_RIP] = (greg_t)at;
		return true;
	}
	return false;
}

static void on_sigtrap(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	struct ftpad_thread_slot *t;
	bool emulated;
	int saved_errno = errno;

	/* int3 reports SI_KERNEL; raise() and kill() do not come from a site. */
	if (info->si_code == SI_KERNEL) {
		/* Keeps an unloaded module's sites from being freed meanwhile
		 * (inside libftpad's locked calls, the lock does). */
		t = ftpad_enter();
		emulated = emulate_site(uc->uc_mcontext.gregs);
		if (t)
			ftpad_exit(t);
		if (emulated) {
			__atomic_fetch_add(&ftpad_traps, 1, __ATOMIC_RELAXED);
			errno = saved_errno;
			return;
		}
	}
	errno = saved_errno;
	chain_sigtrap(sig, info, ctx);
}

/* glibc's own entry point, not libftpad.so's interposed sigaction: that
 * one wraps a handler set while the recorder runs so that its calls are
 * bracketed by SIGNAL events, and the traps of our own patching would be
 * recorded as the program's [signal SIGTRAP] frames. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

static int install_sigtrap(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigtrap,
				.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK };

	if (trap_installed)
		return 0;
	/*
	 * Nothing may interrupt our handler: a signal handler that ran into a
	 * site mid-patch there would trap with SIGTRAP blocked, and the kernel
	 * kills a thread whose int3 trap is blocked.  SIGTRAP itself stays
	 * unblocked (SA_NODEFER: our code has no site), so that a thread in
	 * here is not taken for one that blocks it (choose_protocol()).
	 */
	sigfillset(&sa.sa_mask);
	sigdelset(&sa.sa_mask, SIGTRAP);
	sa.sa_flags |= SA_NODEFER;
	if (__sigaction(SIGTRAP, &sa, &chained) < 0)
		return -errno;
	trap_installed = true;
	return 0;
}

/*
 * Without int3.  A thread that blocks SIGTRAP (the worker threads of many
 * servers block every signal) and runs into a site mid-patch is killed by
 * the kernel: it forces a blocked trap signal, with its default action.
 * When such a thread exists, the batch guards the sites with a 2-byte
 * `jmp .+5` (eb 03) in place of int3: a thread that arrives meanwhile
 * skips the site, as it would the NOP, and no signal is raised.  Stored
 * by this thread into code made writable by mprotect for the batch, so
 * that each change is one 2- or 4-byte store within a cache line, which
 * instruction fetch sees whole (what XRay's patching and Windows hot
 * patching count on):
 *  - NOP to call, call to NOP: eb 03 over the first two bytes, sync; the
 *    last three bytes, sync; the first two bytes, sync;
 *  - call to call (to or from the full save), whose first byte stays e8:
 *    the rel32 in one store in the tail step, so that the ops that stays
 *    registered loses no call, as with int3's emulation.
 * Not when FTPAD_TEXT_WRITE=procmem forbids mprotect, or a site crosses a
 * cache line: then the batch is refused (docs/runtime.md).
 */
#define CACHE_LINE 64
static const uint8_t jmp_over_site[2] = { 0xeb, sizeof(nop5) - 2 };

static inline void store_code16(uint8_t *p, uint8_t b0, uint8_t b1)
{
	uint16_t v = (uint16_t)(b0 | b1 << 8);

	__asm__ volatile("movw %1, %0" : "=m"(*(uint16_t *)p) : "r"(v));
}

static inline void store_code32(uint8_t *p, int32_t v)
{
	__asm__ volatile("movl %1, %0" : "=m"(*(int32_t *)p) : "r"(v));
}

/*
 * The steps of the protocol.  Each writes, for every site of the batch:
 *  - STEP_INT3: its slot (&site, going up with FTPAD_B_SLOT), and int3;
 *  - STEP_TAIL: the four bytes behind the int3; STEP_TAIL_SLOTS also puts
 *    the slot's NOPs back (going down with FTPAD_B_SLOT);
 *  - STEP_HEAD: the first byte.
 * A site's span is the same in every step (from its slot, when written,
 * to the end of the site), so each step makes the same runs.  Every part
 * may go out in one write with its neighbours: int3 guards the tail, the
 * first byte is one byte, and no thread reads a slot being written (see
 * patch.c).
 */
enum step { STEP_INT3, STEP_TAIL, STEP_HEAD, STEP_TAIL_SLOTS };

/* A step's walk over the sites of a batch; in the last step, the sites
 * of the run being assembled: [run, at). */
struct step_walk {
	struct ftpad_text_writer w;
	struct ftpad_text_run r;
	struct ftpad_batch *b;
	struct ftpad_site *run, *at;
};

/* The last step's run is in memory: its sites are done. */
static void run_written(void *ctx)
{
	struct step_walk *sw = ctx;

	ftpad_batch_written(sw->b, sw->run, sw->at);
	sw->run = sw->at;
}

/*
 * One step over the sites of module m in the batch.  Always inlined with a
 * constant step, so that each step is a loop of its own; the run stays in
 * local variables, and only a new run calls out.
 */
static inline __attribute__((always_inline)) void
step_module(struct step_walk *sw, struct ftpad_module *m, const enum step step, const bool guard)
{
	/* Locals, not fields of *sw, which the stores into code may alias. */
	const uint8_t bit = sw->b->bit;
	const bool direct = sw->w.direct;
	const uintptr_t stubs = m->stubs, pagem1 = sw->w.pagem1;
	struct ftpad_site *const end = ftpad_batch_end(m, bit), *run = ftpad_batch_first(m, bit);
	struct ftpad_text_run r = sw->r;
	bool far = false;

	for (struct ftpad_site *s = run; s < end; s++) {
		uintptr_t addr, lo, hi;
		uint8_t *p, *slot;
		int32_t rel32 = 0;
		bool call, rel_only;

		if (!(s->batch & bit))
			continue;
		addr = s->entry + s->site_off;
		hi = addr + sizeof(nop5);
		lo = s->batch & FTPAD_B_SLOT ? s->entry - 8 : addr;
		if (ftpad_text_run_takes(&r, lo, hi, pagem1)) {
			r.hi = hi;
		} else {
			sw->run = run;
			sw->at = s;
			r = ftpad_text_span(&sw->w, r, lo, hi, ftpad_module_limit(m, lo),
					    ftpad_module_prot(m, lo));
			run = sw->run;
		}
		p = (uint8_t *)(addr + r.delta);
		slot = (uint8_t *)(s->entry - 8 + r.delta);
		call = s->patching > 0;
		/* Without int3 (guard, always direct): a call that stays a call
		 * only changes its rel32, in the tail step. */
		rel_only = guard && call && p[0] == 0xe8;
		if (call) {
			intptr_t rel = (intptr_t)(stub_of(s, stubs, s->target_regs) - hi);

			rel32 = (int32_t)rel;
			/* Never: the stub page is within reach of the whole module. */
			far |= rel != rel32;
		}
		if (step == STEP_INT3) {
			if (call && (s->batch & FTPAD_B_SLOT))
				memcpy(slot, &(uint64_t){ (uintptr_t)s }, 8);
			if (!guard)
				p[0] = 0xcc;
			else if (!rel_only)
				store_code16(p, jmp_over_site[0], jmp_over_site[1]);
		} else if (step == STEP_HEAD) {
			if (!guard)
				p[0] = call ? 0xe8 : nop5[0];
			else if (!rel_only)
				store_code16(p, call ? 0xe8 : nop5[0], call ? (uint8_t)rel32 : nop5[1]);
			/* Stored into the code itself: done, reported a few at a
			 * time while their cache lines are at hand. */
			if (direct && s + 1 - run >= 64) {
				ftpad_batch_written(sw->b, run, s + 1);
				run = s + 1;
			}
		} else if (rel_only) {
			store_code32(p + 1, rel32);
		} else if (call) {
			/* Behind int3, the four bytes; behind the jmp, the last three. */
			memcpy(p + 1 + guard, (uint8_t *)&rel32 + guard, sizeof(rel32) - guard);
		} else {
			memcpy(p + 1 + guard, nop5 + 1 + guard, sizeof(nop5) - 1 - guard);
			if (step == STEP_TAIL_SLOTS && (s->batch & FTPAD_B_SLOT))
				memcpy(slot, &ftpad_arch_slot_empty, 8);
		}
	}
	if (far && !sw->w.err)
		sw->w.err = -ERANGE;
	sw->run = run;
	sw->at = end;
	ftpad_text_flush(&sw->w, r);
	sw->r = r;
}

/* One step over one module: each step, with int3 or guarded, a loop of
 * its own (step_module() inlined with constants). */
static void step_one_module(struct step_walk *sw, struct ftpad_module *m, enum step step,
			    bool guard)
{
#define STEP(st) (guard ? step_module(sw, m, st, true) : step_module(sw, m, st, false))
	switch (step) {
	case STEP_INT3:
		STEP(STEP_INT3);
		break;
	case STEP_TAIL:
		STEP(STEP_TAIL);
		break;
	case STEP_TAIL_SLOTS:
		STEP(STEP_TAIL_SLOTS);
		break;
	default:
		STEP(STEP_HEAD);
	}
#undef STEP
}

static int write_step(struct ftpad_batch *b, enum step step, bool direct, bool guard)
{
	struct step_walk sw = { .b = b };

	sw.r = ftpad_text_writer_init(&sw.w, direct, step == STEP_HEAD ? run_written : NULL, &sw);
	for (struct ftpad_module *m = ftpad_modules(); m && !sw.w.err; m = m->next) {
		if (!ftpad_batch_first(m, b->bit))
			continue;
		step_one_module(&sw, m, step, guard);
	}
	return sw.w.err;
}

/* The code a module's sites in batch b may write: from the first one's
 * slot to the last one's end. */
static void batch_range(const struct ftpad_module *m, const struct ftpad_batch *b, uintptr_t *lo,
			uintptr_t *hi)
{
	const struct ftpad_site *first = ftpad_batch_first(m, b->bit);

	*lo = first->entry - (first->state & FTPAD_S_SLOT ? 8 : 0);
	*hi = ftpad_site_addr(ftpad_batch_end(m, b->bit) - 1) + sizeof(nop5);
}

/*
 * When code is written by mprotect: the range of every module's sites in
 * the batch writable (writable), or back to its protection.  Returns
 * whether that was done, with *err; false without an error when a range
 * crosses into another segment (then the batch goes run by run).
 */
static bool protect_batch(const struct ftpad_batch *b, bool writable, int *err)
{
	for (const struct ftpad_module *m = ftpad_modules(); m; m = m->next) {
		uintptr_t lo, hi;

		if (!ftpad_batch_first(m, b->bit))
			continue;
		batch_range(m, b, &lo, &hi);
		if (writable && hi > ftpad_module_limit(m, lo))
			return false;
	}
	*err = 0;
	for (const struct ftpad_module *m = ftpad_modules(); m; m = m->next) {
		uintptr_t lo, hi;
		int e;

		if (!ftpad_batch_first(m, b->bit))
			continue;
		batch_range(m, b, &lo, &hi);
		e = ftpad_text_unprotect(lo, hi, ftpad_module_prot(m, lo), writable);
		*err = *err ? *err : e;
		if (e && writable) {
			/* Undo those before; the caller reports the error. */
			for (const struct ftpad_module *u = ftpad_modules(); u != m; u = u->next) {
				if (!ftpad_batch_first(u, b->bit))
					continue;
				batch_range(u, b, &lo, &hi);
				ftpad_text_unprotect(lo, hi, ftpad_module_prot(u, lo), false);
			}
			return true;
		}
	}
	return true;
}

/*
 * The int3 protocol over batch b.  When code is written by mprotect, each
 * module's range is made writable once for the three steps.  With sites
 * going back to their NOPs whose slots are to be cleared, the slots go
 * back to their NOPs in the tail step: after the int3 step's sync no
 * thread sees those sites call, and a grace period then
 * (ftpad_grace_try_unpublished(), which does not wait for long) lets the last
 * readers of their slots finish.  That saves a fourth pass over the code.
 */
/* Whether every site of the batch lies within one cache line, so that the
 * guarded protocol can store each change in one piece. */
static bool batch_in_lines(const struct ftpad_batch *b)
{
	for (const struct ftpad_module *m = ftpad_modules(); m; m = m->next) {
		const struct ftpad_site *end = ftpad_batch_end(m, b->bit);

		for (const struct ftpad_site *s = ftpad_batch_first(m, b->bit); s && s < end; s++)
			if ((s->batch & b->bit) &&
			    ftpad_site_addr(s) % CACHE_LINE > CACHE_LINE - sizeof(nop5))
				return false;
	}
	return true;
}

static const char unwritable[] = "the code cannot be made writable to write without int3";

/* The code of batch b made writable for the guarded protocol: NULL, or
 * why it cannot be written so. */
static const char *guard_setup(struct ftpad_batch *b)
{
	int err = 0;

	if (!ftpad_text_may_unprotect())
		return "FTPAD_TEXT_WRITE=procmem forbids writing without int3";
	if (!batch_in_lines(b))
		return "a site crosses a cache line, so cannot be written without int3";
	if (!protect_batch(b, true, &err))
		return "its sites span segments, so cannot be written without int3";
	if (err)
		return unwritable;
	return NULL;
}

/*
 * A signal whose handler runs with SIGTRAP blocked (its sa_mask has it, as
 * sigfillset() gives it), or 0.  Such a handler may start on any thread
 * at any moment, after the threads' masks were read: the kernel blocks
 * its sa_mask on entry, and the handler's calls may run into an int3.
 */
static int handler_blocking_sigtrap(void)
{
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		if (sig == SIGTRAP || sigaction(sig, NULL, &sa) < 0 ||
		    sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		if (sigismember(&sa.sa_mask, SIGTRAP) == 1)
			return sig;
	}
	return 0;
}

/*
 * How batch b is written: by the int3 protocol when no other thread
 * blocks SIGTRAP and no handler would block it (handler_blocking_sigtrap()),
 * else guarded (*guard, with the code made writable: *direct), else
 * refused with -EAGAIN and a message naming the thread.  When the threads
 * cannot be listed (no /proc), guarded if it can be.  A handler that
 * blocks SIGTRAP makes it guarded when it can be, else int3 as before:
 * refusing would refuse every update of such a program, for a rare race;
 * once mprotect was refused (MDWE), it is not tried again for a handler,
 * which would warn at every batch.
 */
static int choose_protocol(struct ftpad_batch *b, bool *direct, bool *guard)
{
	static bool handler_unwritable; /* under ftpad_lock */
	char name[16] = "?";
	pid_t tid = ftpad_thread_blocking(SIGTRAP, NULL, name, sizeof(name));
	const char *why;
	int sig;

	*guard = false;
	if (!tid && !handler_unwritable && (sig = handler_blocking_sigtrap()) != 0) {
		why = guard_setup(b);
		if (why) {
			handler_unwritable = why == unwritable;
			return 0;
		}
		ftpad_debug("ftpad: the handler of signal %d blocks SIGTRAP: %zu sites written "
			    "without int3\n", sig, b->n);
		return *direct = *guard = true, 0;
	}
	if (!tid)
		return 0;
	why = guard_setup(b);
	if (!why) {
		ftpad_debug("ftpad: thread %d (%s) blocks SIGTRAP: %zu sites written without int3\n",
			    (int)tid, name, b->n);
		return *direct = *guard = true, 0;
	}
	/* glibc blocks every signal for a moment in a thread being created
	 * or exiting (and in pthread_create's caller): before refusing, give
	 * such a thread a few milliseconds to pass. */
	for (int i = 0; tid > 0 && i < 10; i++) {
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
		tid = ftpad_thread_blocking(SIGTRAP, NULL, name, sizeof(name));
	}
	if (tid <= 0)
		return 0; /* none left, or no /proc to tell: int3, as before */
	ftpad_warn("ftpad: error: thread %d (%s) blocks SIGTRAP, and would be killed by the kernel "
		   "should it run into a site being patched with int3; %s; not patched\n",
		   (int)tid, name, why);
	return -EAGAIN;
}

/*
 * A thread that blocks SIGTRAP with pthread_sigmask after its mask was
 * read, and then runs into an int3 of the batch, is killed.  So a change
 * that may block SIGTRAP first blocks every signal (maskhooks.c; the
 * thread runs no padded code meanwhile), then waits here until no int3
 * batch is being written, and only then sets the mask asked for.  The
 * batch announces itself (trap_batch) before it reads any mask, both
 * sequentially consistent: a batch that started before the change's look
 * is waited out; one that starts after reads SIGTRAP blocked and writes
 * without int3.  No count of the threads inside a change: a fork from a
 * signal handler in between would leave the child's count wrong for ever
 * (an earlier version hung tests/src/runtime/env_forksig.c).
 */
static int trap_batch;            /* atomic, a futex word: 1 from the look to the last write */
static __thread bool batch_here;  /* this thread writes the batch: its changes never wait */

bool ftpad_arch_mask_may_trap(const sigset_t *set)
{
	return sigismember(set, SIGTRAP) == 1;
}

void ftpad_arch_mask_wait(void)
{
	while (!batch_here && __atomic_load_n(&trap_batch, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &trap_batch, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
}

/* In a forked child, the one thread left: a batch another thread was
 * writing is not the child's. */
void ftpad_arch_fork_child(void)
{
	if (!batch_here)
		trap_batch = 0;
}

/*
 * trampoline_x86_64.S RECORD lists, for each of its copies, the address of
 * the jne that follows its cmpxchg (the slot is reserved there when ZF is
 * set) and of the instruction after it counts the event: between the two,
 * the chunk's last slot is this thread's, and its event is not counted.
 */
struct record_window {
	uintptr_t reserved, counted;
};
extern const struct record_window __start_ftpad_record_windows[] __attribute__((weak));
extern const struct record_window __stop_ftpad_record_windows[] __attribute__((weak));

bool ftpad_arch_record_slot_open(const void *ucontext)
{
	const ucontext_t *uc = ucontext;
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	enum { ZF = 1 << 6 };

	for (const struct record_window *w = __start_ftpad_record_windows;
	     w && w < __stop_ftpad_record_windows; w++) {
		if (pc == w->reserved)
			return uc->uc_mcontext.gregs[REG_EFL] & ZF;
		if (pc > w->reserved && pc < w->counted)
			return true;
	}
	return false;
}

/* From here until trap_batch_end(), a thread that comes to block SIGTRAP
 * waits first (ftpad_arch_mask_wait()). */
static void trap_batch_begin(void)
{
	batch_here = true;
	__atomic_store_n(&trap_batch, 1, __ATOMIC_SEQ_CST);
}

static void trap_batch_end(void)
{
	if (__atomic_exchange_n(&trap_batch, 0, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &trap_batch, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
	batch_here = false;
}

int ftpad_arch_batch_write(struct ftpad_batch *b)
{
	enum step tail = STEP_TAIL;
	int err = install_sigtrap(), end = 0;
	bool direct = false, guard = false;
	sigset_t all, mask;

	/* Nothing on this thread runs into a site mid-patch either: its
	 * signal handlers wait until the batch is written. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &mask);
	trap_batch_begin();
	if (!err)
		err = choose_protocol(b, &direct, &guard);
	/* Without int3 (or without a write), blocking SIGTRAP is harmless. */
	if (err || guard)
		trap_batch_end();
	if (!err && !guard && ftpad_text_direct())
		direct = protect_batch(b, true, &err);
	if (!err)
		err = write_step(b, STEP_INT3, direct, guard);
	if (!err)
		err = sync_all_cores();
	if (!err && b->slots && ftpad_grace_try_unpublished()) {
		b->slots_cleared = true;
		tail = STEP_TAIL_SLOTS;
	}
	if (!err)
		err = write_step(b, tail, direct, guard);
	if (!err)
		err = sync_all_cores();
	if (!err)
		err = write_step(b, STEP_HEAD, direct, guard);
	if (direct)
		protect_batch(b, false, &end);
	if (!err)
		err = end ? end : sync_all_cores();
	trap_batch_end();
	pthread_sigmask(SIG_SETMASK, &mask, NULL);
	return err;
}

/*
 * Called by the trampolines for every call the fast path does not take
 * (trampoline_x86_64.S): ret is the address after the site's call, kind
 * what the stub put in r11.
 */
void ftpad_trampoline_entry(unsigned long ret, unsigned long parent_ip,
			    struct ftpad_regs *regs, unsigned long kind)
{
	uintptr_t site = ret - sizeof(nop5);
	uintptr_t ip = site - (kind & KIND_ENDBR ? sizeof(endbr64) : 0);

	ftpad_dispatch_site(ip, parent_ip, regs, site, kind & KIND_SLOT ? ip - 8 : 0);
}

/* Called by the exit trampolines: ret is the address after the exit
 * site's call, site what its stub pushed. */
void ftpad_trampoline_at_exit(unsigned long ret, unsigned long parent_ip, struct ftpad_regs *regs,
			      struct ftpad_site *site)
{
	ftpad_dispatch_exit(ret - sizeof(nop5), site, parent_ip, regs);
}

/* One round of the int3 protocol over every pad (pokes: room for n; the
 * pads best in address order, for the writes to merge):
 * the int3, the last four bytes, or the first byte; then every core
 * serialized. */
static int jump_round(const struct ftpad_site_jump *jumps, size_t n, struct ftpad_poke *pokes,
		      enum step step)
{
	struct ftpad_seg_cache seg = { 0 };
	int err;

	for (size_t i = 0; i < n; i++) {
		uintptr_t at = ftpad_site_addr(jumps[i].site);
		uint8_t insn[sizeof(nop5)];

		ftpad_arch_jump_insn(jumps[i].site, jumps[i].target, insn);
		ftpad_poke_place(&pokes[i], &seg, jumps[i].mod, step == STEP_TAIL ? at + 1 : at);
		pokes[i].len = step == STEP_TAIL ? sizeof(nop5) - 1 : 1;
		memcpy(pokes[i].bytes, step == STEP_INT3 ? (const uint8_t[]){ 0xcc }
				       : step == STEP_TAIL ? insn + 1 : insn,
		       pokes[i].len);
	}
	/* Mergeable: the bytes between two pads are rewritten as they are,
	 * so that neighbouring pads go out in one write. */
	err = ftpad_text_poke(pokes, n, true);
	return err ? err : sync_all_cores();
}

/*
 * The guarded variant, for a process where a thread blocks SIGTRAP: the
 * code made writable, each change one 2- or 4-byte store within a cache
 * line (as the tracer's guarded protocol): `jmp .+5` over the site (what
 * the NOP does, and what a jump's removal leads to), the last three
 * bytes, the first two; a jump to a jump is its rel32 in one store.
 */
static int jump_guarded(const struct ftpad_module *m, uintptr_t at, const uint8_t *insn)
{
	uint8_t *p = (uint8_t *)at;
	int prot = ftpad_module_prot(m, at);
	int err;

	if (!ftpad_text_may_unprotect() || at % CACHE_LINE > CACHE_LINE - sizeof(nop5))
		return -EAGAIN;
	err = ftpad_text_unprotect(at, at + sizeof(nop5), prot, true);
	if (err)
		return err;
	if (p[0] == 0xe9 && insn[0] == 0xe9) {
		int32_t rel32;

		memcpy(&rel32, insn + 1, sizeof(rel32));
		store_code32(p + 1, rel32);
		err = sync_all_cores();
	} else {
		store_code16(p, jmp_over_site[0], jmp_over_site[1]);
		err = sync_all_cores();
		memcpy(p + 2, insn + 2, sizeof(nop5) - 2);
		err = err ? err : sync_all_cores();
		store_code16(p, insn[0], insn[1]);
		err = err ? err : sync_all_cores();
	}
	ftpad_text_unprotect(at, at + sizeof(nop5), prot, false);
	return err;
}

int ftpad_arch_sites_jump(const struct ftpad_site_jump *jumps, size_t n)
{
	char name[16] = "?";
	struct ftpad_poke *pokes;
	pid_t tid;
	int err = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t insn[sizeof(nop5)];

		if (ftpad_arch_jump_insn(jumps[i].site, jumps[i].target, insn))
			return -ERANGE;
	}
	/* A thread that blocks SIGTRAP, or a handler that would: int3 could
	 * kill it, so the guarded stores instead, if they can be made: a pad
	 * at a time, each its own mprotect. */
	tid = ftpad_thread_blocking(SIGTRAP, NULL, name, sizeof(name));
	if (tid > 0 || handler_blocking_sigtrap()) {
		for (size_t i = 0; i < n && !err; i++) {
			uintptr_t at = ftpad_site_addr(jumps[i].site);
			uint8_t insn[sizeof(nop5)];

			ftpad_debug("ftpad: thread %d (%s) blocks SIGTRAP: the pad at %#lx "
				    "written without int3\n", (int)tid, name, (unsigned long)at);
			ftpad_arch_jump_insn(jumps[i].site, jumps[i].target, insn);
			err = jump_guarded(jumps[i].mod, at, insn);
		}
		if (err == -EAGAIN)
			ftpad_warn("ftpad: thread %d (%s) blocks SIGTRAP, and the code cannot be "
				   "written without int3 (FTPAD_TEXT_WRITE=procmem, or the site "
				   "crosses a cache line): not switched\n", (int)tid, name);
		return err;
	}
	err = install_sigtrap();
	if (err)
		return err;
	pokes = ftpad_alloc(n * sizeof(*pokes));
	if (!pokes)
		return -ENOMEM;
	err = fill_jumping(jumps, n);
	if (err) {
		ftpad_free(pokes);
		return err;
	}
	__atomic_store_n(&jumping.n, n, __ATOMIC_RELEASE);
	err = jump_round(jumps, n, pokes, STEP_INT3);
	if (!err)
		err = jump_round(jumps, n, pokes, STEP_TAIL);
	if (!err)
		err = jump_round(jumps, n, pokes, STEP_HEAD);
	/* A thread that trapped and has not looked yet finds no int3 there
	 * any more, and runs the site again. */
	__atomic_store_n(&jumping.n, 0, __ATOMIC_RELEASE);
	ftpad_free(pokes);
	return err;
}
