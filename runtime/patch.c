/* SPDX-License-Identifier: MIT */
/*
 * patch.c - bringing every site in line with the registered ops, in one
 * pass over all sites per change (DESIGN.md "Patching at run time").
 *
 * An enabled site calls a stub; its ops slot (when it has one) holds a
 * pointer to its struct ftpad_site, whose ->ops is what it dispatches to.
 * So a site's slot is written only when the site goes from its NOPs to a
 * call, and changing what an enabled site dispatches to is one atomic
 * store to ->ops, never a code write.  One change runs:
 *
 *   1. ->ops of the sites that start calling; then the "up" batch, one
 *      ftpad_arch_sites_write(): each such site's slot (a pointer to its
 *      struct ftpad_site) and any one-time arch write (aarch64's MOV) go
 *      in first, then the NOP becomes a call; sites whose ops now want the
 *      full register save move to the stub of that save;
 *   2. ->ops of every other site that changes (NULL for sites going off);
 *   3. the "down" batch: sites no ops wants go back to their NOP, sites no
 *      longer wanting the full save go back to the plain stub;
 *   4. a grace period, then the slots of the sites turned off get their
 *      NOPs back, so that a disabled pad is byte for byte what the
 *      compiler emitted.
 *
 * Steps 1 and 3 order the stub against ->ops so that an ops asking for the
 * full save is never reached through the plain trampoline (but see
 * ops.c's assist for the threads that were already on their way).
 *
 * Slots are written by copies.  A /proc/self/mem write is the kernel's
 * memcpy, which on x86 CPUs with fast short `rep movsb` stores byte by
 * byte: a thread reading a slot meanwhile could see half of one value and
 * half of another.  So a slot is never written while a thread may read it:
 * the trampoline reads a slot only after it saw, inside ftpad_enter(),
 * that the site is a call (ftpad_arch_site_calls()), and takes the site by
 * address otherwise.  A slot is written in step 1 only while its site is
 * not a call, and in step 4 only after the grace period that follows
 * turning the site off, when nobody who saw the call is still dispatching.
 *
 * Memory that a dispatching thread may still hold (replaced entries arrays,
 * an unregistered ops, unloaded modules) is given back only after a grace
 * period (grace.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>
#include <unistd.h>

#include "arch.h"
#include "internal.h"

/*
 * Arrays replaced while another thread may still search them, freed by
 * ftpad_reclaim() after a grace period.  They are rebuilt only when an
 * ops' set of functions really changes.
 */
static struct ftpad_entries *retired;
/* No pointer was unpublished since the last grace period ended. */
static bool clean = true;

void ftpad_note_unpublished(void)
{
	clean = false;
}

static void grace(void)
{
	ftpad_grace_wait();
	clean = true;
}

void ftpad_reclaim(bool force)
{
	struct ftpad_entries *e = retired;

	if (!force && !e && !ftpad_modules_unloaded())
		return;
	if (!clean)
		grace();
	ftpad_modules_free_unloaded();
	retired = NULL;
	while (e) {
		struct ftpad_entries *next = e->retired;

		ftpad_free(e);
		e = next;
	}
}

