/* SPDX-License-Identifier: MIT */
/*
 * aarch64.c - writing aarch64 sites while threads run: the cache
 * maintenance, the MOVs of the kernel layout written with the other
 * threads stopped, and the C side of the trampolines.  What the sites and
 * stubs hold is aarch64_encode.c's.
 *
 * Pad (docs/format.md, docs/design.md "Pad layouts"):
 *      [before NOPs][ops slot: 2 NOPs, 8-aligned] entry: [bti c?]
 *      mov x9, x30 ; nop (the site) ; [rest of after]
 * The compiler already saved the return address in x9, so enabling a site
 * changes one instruction, NOP to `bl stub`, and disabling changes it back:
 * a single aligned 4-byte word, which the architecture lets other threads
 * run while it changes (ARM ARM B2.2.5, "concurrent modification and
 * execution": NOP, B, BL are in the permitted list).  The stub, near the
 * module, loads the site's kind into x16 and jumps to the trampoline.
 *
 * A record without FTPAD_SITE_MOV_X9 describes the kernel layout, two NOPs
 * (what -fpatchable-function-entry=2 or =4,2 and the clang pass give):
 * the runtime writes the MOV into the first NOP once, before the site is
 * first enabled, and keeps it; from then on the site toggles like the
 * user layout.  Two things stand in the way of that first write while
 * other threads run: MOV is not in the permitted list (a thread executing
 * the word while it changes may do anything), and a thread that ran the
 * first NOP and sits at the second would run the BL without x9 set.  So
 * a batch with such MOVs is written while the process is single-threaded,
 * or, when the program allows it (FTPAD_STOP_THREADS=1), with every other
 * thread stopped in a signal handler (quiesce.c), MOVs first, then the BLs, and each stopped
 * thread that sits at the second instruction of one of those pads gets
 * x9 = x30, what the MOV would have given it, before it goes on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "aarch64_encode.h"
#include "../quiesce.h"

/* trampoline_aarch64.S */
void ftpad_trampoline_entry(unsigned long ret, unsigned long parent_ip,
			    struct ftpad_regs *regs, unsigned long kind) FTPAD_HIDDEN;
void ftpad_trampoline_at_exit(unsigned long site, unsigned long parent_ip,
			      struct ftpad_regs *regs) FTPAD_HIDDEN;

/*
 * Does code written through /proc/self/mem run as written?  On Linux it
 * does: the kernel does the cache maintenance.  Under qemu-user it does
 * not: the write bypasses qemu, whose already translated code goes on
 * running the old instructions (measured: a site enabled that way is never
 * called).  So ask once: run a probe function, rewrite it through
 * /proc/self/mem, run it again.  Under ftpad_lock.
 */
static bool procmem_reaches_code(void)
{
	static int known; /* 1 yes, -1 no */
	const uint32_t one[2] = { 0x52800020u /* mov w0, #1 */, 0xd65f03c0u /* ret */ };
	const uint32_t two = 0x52800040u; /* mov w0, #2 */
	long size = sysconf(_SC_PAGESIZE);
	int (*probe)(void);
	void *page;
	int fd;

	if (known)
		return known > 0;
	known = 1; /* and when the probe cannot run, /proc/self/mem is not used either */
	page = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return true;
	memcpy(page, one, sizeof(one));
	__builtin___clear_cache((char *)page, (char *)page + sizeof(one));
	fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (fd >= 0 && mprotect(page, size, PROT_READ | PROT_EXEC) == 0) {
		probe = (int (*)(void))page;
		if (probe() == 1 && pwrite(fd, &two, sizeof(two), (off_t)(uintptr_t)page) == 4 &&
		    probe() == 1) {
			known = -1;
			ftpad_info("ftpad: code written through /proc/self/mem does not run "
				   "(qemu-user?); re-protecting the pages written\n");
		}
	}
	if (fd >= 0)
		close(fd);
	munmap(page, size);
	return known > 0;
}

/*
 * One site of a batch, as this file writes it (ftpad_arch_batch_write()
 * makes them from the sites): its new instruction, and the bytes right
 * before it to write first (the ops slot, a one-time prep instruction, and
 * what lies between them and the site, unchanged).
 */
