/* SPDX-License-Identifier: MIT */
/*
 * patch.c - bringing every site in line with the registered ops, in one
 * pass over all sites per change (DESIGN.md "Patching at run time"):
 *
 *   1. store the ops (or the list ops) in the slots of sites that gain or
 *      change their target: data only, the sites do not call yet;
 *      enabled sites that change their target are first made to call a
 *      stub that ignores the slot (see "Slots are written by copies" below);
 *   2. map the trampoline stubs of modules that need them, then turn NOPs
 *      into calls and calls of sites no ops wants back into NOPs, safely
 *      while other threads run them (ftpad_arch_sites_write(): the int3
 *      protocol on x86_64);
 *   3. put the 8-byte NOP back into the slots of sites now disabled, so a
 *      disabled pad is byte for byte what the compiler emitted.
 *
 * Each step is one batch of text writes.  The steps are ordered so that an
 * enabled site always finds a valid ops.  Step 3 waits for a grace period
 * first, so the slot of a disabled site has no reader at all: steps 1 and
 * 3 may write such slots together with their neighbours (one write per
 * page, not per site), and only the slots of enabled sites that change
 * their ops need a store of their own.
 *
 * Memory that a dispatching thread may still hold (replaced entries arrays,
 * an unregistered ops) is given back only after a grace period (grace.c).
 *
 * Slots are written by copies.  A /proc/self/mem write is the kernel's
 * memcpy, which on x86 CPUs with fast short `rep movsb` stores byte by
 * byte: a thread reading a slot meanwhile can see half of the old pointer
 * and half of the new one (the stress test caught exactly that).  So no
 * slot is ever written while a thread may read it: the arch entry reads a
 * slot only after it saw, inside ftpad_enter(), that the site calls a stub
 * that reads the slot, and takes site->ops (a plain atomic pointer) in
 * every other case.  An enabled site whose target changes is switched to
 * its slot-ignoring stub, a grace period lets every thread that saw the
 * old call leave, and only then is its slot written and the call put back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch.h"
#include "internal.h"

/*
 * Arrays replaced while another thread may still search them, freed by
 * ftpad_reclaim() after a grace period (grace.c).  They are rebuilt only
 * when an ops' set of functions really changes.
 */
static struct ftpad_entries *retired;

void ftpad_reclaim(bool force)
{
	struct ftpad_entries *e = retired;

	if (!force && !e && !ftpad_modules_unloaded())
		return;
	ftpad_grace_wait();
	ftpad_modules_free_unloaded();
	retired = NULL;
	while (e) {
		struct ftpad_entries *next = e->retired;

		free(e);
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
	}
}

/* Build ops' entries and mark the sites it wants in ->want. */
static int plan_ops(struct ftpad_ops *ops, size_t total)
{
	struct ftpad_entries *e = malloc(sizeof(*e) + (total ? total : 1) * sizeof(e->ip[0]));
	struct ftpad_entries *old = ops->internal.entries;

	if (!e)
		return -ENOMEM;
	e->n = 0;
	e->retired = NULL;
	ftpad_for_each_site(m, s) {
		if (!ftpad_ops_match(ops, s->name))
			continue;
		s->want = s->want ? &ftpad_list_ops : ops;
		e->ip[e->n++] = s->entry;
	}
	qsort(e->ip, e->n, sizeof(e->ip[0]), cmp_ip);
	if (old && old->n == e->n && !memcmp(old->ip, e->ip, e->n * sizeof(e->ip[0]))) {
		free(e);
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
	ftpad_for_each_site(m, s)
		s->want = NULL;
	for (struct ftpad_ops *ops = ftpad_registered(); ops; ops = ops->internal.next) {
		int err = plan_ops(ops, total);

		if (err)
			return err;
	}
	return 0;
}

static void add_poke(struct ftpad_poke *p, const struct ftpad_module *mod, uintptr_t addr,
		     const void *bytes, size_t len, bool mergeable)
{
	p->addr = addr;
	p->prot = ftpad_module_prot(mod, addr);
	p->len = len;
	memcpy(p->bytes, bytes, len);
	p->mergeable = mergeable;
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
		pokes[i].prot = PROT_READ | PROT_EXEC;
		pokes[i].len = 8;
		memcpy(pokes[i].bytes, buf + 8 * i, 8);
		pokes[i].mergeable = true; /* nothing runs there yet */
	}
	err = ftpad_text_poke(pokes, len / 8);
	if (err) {
		munmap((void *)page, size);
		return err;
	}
	mod->stubs = page;
	return 0;
}

/*
 * Step 1a: enabled sites whose slot must change call their slot-ignoring
 * stub from now on, so that they read ->ops; then wait until no thread
 * that saw them call the slot-reading stub is still dispatching.
 */