static int cmp_ip(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

static void retire(struct ftpad_entries *e)
{
	if (e) {
		e->retired = retired;
		retired = e;
		ftpad_note_unpublished();
	}
}

static bool sorted(const uintptr_t *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (v[i - 1] > v[i])
			return false;
	return true;
}

static void want(struct ftpad_site *s, struct ftpad_ops *ops)
{
	s->want = s->want ? &ftpad_list_ops : ops;
	if (ops->flags & FTPAD_OPS_FL_SAVE_REGS)
		s->state |= FTPAD_S_WANT_REGS;
}

/* Build ops' entries and mark the sites it wants in ->want. */
static int plan_ops(struct ftpad_ops *ops, size_t total)
{
	struct ftpad_entries *old = ops->internal.entries, *e;
	bool all = ftpad_ops_all(ops);

	e = ftpad_alloc(sizeof(*e) + (all || !total ? 1 : total) * sizeof(e->ip[0]));
	if (!e)
		return -ENOMEM;
	e->n = 0;
	e->all = all;
	e->retired = NULL;
	ftpad_for_each_site(m, s) {
		if (all) {
			want(s, ops);
		} else if (ftpad_ops_match(ops, s->name)) {
			want(s, ops);
			e->ip[e->n++] = s->entry;
		}
	}
	/* Sites are sorted within a module; modules need not be. */
	if (!sorted(e->ip, e->n))
		ftpad_sort(e->ip, e->n, sizeof(e->ip[0]), cmp_ip);
	if (old && old->all == e->all && old->n == e->n &&
	    !memcmp(old->ip, e->ip, e->n * sizeof(e->ip[0]))) {
		ftpad_free(e);
		return 0;
	}
	__atomic_store_n(&ops->internal.entries, e, __ATOMIC_RELEASE);
	retire(old);
	return 0;
}

static size_t count_sites(void)
{
	size_t n = 0;

	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next)
		n += m->nsites;
	return n;
}

static int plan(size_t total)
{
	ftpad_for_each_site(m, s) {
		s->want = NULL;
		s->state &= ~FTPAD_S_WANT_REGS;
	}
	for (struct ftpad_ops *ops = ftpad_registered(); ops; ops = ops->internal.next) {
		int err = plan_ops(ops, total);

		if (err)
			return err;
	}
	return 0;
}

/* What a site is, and what it should be. */
enum target { T_NOP, T_CALL, T_REGS };

static enum target target_of(const struct ftpad_site *s)
{
	return !s->want ? T_NOP : s->state & FTPAD_S_WANT_REGS ? T_REGS : T_CALL;
}

static enum target current_of(const struct ftpad_site *s)
{
	return !(s->state & FTPAD_S_ENABLED) ? T_NOP : s->state & FTPAD_S_REGS ? T_REGS : T_CALL;
}

/* A site left half written (a failed batch, a fork in the middle of one)
 * keeps ->patching set, and is written again. */
static bool needs_write(const struct ftpad_site *s)
{
	return target_of(s) != current_of(s) || __atomic_load_n(&s->patching, __ATOMIC_RELAXED);
}

/* Step 1's batch: sites that start calling, or move to the full save. */
static bool goes_up(const struct ftpad_site *s)
{
	enum target t = target_of(s), c = current_of(s);

	return needs_write(s) && t != T_NOP && (c == T_NOP || t == T_REGS);
}

/* Step 3's batch: every other write. */
static bool goes_down(const struct ftpad_site *s)
{
	return needs_write(s) && !goes_up(s);
}

/* A page for the stubs within reach of every byte of the module, or 0. */
static uintptr_t map_near(const struct ftpad_module *mod, size_t size)
{
	const uintptr_t step = 0x10000, floor = 0x100000;
	uintptr_t min = mod->hi > ftpad_arch_reach ? mod->hi - ftpad_arch_reach : floor;
	uintptr_t max = mod->lo + ftpad_arch_reach - size;
	uintptr_t down = mod->lo & ~(step - 1), up = (mod->hi + step - 1) & ~(step - 1);

	/* Below first: above an executable lies its brk heap. */
	for (int i = 0; i < 8192; i++) {
		uintptr_t try[2] = { down - (i + 1) * step, up + i * step };

		for (int j = 0; j < 2; j++) {
			void *p;

			if ((j == 0 && (down < (i + 1) * step + floor || try[0] < min)) ||
			    (j == 1 && try[1] > max))
				continue;
			p = mmap((void *)try[j], size, PROT_READ | PROT_EXEC,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p == (void *)try[j])
				return try[j];
			/* A kernel without MAP_FIXED_NOREPLACE took it as a hint. */
			if (p != MAP_FAILED)
				munmap(p, size);
		}
	}
	return 0;
}