struct change {
	uintptr_t site;
	uintptr_t limit;   /* end of the segment it is in */
	int prot;          /* that segment's protection */
	uint8_t pre_len;   /* bytes of pre, which ends at the site */
	uint8_t insn[8];   /* the site's new instruction (ftpad_arch_site_len bytes) */
	uint8_t pre[16];
};

/*
 * The change that site s of a batch makes (->patching: to a call, to the
 * full save's stub with ->target_regs, or back to its NOP): its new
 * instruction, and the bytes to write before it (its slot, the prep MOV)
 * up to the site, with those between as they are now.  The module's stubs
 * are mapped (patch.c).
 */
static int site_change(struct ftpad_seg_cache *c, struct ftpad_module *mod, struct ftpad_site *s,
		       struct change *ch)
{
	uintptr_t addr = ftpad_site_addr(s), slot = ftpad_site_slot(s), lo = addr, prep = 0;
	uint8_t prep_insn[8];
	bool slot_write = false;
	struct ftpad_poke where;
	int err;

	if (s->patching < 0) {
		put_insn(ch->insn, INSN_NOP);
	} else {
		err = ftpad_arch_site_call(s, mod->stubs, s->target_regs, ch->insn);
		if (err)
			return err;
		slot_write = s->batch & FTPAD_B_SLOT;
		if ((s->state & FTPAD_S_PREP) && !(s->state & FTPAD_S_PREPARED))
			ftpad_arch_site_prep(s, &prep, prep_insn);
		lo = slot_write ? slot : prep ? prep : addr;
	}
	ftpad_poke_place(&where, c, mod, lo);
	ch->site = addr;
	ch->limit = where.limit;
	ch->prot = where.prot;
	ch->pre_len = addr - lo;
	memcpy(ch->pre, (const void *)lo, ch->pre_len);
	if (slot_write) {
		uint64_t v = (uintptr_t)s;

		memcpy(ch->pre, &v, sizeof(v));
	}
	if (prep)
		memcpy(ch->pre + (prep - lo), prep_insn, ftpad_arch_site_len);
	return 0;
}

/* Which part of each change a pass writes. */
enum part { PART_PRE, PART_SITE };

static void part_of(const void *item, int part, struct ftpad_poke *p)
{
	const struct change *c = item;

	p->limit = c->limit;
	p->prot = c->prot;
	if (part == PART_PRE) {
		p->addr = c->site - c->pre_len;
		p->len = c->pre_len;
		memcpy(p->bytes, c->pre, sizeof(c->pre)); /* all of it: a fixed-size copy */
	} else {
		p->addr = c->site;
		p->len = 4;
		memcpy(p->bytes, c->insn, 4);
	}
}

/*
 * What makes qemu-user drop its translations of a page: the page becoming
 * writable.  Cycle the protection of every page written (only where the
 * probe above failed, so never on a real kernel).
 */
static int reprotect(const struct change *changes, size_t n, enum part part)
{
	uintptr_t size = (uintptr_t)sysconf(_SC_PAGESIZE), last = 0;
	struct ftpad_poke p;

	for (size_t i = 0; i < n; i++) {
		uintptr_t page;

		part_of(&changes[i], part, &p);
		page = p.addr & ~(size - 1);
		if (!p.len || page == last)
			continue;
		last = page;
		if (mprotect((void *)page, size, p.prot | PROT_WRITE) < 0 ||
		    mprotect((void *)page, size, p.prot) < 0)
			return -errno;
	}
	return 0;
}

/*
 * Write one part of every change, and make sure every thread runs it.
 * Site words are not mergeable: each is a single 32-bit store, as merged
 * writes are the kernel's memcpy, whose stores need not keep a word whole.
 */
static int write_synced(const struct change *changes, size_t n, enum part part)
{
	int err = ftpad_text_write(changes, n, sizeof(*changes), part_of, part, part == PART_PRE);

	if (!err && !procmem_reaches_code())
		err = reprotect(changes, n, part);
	/* A context synchronization on every thread: from here on, none runs
	 * an instruction it fetched before the write. */
	if (!err)
		err = ftpad_text_sync_cores();
	return err;
}

/*
 * Set once a MOV was written but a thread that blocks the stop signal was
 * not seen asleep again afterwards (ftpad_threads_confirm() failed): such
 * a site is not FTPAD_S_PREPARED, and although its MOV is in memory the
 * next enabling must stop the threads again.
 */