static int detach_slots(struct ftpad_poke *pokes)
{
	size_t n = 0;
	int err;

	ftpad_for_each_site(m, s) {
		uint8_t insn[8];

		if (!s->moving)
			continue;
		err = ftpad_arch_site_call(s, m->stubs, false, insn);
		if (err)
			return err;
		add_poke(&pokes[n++], m, s->addr, insn, ftpad_arch_site_len, false);
		__atomic_store_n(&s->patching, 1, __ATOMIC_RELEASE);
	}
	if (!n)
		return 0;
	err = ftpad_arch_sites_write(pokes, n);
	ftpad_for_each_site(m, s)
		if (s->moving && !err)
			__atomic_store_n(&s->patching, 0, __ATOMIC_RELEASE);
	if (!err)
		ftpad_grace_wait();
	return err;
}

/* Step 1: slots (and ->ops) of sites gaining or changing their target. */
static int store_targets(struct ftpad_poke *pokes)
{
	size_t n = 0;
	int err;

	/* ->ops first: every reader that does not read the slot reads it. */
	ftpad_for_each_site(m, s) {
		s->moving = s->want && s->want != s->ops && s->slot && s->enabled;
		if (s->want)
			__atomic_store_n(&s->ops, s->want, __ATOMIC_RELEASE);
	}
	err = detach_slots(pokes);
	if (err)
		return err;
	/* No thread reads these slots now: neighbours may share one write. */
	ftpad_for_each_site(m, s) {
		uint64_t v = (uintptr_t)s->want;

		if (s->want && s->slot && *(const uint64_t *)s->slot != v)
			add_poke(&pokes[n++], m, s->slot, &v, 8, true);
	}
	return ftpad_text_poke(pokes, n);
}

/* Step 2: the site instructions themselves. */
static int switch_sites(struct ftpad_poke *pokes)
{
	size_t n = 0;
	int err;

	ftpad_for_each_site(m, s) {
		uint8_t insn[8];

		if (!!s->want == s->enabled && !s->moving)
			continue;
		if (s->want) {
			err = ensure_stubs(m);
			if (!err)
				err = ftpad_arch_site_call(s, m->stubs, true, insn);
			if (err)
				return err;
		} else {
			ftpad_arch_site_nop(insn);
		}
		/* Merging is the arch's call (ftpad_arch_sites_write()). */
		add_poke(&pokes[n++], m, s->addr, insn, ftpad_arch_site_len, false);
		__atomic_store_n(&s->patching, s->want ? 1 : -1, __ATOMIC_RELEASE);
	}
	err = ftpad_arch_sites_write(pokes, n);
	/*
	 * After a failure some sites may be left half written; they keep
	 * ->patching so that a trap there still runs the new instruction, and
	 * count as switched, so that the next update writes them again.
	 */
	ftpad_for_each_site(m, s) {
		if (!!s->want == s->enabled && !s->moving)
			continue;
		if (!err)
			__atomic_store_n(&s->patching, 0, __ATOMIC_RELEASE);
		s->enabled = s->want;
		s->moving = false;
	}
	return err;
}

/* Step 3: empty the slots of sites no longer enabled.  Their calls are
 * gone, so only threads that saw them before can still read the slots. */
static int clear_targets(struct ftpad_poke *pokes)
{
	size_t n = 0;
	int err;

	ftpad_for_each_site(m, s)
		if (!s->want && s->ops && s->slot)
			add_poke(&pokes[n++], m, s->slot, &ftpad_arch_slot_empty, 8, true);
	/*
	 * Wait until no thread that entered one of these sites before it was
	 * switched off can still be about to read its slot: then nobody reads
	 * these slots any more, until they are enabled again after step 1.
	 */
	if (n)
		ftpad_grace_wait();
	err = ftpad_text_poke(pokes, n);
	if (err)
		return err;
	ftpad_for_each_site(m, s)
		if (!s->want)
			__atomic_store_n(&s->ops, NULL, __ATOMIC_RELEASE);
	return 0;
}

struct ftpad_ops *ftpad_site_ops(uintptr_t addr, uintptr_t slot)
{
	struct ftpad_site *s;

	if (slot) {
		uint64_t v = __atomic_load_n((const uint64_t *)slot, __ATOMIC_ACQUIRE);

		return v != ftpad_arch_slot_empty ? (struct ftpad_ops *)(uintptr_t)v : NULL;
	}
	s = ftpad_site_by_addr(addr);
	return s ? __atomic_load_n(&s->ops, __ATOMIC_ACQUIRE) : NULL;
}

int ftpad_update_sites(void)
{
	size_t total = count_sites();
	struct ftpad_poke *pokes = malloc((total ? total : 1) * sizeof(*pokes));
	int err;

	if (!pokes)
		return -ENOMEM;
	err = plan(total);
	if (!err)
		err = store_targets(pokes);
	if (!err)
		err = switch_sites(pokes);
	if (!err)
		err = clear_targets(pokes);
	free(pokes);
	return err;
}