/* Map and fill the module's stub page, written like any other code. */
static int ensure_stubs(struct ftpad_module *mod)
{
	size_t size = (size_t)sysconf(_SC_PAGESIZE), len = ftpad_arch_stubs_size;
	struct ftpad_poke pokes[len / 8];
	uint8_t buf[len];
	uintptr_t page;
	int err;

	if (mod->stubs)
		return 0;
	page = map_near(mod, size);
	if (!page) {
		ftpad_warn("%s: error: ftpad: no free page within branch range of %#lx-%#lx\n",
			   mod->path, (unsigned long)mod->lo, (unsigned long)mod->hi);
		return -ERANGE;
	}
	ftpad_arch_stubs_fill(buf, page);
	for (size_t i = 0; i < len / 8; i++) {
		pokes[i].addr = page + 8 * i;
		pokes[i].limit = page + size;
		pokes[i].prot = PROT_READ | PROT_EXEC;
		pokes[i].len = 8;
		memcpy(pokes[i].bytes, buf + 8 * i, 8);
	}
	/* Nothing runs there yet: one write. */
	err = ftpad_text_poke(pokes, len / 8, true);
	if (err) {
		munmap((void *)page, size);
		return err;
	}
	mod->stubs = page;
	return 0;
}

/* Where addr lies in mod: its segment's protection and end, looked up
 * once per segment while a batch walks the sites in order. */
struct seg_cache {
	const struct ftpad_module *mod;
	uintptr_t lo, hi;
	int prot;
};

static void poke_place(struct ftpad_poke *p, struct seg_cache *c, const struct ftpad_module *mod,
		       uintptr_t addr)
{
	if (c->mod != mod || addr < c->lo || addr >= c->hi) {
		c->mod = mod;
		c->lo = addr;
		c->hi = ftpad_module_limit(mod, addr);
		c->prot = ftpad_module_prot(mod, addr);
	}
	p->addr = addr;
	p->prot = c->prot;
	p->limit = c->hi;
}

/*
 * The change that takes site s to target t: its new instruction, and the
 * bytes to write before it (its slot, the arch's prep) up to the site, with
 * those between as they are now.  The module's stubs must be mapped.
 */
static int site_change(struct seg_cache *c, struct ftpad_module *mod, struct ftpad_site *s,
		       enum target t, struct ftpad_change *ch)
{
	uintptr_t addr = ftpad_site_addr(s), slot = ftpad_site_slot(s), lo = addr, prep = 0;
	uint8_t prep_insn[8];
	bool slot_write = false;
	struct ftpad_poke where;
	int err;