static bool unconfirmed;

/* Whether change c writes the MOV of a NOP NOP pad (not yet known safe). */
static bool writes_mov(const struct change *c)
{
	const struct ftpad_site *s;
	uint32_t last;

	if (c->pre_len < 4)
		return false;
	memcpy(&last, c->pre + c->pre_len - 4, sizeof(last));
	if (last != INSN_MOV_X9_X30)
		return false;
	if (insn_at(c->site - 4) == INSN_NOP)
		return true;
	if (!unconfirmed)
		return false; /* the compiler's MOV, or one written before */
	s = ftpad_site_by_addr(c->site);
	return s && (s->state & FTPAD_S_PREP) && !(s->state & FTPAD_S_PREPARED);
}

/*
 * In each thread stopped while the MOVs were written (quiesce.c, signal
 * context): a thread that ran the old first NOP and stands at the second
 * instruction gets what the MOV would have given it.  x9 is dead at a
 * function's entry (a scratch register), so this changes nothing else.
 */
static bool fix_x9(void *ctx, const uintptr_t *sites, size_t n)
{
	ucontext_t *uc = ctx;

	if (!ftpad_sorted_has(sites, n, uc->uc_mcontext.pc))
		return false;
	uc->uc_mcontext.regs[9] = uc->uc_mcontext.regs[30];
	return true;
}

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Whatever logs or sets itself up on its first use does so now, not while
 * threads are stopped that may hold stdio's lock: the qemu probe, the
 * membarrier registration, and the choice of a write method (c's word
 * before the site, rewritten as it is).
 */
static int settle_writer(const struct change *c)
{
	struct ftpad_poke p = { .addr = c->site - 4, .limit = c->limit, .prot = c->prot, .len = 4 };
	int err;

	procmem_reaches_code();
	memcpy(p.bytes, (const void *)p.addr, 4);
	err = ftpad_text_poke(&p, 1, false);
	return err ? err : ftpad_text_sync_cores();
}

static void report_stop_failure(uintptr_t site, size_t n, const struct ftpad_stop_failure *why,
				bool written)
{
	const struct ftpad_site *s = ftpad_site_by_addr(site);
	const struct ftpad_module *mod = ftpad_module_of(site);
	char what[160];

	if (why->refused) {
		ftpad_warn("%s: error: ftpad: %s%s: a kernel-ABI pad (NOP NOP, no mov x9, x30 from "
			   "the compiler): its MOV can only be written while the process is "
			   "single-threaded, and %d threads run; %zu such function%s not patched "
			   "(enable them once before starting threads, or set FTPAD_STOP_THREADS=1 to "
			   "let libftpad stop the threads with signal %d while it writes them)\n",
			   mod ? mod->path : "?", s && s->name ? s->name : "(unnamed)",
			   n > 1 ? " and others" : "", why->refused, n, n > 1 ? "s" : "",
			   FTPAD_STOP_SIGNAL);
		return;
	}
	if (why->too_many)
		snprintf(what, sizeof(what), "threads were started faster than they could be stopped");
	else if (why->at_pc)
		snprintf(what, sizeof(what), "thread %d sleeps in the kernel right between the two "
			 "NOPs of one of them", why->tid);
	else if (written)
		snprintf(what, sizeof(what), "thread %d, which blocks the signal, ran while they were "
			 "written and was not seen asleep again", why->tid);
	else
		snprintf(what, sizeof(what), "thread %d did not stop within %d ms (%s)", why->tid,
			 FTPAD_STOP_TIMEOUT_MS, why->blocks ? "it blocks the signal" :
			 "it did not take the signal: blocked, or not scheduled");
	ftpad_warn("%s: error: ftpad: %s%s: a kernel-ABI pad (NOP NOP, no mov x9, x30 from the "
		   "compiler): its MOV is written while every other thread is stopped by signal %d, "
		   "and %s; %zu such function%s not patched\n",
		   mod ? mod->path : "?", s && s->name ? s->name : "(unnamed)", n > 1 ? " and others" : "",
		   FTPAD_STOP_SIGNAL, what, n, n > 1 ? "s" : "");
}

/* The slot part of a change that writes one (its pre starts 8 bytes
 * before the entry then), back to its NOPs. */
static void slot_of(const void *item, int part, struct ftpad_poke *p)
{
	const struct change *c = item;

	(void)part;
	p->limit = c->limit;
	p->prot = c->prot;
	p->addr = c->site - c->pre_len;
	p->len = c->pre_len >= 12 ? 8 : 0; /* slot, [bti c,] MOV */
	memcpy(p->bytes, &ftpad_arch_slot_empty, 8);
}

/*
 * A batch in which nmov changes write a MOV: with every other thread
 * stopped, the PRE part (slots and MOVs), then, once the threads that
 * were only seen asleep are seen asleep again away from those pads, the
 * sites.  The threads go on after the BLs are written, each one that
 * stood right behind the first NOP of one of those pads with x9 set.
 * Nothing is logged while they are stopped.
 */
static int write_stopped(const struct change *changes, size_t n, size_t nmov)
{
	uintptr_t *sites = ftpad_alloc(nmov * sizeof(*sites));
	struct ftpad_stop_failure why;
	unsigned long fixed;
	size_t k = 0, first = 0;
	bool refused = false;
	int err;

	if (!sites)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (!writes_mov(&changes[i]))
			continue;
		if (!k)
			first = i;
		sites[k++] = changes[i].site;
	}
	ftpad_sort(sites, k, sizeof(*sites), cmp_addr);
	/* Refused before settle_writer() rewrites a word: nothing is written. */
	err = ftpad_threads_check(&why);
	if (!err)
		err = settle_writer(&changes[first]);
	if (!err)
		err = ftpad_threads_stop(sites, k, fix_x9, &why);
	if (err) {
		if (err == -EAGAIN)
			report_stop_failure(changes[first].site, k, &why, false);
		goto out;
	}
	err = write_synced(changes, n, PART_PRE);
	if (!err && (err = ftpad_threads_confirm(&why))) {
		/* No site calls: the slots may go back to their NOPs.  The
		 * MOVs stay (harmless); the next enabling stops the threads
		 * again for them. */
		refused = unconfirmed = true;
		ftpad_text_write(changes, n, sizeof(*changes), slot_of, 0, true);
	}
	if (!err)
		err = write_synced(changes, n, PART_SITE);
	fixed = ftpad_threads_release();
	if (refused)
		report_stop_failure(changes[first].site, k, &why, true);
	ftpad_debug("ftpad: %zu kernel-ABI pad MOV%s written with the other threads stopped; "
		    "%lu thread%s stood between the two NOPs: x9 set\n", k, k > 1 ? "s" : "", fixed,
		    fixed == 1 ? "" : "s");
out:
	ftpad_free(sites);
	return err;
}

/*
 * First what comes before the sites (their slots, the MOV of a kernel-ABI
 * pad), then one aligned word per site, NOP <-> BL: both are in the
 * architecture's list of instructions another thread may run while they
 * change, so no trap protocol is needed: a thread runs the old or the new
 * one.  A batch that writes MOVs is written with the other threads
 * stopped (write_stopped()).  Code written by plain stores
 * (the mprotect way) reaches the instruction side through text.c's cache
 * maintenance; /proc/self/mem writes get it from the kernel, except under
 * qemu-user.
 */
static int write_changes(const struct change *changes, size_t n)
{
	size_t pre = 0, movs = 0;
	int err = 0;

	for (size_t i = 0; i < n; i++) {
		pre += changes[i].pre_len != 0;
		movs += writes_mov(&changes[i]);
	}
	if (movs)
		return write_stopped(changes, n, movs);
	if (pre)
		err = write_synced(changes, n, PART_PRE);
	return err ? err : write_synced(changes, n, PART_SITE);
}

/* The changes of a batch, kept from one batch to the next. */
static struct change *changes;
static size_t changes_cap;

/*
 * Batch b as an array of changes (site_change()), written by
 * write_changes().  The sites are not reported to ftpad_batch_written():
 * when this returns 0 they are all written, which is what patch.c takes
 * a site it was not told about to be.
 */