	if (t == T_NOP) {
		ftpad_arch_site_nop(ch->insn);
	} else {
		err = ftpad_arch_site_call(s, mod->stubs, t == T_REGS, ch->insn);
		if (err)
			return err;
		/* Rewriting a slot that already holds &s writes the same bytes. */
		slot_write = slot && !(s->state & FTPAD_S_SLOTTED);
		if ((s->state & FTPAD_S_PREP) && !(s->state & FTPAD_S_PREPARED))
			ftpad_arch_site_prep(s, &prep, prep_insn);
		lo = slot_write ? slot : prep ? prep : addr;
	}
	poke_place(&where, c, mod, lo);
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

/* Scratch memory for a batch, kept from one update to the next. */
static void *scratch;
static size_t scratch_size;

static void *scratch_for(size_t n, size_t size)
{
	if (n * size > scratch_size) {
		void *p = ftpad_realloc(scratch, n * size);

		if (!p)
			return NULL;
		scratch = p;
		scratch_size = n * size;
	}
	return scratch;
}

/* The state a site reaches with a write to t (whether it succeeded or
 * not: ->patching says the latter). */
static void site_switched(struct ftpad_site *s, enum target t, bool ok)
{
	s->state &= ~(FTPAD_S_ENABLED | FTPAD_S_REGS | FTPAD_S_BATCH);
	if (t != T_NOP)
		s->state |= FTPAD_S_ENABLED | (t == T_REGS ? FTPAD_S_REGS : 0);
	if (!ok)
		return;
	if (t != T_NOP) {
		s->state |= ftpad_site_slot(s) ? FTPAD_S_SLOTTED : 0;
		s->state |= s->state & FTPAD_S_PREP ? FTPAD_S_PREPARED : 0;
	}
	__atomic_store_n(&s->patching, 0, __ATOMIC_RELEASE);
}

/* One batch of site writes, the sites chosen by pick. */
static int switch_sites(bool (*pick)(const struct ftpad_site *))
{
	struct seg_cache seg = { 0 };
	struct ftpad_change *ch;
	size_t n = 0;
	int err = 0;

	ftpad_for_each_site(m, s) {
		if (!pick(s))
			continue;
		if (target_of(s) != T_NOP && (err = ensure_stubs(m)))
			return err;
		s->state |= FTPAD_S_BATCH;
		n++;
	}
	ch = scratch_for(n ? n : 1, sizeof(*ch));
	if (!ch)
		err = -ENOMEM;
	n = 0;
	ftpad_for_each_site(m, s) {
		enum target t;

		if (err || !(s->state & FTPAD_S_BATCH))
			continue;
		t = target_of(s);
		err = site_change(&seg, m, s, t, &ch[n]);
		if (err)
			break;
		n++;
		__atomic_store_n(&s->target_regs, t == T_REGS, __ATOMIC_RELAXED);
		__atomic_store_n(&s->patching, t == T_NOP ? -1 : 1, __ATOMIC_RELEASE);
	}
	if (!err && n)
		err = ftpad_arch_sites_write(ch, n);
	/*
	 * After a failure some sites may be left half written; they keep
	 * ->patching, so that a trap there still runs the new instruction
	 * and the next update writes them again.
	 */
	ftpad_for_each_site(m, s) {
		if (!(s->state & FTPAD_S_BATCH))
			continue;
		if (__atomic_load_n(&s->patching, __ATOMIC_RELAXED))
			site_switched(s, target_of(s), !err);
		else
			s->state &= ~FTPAD_S_BATCH;
	}
	return err;
}

/* Step 4: the slots of sites turned off get their NOPs back. */
static int clear_slots(void)
{
	struct seg_cache seg = { 0 };
	struct ftpad_poke *p;
	size_t n = 0;
	int err;

	ftpad_for_each_site(m, s)
		n += !(s->state & FTPAD_S_ENABLED) && (s->state & FTPAD_S_SLOTTED);
	if (!n)
		return 0;
	p = scratch_for(n, sizeof(*p));
	if (!p)
		return -ENOMEM;
	/* No thread that saw one of these sites call is still dispatching;
	 * later ones find the NOP and never read the slot. */
	grace();
	n = 0;
	ftpad_for_each_site(m, s) {
		if ((s->state & FTPAD_S_ENABLED) || !(s->state & FTPAD_S_SLOTTED))
			continue;
		poke_place(&p[n], &seg, m, ftpad_site_slot(s));
		p[n].len = 8;
		memcpy(p[n].bytes, &ftpad_arch_slot_empty, 8);
		n++;
	}
	err = ftpad_text_poke(p, n, true);
	if (err)
		return err;
	ftpad_for_each_site(m, s)
		if (!(s->state & FTPAD_S_ENABLED))
			s->state &= ~FTPAD_S_SLOTTED;
	return 0;
}

/* Store what each site should dispatch to, for the sites pick chooses. */
static void store_ops(bool (*pick)(const struct ftpad_site *))
{
	ftpad_for_each_site(m, s) {
		struct ftpad_ops *old = __atomic_load_n(&s->ops, __ATOMIC_RELAXED);

		if (old == s->want || !pick(s))
			continue;
		if (old)
			ftpad_note_unpublished();
		__atomic_store_n(&s->ops, s->want, __ATOMIC_RELEASE);
	}
}

/*
 * In the child of a fork made while another thread was changing sites
 * (ops.c): the state bits may not match the code.  Read them back from the
 * code: a site that calls is enabled and is rewritten at the next update
 * (->patching; the stub it calls is not worth decoding), the slot holds
 * this site or not.  A site being written when the fork came already has
 * ->patching set.  Only the calling thread runs in the child.
 */
void ftpad_sites_resync(void)
{
	ftpad_for_each_site(m, s) {
		uintptr_t slot = ftpad_site_slot(s);

		s->state &= ~(FTPAD_S_SLOTTED | FTPAD_S_BATCH);
		if (slot && *(const uintptr_t *)slot == (uintptr_t)s)
			s->state |= FTPAD_S_SLOTTED;
		if (ftpad_arch_site_calls(ftpad_site_addr(s))) {
			s->state |= FTPAD_S_ENABLED;
			s->patching = s->patching ? s->patching : 1;
		} else if (!s->patching) {
			s->state &= ~(FTPAD_S_ENABLED | FTPAD_S_REGS);
		}
	}
}

static bool starts_calling(const struct ftpad_site *s)
{
	return goes_up(s) && current_of(s) == T_NOP;
}

static bool any_site(const struct ftpad_site *s)
{
	(void)s;
	return true;
}

/* The functions whose kernel-ABI pad still needs its one-time write. */
static bool unprepared(const struct ftpad_site *s)
{
	return starts_calling(s) && (s->state & FTPAD_S_PREP) && !(s->state & FTPAD_S_PREPARED);
}

/*
 * How many threads the process runs: 1 when glibc knows it never started
 * one (__libc_single_threaded, which also holds under qemu-user, whose own
 * threads show in /proc), else what /proc/self/status counts.
 */
static int threads_running(void)
{
	char buf[4096];
	const char *line;
	ssize_t n = 0;
	int fd, threads = 0;

	if (__libc_single_threaded)
		return 1;
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = 0;
	line = strstr(buf, "\nThreads:");
	if (!line || sscanf(line + 9, "%d", &threads) != 1 || threads < 1)
		return 2; /* unknown: assume the worst */
	return threads;
}

/*
 * The one-time write of a kernel-ABI pad (aarch64's `mov x9, x30` into the
 * first of two NOPs) cannot be made safe while other threads may be
 * between the two instructions: refuse unless the process is
 * single-threaded.
 */
static int check_prep(void)
{
	const struct ftpad_site *first = NULL;
	const struct ftpad_module *mod = NULL;
	size_t n = 0;
	int threads;

	ftpad_for_each_site(m, s) {
		if (!unprepared(s))
			continue;
		if (!n++)
			first = s, mod = m;
	}
	if (!n)
		return 0;
	threads = threads_running();
	if (threads == 1)
		return 0;
	ftpad_warn("%s: error: ftpad: %s%s: a kernel-ABI pad (NOP NOP, no mov x9, x30 from the "
		   "compiler): its MOV can only be written while the process is single-threaded, "
		   "and %d threads run; %zu such function%s not patched (enable them once before "
		   "starting threads)\n",
		   mod->path, first->name ? first->name : "(unnamed)", n > 1 ? " and others" : "",
		   threads, n, n > 1 ? "s" : "");
	return -EAGAIN;
}

int ftpad_update_sites(void)
{
	size_t total = count_sites();
	int err;

	err = plan(total);
	if (!err)
		err = check_prep();
	if (err)
		return err;
	store_ops(starts_calling);
	err = switch_sites(goes_up);
	if (err)
		return err;
	store_ops(any_site);
	err = switch_sites(goes_down);
	if (!err)
		err = clear_slots();
	return err;
}