int ftpad_arch_batch_write(struct ftpad_batch *b)
{
	struct ftpad_seg_cache seg = { 0 };
	size_t k = 0;
	int err = 0;

	if (b->n > changes_cap) {
		struct change *p = ftpad_realloc(changes, b->n * sizeof(*p));

		if (!p)
			return -ENOMEM;
		changes = p;
		changes_cap = b->n;
	}
	for (struct ftpad_module *m = ftpad_modules(); m && !err; m = m->next) {
		struct ftpad_site *end = ftpad_batch_end(m, b->bit);

		for (struct ftpad_site *s = ftpad_batch_first(m, b->bit); s && s < end && !err; s++)
			if (s->batch & b->bit)
				err = site_change(&seg, m, s, &changes[k++]);
	}
	return err ? err : write_changes(changes, k);
}

unsigned long *ftpad_arch_regs_argument_slot(struct ftpad_regs *regs, unsigned int n)
{
	if (n < 8)
		return &regs->pt.regs[n];
	/* The 9th integer argument is the first one on the stack. */
	return &((unsigned long *)regs->pt.sp)[n - 8];
}

void *ftpad_arch_regs_return_reg(struct ftpad_regs *regs, enum ftpad_return_reg r)
{
	switch (r) {
	case FTPAD_RET_INT0:
	case FTPAD_RET_INT1:
		return &regs->pt.regs[r - FTPAD_RET_INT0];
	case FTPAD_RET_VEC0:
	case FTPAD_RET_VEC1:
		return regs->vec[r - FTPAD_RET_VEC0];
	default:
		return NULL; /* no x87 here */
	}
}

unsigned long ftpad_arch_regs_stack_pointer(const struct ftpad_regs *regs)
{
	return regs->pt.sp;
}

void ftpad_arch_regs_set_ip(struct ftpad_regs *regs, unsigned long ip)
{
	/* The trampoline returns there with x30 = parent_ip and sp as at the
	 * entry: ip runs as if the caller had called it. */
	regs->pt.pc = ip;
}

/*
 * Called by the trampolines (trampoline_aarch64.S): ret is x30 after the
 * site's BL (site + 4), parent_ip the caller's return address from x9,
 * kind what the stub put in x16.
 */
void ftpad_trampoline_entry(unsigned long ret, unsigned long parent_ip,
			    struct ftpad_regs *regs, unsigned long kind)
{
	uintptr_t site = ret - 4;
	uintptr_t ip = site - 4 - (kind & KIND_BTI ? 4 : 0);

	ftpad_dispatch_site(ip, parent_ip, regs, site, kind & KIND_SLOT ? ip - 8 : 0);
}

/* Called by ftpad_trampoline_exit with its exit stub's site. */
void ftpad_trampoline_at_exit(unsigned long site, unsigned long parent_ip,
			      struct ftpad_regs *regs)
{
	ftpad_dispatch_exit(site, NULL, parent_ip, regs);
}

/* Nothing traps while aarch64 patches (arch.h). */
bool ftpad_arch_mask_may_trap(const sigset_t *set)
{
	(void)set;
	return false;
}

void ftpad_arch_mask_wait(void)
{
}

void ftpad_arch_fork_child(void)
{
}

bool ftpad_arch_record_slot_open(const void *ucontext)
{
	(void)ucontext;
	return false;
}

/*
 * Live patching (livepatch.c): each pad's site word, NOP to `b target` or
 * back, in one aligned 4-byte store (B and NOP may change while other
 * threads run them), then every thread synchronized.  The MOV before it
 * stays: x9 is a scratch register at entry, which the new function may
 * use as it likes; a kernel layout pad not yet prepared keeps its two
 * NOPs, and the B is the second.
 */
int ftpad_arch_sites_jump(const struct ftpad_site_jump *jumps, size_t n)
{
	struct ftpad_seg_cache seg = { 0 };
	struct change *ch = ftpad_alloc(n * sizeof(*ch) + 1);
	int err = 0;

	if (!ch)
		return -ENOMEM;
	for (size_t i = 0; i < n && !err; i++) {
		uintptr_t addr = ftpad_site_addr(jumps[i].site);
		struct ftpad_poke where;

		err = ftpad_arch_jump_insn(jumps[i].site, jumps[i].target, ch[i].insn);
		ftpad_poke_place(&where, &seg, jumps[i].mod, addr);
		ch[i].site = addr;
		ch[i].limit = where.limit;
		ch[i].prot = where.prot;
		ch[i].pre_len = 0;
	}
	if (!err)
		err = write_synced(ch, n, PART_SITE);
	ftpad_free(ch);
	return err;
}
