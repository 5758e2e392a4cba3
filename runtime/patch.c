/* SPDX-License-Identifier: MIT */
/*
 * patch.c - bringing every site in line with the registered ops, in one
 * pass over all sites per change (docs/runtime.md "The patch protocol").
 *
 * An enabled site calls a stub; its ops slot (when it has one) holds a
 * pointer to its struct ftpad_site, whose ->ops is what it dispatches to.
 * So a site's slot is written only when the site goes from its NOPs to a
 * call, and changing what an enabled site dispatches to is one atomic
 * store to ->ops, never a code write.  One change runs:
 *
 *   0. one walk over every site (plan()) decides what happens to each:
 *      its batch, its state once written (->patching says until when it
 *      is not), and its new ->ops, stored right away (so before a site
 *      starts calling, and NULL before a site goes off), except for sites
 *      that move to the full register save (step 2);
 *   1. the "up" batch: each site that starts calling gets its slot (a
 *      pointer to its struct ftpad_site) and any one-time arch write
 *      (aarch64's MOV) first, then the NOP becomes a call; sites whose ops
 *      now want the full register save move to the stub of that save;
 *   2. ->ops of the sites that moved to the full save;
 *   3. the "down" batch: sites no ops wants go back to their NOP, sites no
 *      longer wanting the full save go back to the plain stub;
 *   4. a grace period, then the slots of the sites turned off get their
 *      NOPs back, so that a disabled pad is byte for byte what the
 *      compiler emitted.  The arch may do this within step 3 (x86_64, in
 *      its tail step), else it is one more batch.
 *
 * Steps 1 and 3 order the stub against ->ops so that an ops asking for the
 * full save is never reached through the plain trampoline (but see
 * ops.c's assist for the threads that were already on their way).  A
 * batch is written by the arch from the sites themselves
 * (ftpad_arch_batch_write()): nothing else walks every site.  This file
 * plans and writes, nothing more: what the ops want comes from ops.c (the
 * registered list, filter.c's matching), the modules, their stub pages and
 * the hold on them from module.c, and what is unpublished is freed by
 * grace.c after a grace period.
 *
 * Slots are written by copies.  A /proc/self/mem write is the kernel's
 * memcpy, which on x86 CPUs with fast short `rep movsb` stores byte by
 * byte: a thread reading a slot meanwhile could see half of one value and
 * half of another.  So a slot is never written while a thread may read it
 * (except rewritten with the bytes it holds): the trampoline reads a slot
 * only after it saw, inside ftpad_enter(), that the site is a call
 * (ftpad_arch_site_calls()), and takes the site by address otherwise.  A
 * slot is written in step 1 only while its site is not a call, and in
 * step 4 only after the grace period that follows turning the site off,
 * when nobody who saw the call is still dispatching.
 *
 * Memory that a dispatching thread may still hold (replaced entries arrays,
 * an unregistered ops, unloaded modules) is given back only after a grace
 * period (grace.c, ftpad_retire()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "internal.h"

/* Scratch memory, kept from one update to the next. */
struct scratch {
	void *p;
	size_t size;
};

static void *scratch_for(struct scratch *sc, size_t n, size_t size)
{
	if (n * size > sc->size) {
		void *p = ftpad_realloc(sc->p, n * size);

		if (!p)
			return NULL;
		sc->p = p;
		sc->size = n * size;
	}
	return sc->p;
}

static struct scratch ops_scratch, poke_scratch;

/* One registered ops while its entries are rebuilt. */
struct ops_plan {
	struct ftpad_ops *ops;
	struct ftpad_entries *e;
	bool all, regs;
};

/*
 * What an update does to a site, from its state, whether it was left half
 * written, and what it should be (decide()).
 */
struct decision {
	uint8_t state;     /* its state once written */
	uint8_t batch;     /* FTPAD_B_*; FTPAD_B_STORE: store ->ops late, if it changes */
	int8_t patching;   /* for the batch */
	uint8_t target_regs;
};

/* What one update does, as plan() found it. */
struct plan {
	struct ftpad_ops *registered; /* the registered ops, linked by ->internal.next */
	struct ftpad_ops *several;    /* what a site traced by more than one calls */
	struct ops_plan *op;
	size_t nops;
	bool uniform;             /* every site wants the same: */
	struct ftpad_ops *want;   /* ... this ops (or none), */
	uint8_t regs;             /* ... with this FTPAD_S_WANT_REGS, */
	struct decision table[2][256]; /* ... so decide() by [half][state] */
	struct ftpad_ops *want_exit;   /* ... and every exit site this (want, if it has */
	struct decision exit_table[2][256]; /* an exit callback), decided so */
	struct ftpad_batch up, down;
	size_t nstore;            /* sites with FTPAD_B_STORE */
};

static int cmp_ip(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

static void free_entries(struct ftpad_retired *r)
{
	ftpad_free(r);
}

static bool sorted(const uintptr_t *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (v[i - 1] > v[i])
			return false;
	return true;
}

/* Publish the ops' new entries, unless they are the old ones. */
static void publish_entries(struct ops_plan *op)
{
	struct ftpad_entries *old = op->ops->internal.entries, *e = op->e;

	/* Sites are sorted within a module; modules need not be. */
	if (!sorted(e->ip, e->n))
		ftpad_sort(e->ip, e->n, sizeof(e->ip[0]), cmp_ip);
	if (old && old->all == e->all && old->n == e->n &&
	    !memcmp(old->ip, e->ip, e->n * sizeof(e->ip[0]))) {
		ftpad_free(e);
		return;
	}
	__atomic_store_n(&op->ops->internal.entries, e, __ATOMIC_RELEASE);
	if (old)
		ftpad_retire(&old->retired, free_entries);
}

/* What the registered ops want at exit site s: those with an exit
 * callback that trace its function.  Exits have one trampoline. */
static struct ftpad_ops *wanted_exit(struct plan *pl, const struct ftpad_site *s)
{
	struct ftpad_ops *want = NULL;

	for (size_t k = 0; k < pl->nops; k++) {
		struct ops_plan *op = &pl->op[k];

		if (op->ops->exit_func && (op->all || ftpad_ops_match(op->ops, s->name)))
			want = want ? pl->several : op->ops;
	}
	return want;
}

/* What the registered ops want at site s: ->want, and FTPAD_S_WANT_REGS
 * in *regs; the ops that list it get its entry. */
static inline struct ftpad_ops *wanted(struct plan *pl, const struct ftpad_site *s, uint8_t *regs)
{
	struct ftpad_ops *want = NULL;

	if (ftpad_site_is_exit(s)) {
		*regs = 0;
		return pl->uniform ? pl->want_exit : wanted_exit(pl, s);
	}
	if (pl->uniform) {
		*regs = pl->regs;
		return pl->want;
	}
	*regs = 0;
	for (size_t k = 0; k < pl->nops; k++) {
		struct ops_plan *op = &pl->op[k];

		if (!op->all && !ftpad_ops_match(op->ops, s->name))
			continue;
		want = want ? pl->several : op->ops;
		*regs |= op->regs ? FTPAD_S_WANT_REGS : 0;
		if (!op->all)
			op->e->ip[op->e->n++] = s->entry;
	}
	return want;
}

/* Add s to the batch with bit in its module m. */
static void batch_add(struct ftpad_batch *b, struct ftpad_module *m, struct ftpad_site *s)
{
	int k = b->bit == FTPAD_B_DOWN;

	b->n++;
	if (!m->batch_first[k])
		m->batch_first[k] = s;
	m->batch_end[k] = s + 1;
}

/* The state bits that say what a site is: none (its NOP), a call, a call
 * to the full save's stub. */
#define S_TARGET (FTPAD_S_ENABLED | FTPAD_S_REGS)

/*
 * What the update does to a site in state that should become t (S_TARGET
 * bits; regs its FTPAD_S_WANT_REGS), left half written or not (half: a
 * failed batch, a fork in the middle of one; it keeps ->patching set and
 * is written again, slot included).  Its state becomes what it is written
 * to at once (->patching says until when it is not).
 */
static struct decision decide(uint8_t state, bool half, uint8_t t, uint8_t regs)
{
	uint8_t c = state & S_TARGET;
	bool slot = state & FTPAD_S_SLOT, slotted = state & FTPAD_S_SLOTTED;
	struct decision d = { .state = (state & ~FTPAD_S_WANT_REGS) | regs };

	if (t == c && !half)
		return d;
	if (t) {
		/* A call needs &site in its slot (written again if the site was
		 * left half written).  Sites that start calling, or move to the
		 * full save, go up; one that already called gets the ops that
		 * asks for the full save only afterwards. */
		d.batch = !c || (t & FTPAD_S_REGS) ? FTPAD_B_UP | (c ? FTPAD_B_STORE : 0)
						   : FTPAD_B_DOWN;
		d.batch |= slot && (!slotted || half) ? FTPAD_B_SLOT : 0;
		d.state |= slot ? FTPAD_S_SLOTTED : 0;
	} else {
		d.batch = FTPAD_B_DOWN | (slot && (slotted || half) ? FTPAD_B_SLOT : 0);
	}
	d.state = (d.state & ~S_TARGET) | t;
	d.patching = t ? 1 : -1;
	d.target_regs = !!(t & FTPAD_S_REGS);
	return d;
}

/*
 * ->want of site s (of module m), and what the update does to it
 * (decide()), with its new ops stored now, unless FTPAD_B_STORE says
 * after the up batch.  Fields are written only when they change, so that
 * an update that changes few sites dirties few cache lines.  0, or the
 * error of mapping the module's stubs.
 */
static inline int plan_site(struct plan *pl, struct ftpad_module *m, struct ftpad_site *s)
{
	struct ftpad_ops *ops = __atomic_load_n(&s->ops, __ATOMIC_RELAXED), *want;
	bool half = __atomic_load_n(&s->patching, __ATOMIC_RELAXED) != 0;
	struct decision d;
	uint8_t regs;

	/* A live patch's pad (livepatch.c refuses a traced one). */
	if (__builtin_expect(s->state & FTPAD_S_JUMP, 0)) {
		s->want = NULL;
		return 0;
	}
	want = wanted(pl, s, &regs);
	d = decide(s->state, half, want ? FTPAD_S_ENABLED | (regs ? FTPAD_S_REGS : 0) : 0, regs);
	if (s->want != want)
		s->want = want;
	if (d.batch) {
		int err = !(d.batch & FTPAD_B_UP) || m->stubs ? 0 : ftpad_module_stubs(m);

		if (err)
			return err;
		batch_add(d.batch & FTPAD_B_UP ? &pl->up : &pl->down, m, s);
		pl->down.slots += (d.batch & FTPAD_B_SLOT) && d.patching < 0;
		__atomic_store_n(&s->target_regs, d.target_regs, __ATOMIC_RELAXED);
		__atomic_store_n(&s->patching, d.patching, __ATOMIC_RELEASE);
	}
	if (s->state != d.state)
		s->state = d.state;
	if (ops != want && (d.batch & FTPAD_B_STORE)) {
		pl->nstore++;
	} else {
		d.batch &= ~FTPAD_B_STORE;
		if (ops != want) {
			if (ops)
				ftpad_note_unpublished();
			__atomic_store_n(&s->ops, want, __ATOMIC_RELEASE);
		}
	}
	if (s->batch != d.batch)
		s->batch = d.batch;
	return 0;
}

static size_t count_sites(void)
{
	size_t n = 0;

	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next)
		n += m->nsites;
	return n;
}

/* The registered ops, with their new entries to fill. */
static int plan_ops(struct plan *pl, size_t total)
{
	size_t nops = 0;

	for (struct ftpad_ops *ops = pl->registered; ops; ops = ops->internal.next)
		nops++;
	pl->op = scratch_for(&ops_scratch, nops ? nops : 1, sizeof(*pl->op));
	if (!pl->op)
		return -ENOMEM;
	for (struct ftpad_ops *ops = pl->registered; ops; ops = ops->internal.next) {
		struct ops_plan *op = &pl->op[pl->nops];

		*op = (struct ops_plan){ .ops = ops, .all = ftpad_ops_all(ops),
					 .regs = ops->flags & FTPAD_OPS_FL_SAVE_REGS };
		op->e = ftpad_alloc(sizeof(*op->e) +
				    (op->all || !total ? 1 : total) * sizeof(op->e->ip[0]));
		if (!op->e) {
			while (pl->nops)
				ftpad_free(pl->op[--pl->nops].e);
			return -ENOMEM;
		}
		op->e->all = op->all;
		pl->nops++;
	}
	/* No ops, or one that traces everything: every site wants the same. */
	pl->uniform = !nops || (nops == 1 && pl->op[0].all);
	pl->want = nops ? pl->op[0].ops : NULL;
	pl->regs = nops && pl->op[0].regs ? FTPAD_S_WANT_REGS : 0;
	pl->want_exit = pl->want && pl->want->exit_func ? pl->want : NULL;
	for (int state = 0; pl->uniform && state < 256; state++) {
		uint8_t t = pl->want ? FTPAD_S_ENABLED | (pl->regs ? FTPAD_S_REGS : 0) : 0;
		uint8_t t_exit = pl->want_exit ? FTPAD_S_ENABLED : 0;

		pl->table[0][state] = decide(state, false, t, pl->regs);
		pl->table[1][state] = decide(state, true, t, pl->regs);
		pl->exit_table[0][state] = decide(state, false, t_exit, 0);
		pl->exit_table[1][state] = decide(state, true, t_exit, 0);
	}
	return 0;
}

/*
 * One walk over every site: each registered ops' entries, each site's
 * ->want, and the plan of the update (plan_site()).
 */
/*
 * plan_site() for every site of module m when every site wants the same
 * (pl->uniform): the same decisions, in a loop that keeps its counts in
 * local variables (this walk is most of the cost of enabling or disabling
 * every site).  The stubs are mapped after the walk, before anything is
 * written.
 */
static int plan_uniform(struct plan *pl, struct ftpad_module *m)
{
	struct ftpad_site *s = m->sites, *const stop = m->sites + m->nsites;
	struct ftpad_site *up = NULL, *up_end = NULL, *down = NULL, *down_end = NULL;
	size_t nup = 0, ndown = 0, slots = 0, nstore = 0;
	bool unpublished = false;

	for (; s < stop; s++) {
		struct ftpad_ops *ops = __atomic_load_n(&s->ops, __ATOMIC_RELAXED);
		int8_t patching = __atomic_load_n(&s->patching, __ATOMIC_RELAXED);
		bool exit = ftpad_site_is_exit(s);
		struct ftpad_ops *want = exit ? pl->want_exit : pl->want;
		struct decision d = (exit ? pl->exit_table : pl->table)[patching != 0][s->state];

		if (__builtin_expect(s->state & FTPAD_S_JUMP, 0)) {
			s->want = NULL; /* a live patch's pad */
			continue;
		}

		if (s->want != want)
			s->want = want;
		if (d.batch & FTPAD_B_UP) {
			up = up ? up : s;
			up_end = s + 1;
			nup++;
		} else if (d.batch) {
			down = down ? down : s;
			down_end = s + 1;
			ndown++;
			slots += (d.batch & FTPAD_B_SLOT) && d.patching < 0;
		}
		if (d.batch) {
			__atomic_store_n(&s->target_regs, d.target_regs, __ATOMIC_RELAXED);
			__atomic_store_n(&s->patching, d.patching, __ATOMIC_RELEASE);
		}
		if (s->state != d.state)
			s->state = d.state;
		if (ops != want && (d.batch & FTPAD_B_STORE)) {
			nstore++;
		} else {
			d.batch &= ~FTPAD_B_STORE;
			if (ops != want) {
				unpublished |= ops != NULL;
				__atomic_store_n(&s->ops, want, __ATOMIC_RELEASE);
			}
		}
		if (s->batch != d.batch)
			s->batch = d.batch;
	}
	if (unpublished)
		ftpad_note_unpublished();
	m->batch_first[0] = up, m->batch_end[0] = up_end;
	m->batch_first[1] = down, m->batch_end[1] = down_end;
	pl->up.n += nup;
	pl->down.n += ndown;
	pl->down.slots += slots;
	pl->nstore += nstore;
	return nup && !m->stubs ? ftpad_module_stubs(m) : 0;
}

static int plan(struct plan *pl)
{
	struct ftpad_ops *registered = pl->registered, *several = pl->several;
	int err;

	*pl = (struct plan){ .registered = registered, .several = several,
			     .up.bit = FTPAD_B_UP, .down.bit = FTPAD_B_DOWN };
	err = plan_ops(pl, count_sites());
	for (struct ftpad_module *m = ftpad_modules(); m && !err; m = m->next) {
		m->batch_first[0] = m->batch_first[1] = m->batch_end[0] = m->batch_end[1] = NULL;
		if (pl->uniform) {
			err = plan_uniform(pl, m);
			continue;
		}
		for (size_t i = 0; i < m->nsites && !err; i++)
			err = plan_site(pl, m, &m->sites[i]);
	}
	for (size_t k = 0; k < pl->nops; k++) {
		if (err)
			ftpad_free(pl->op[k].e);
		else
			publish_entries(&pl->op[k]);
	}
	return err;
}

/*
 * Site s of batch b was written (ok), or may be left half written: then
 * ->patching stays set.  Its state already says what it was written to
 * (decide()); what is known only now: the one-time prep is in place, the
 * slot went back to its NOPs.  Returns whether the site was turned off
 * and keeps its pointer in its slot.
 */
static inline bool site_done(const struct ftpad_batch *b, struct ftpad_site *s, bool ok)
{
	uint8_t state = s->state, clear = b->slots_cleared ? FTPAD_B_SLOT : 0;

	if (ok && s->patching > 0)
		state |= state & FTPAD_S_PREP ? FTPAD_S_PREPARED : 0;
	else if (ok && (s->batch & clear))
		state &= ~FTPAD_S_SLOTTED;
	if (s->state != state)
		s->state = state;
	s->batch &= ~b->bit;
	if (ok)
		__atomic_store_n(&s->patching, 0, __ATOMIC_RELEASE);
	return (state & (FTPAD_S_ENABLED | FTPAD_S_SLOTTED)) == FTPAD_S_SLOTTED;
}

void ftpad_batch_written(struct ftpad_batch *b, struct ftpad_site *s, struct ftpad_site *end)
{
	const uint8_t bit = b->bit;
	size_t done = 0, to_clear = 0;

	for (; s < end; s++) {
		if (s->batch & bit) {
			to_clear += site_done(b, s, true);
			done++;
		}
	}
	b->done += done;
	b->slots_to_clear += to_clear;
}

/* One batch of site writes (steps 1 and 3). */
static int write_batch(struct ftpad_batch *b)
{
	int err;

	if (!b->n)
		return 0;
	err = ftpad_arch_batch_write(b);
	/* The sites the arch did not report: after a failure, some may be
	 * half written; they keep ->patching, so that a trap there still runs
	 * the new instruction and the next update writes them again. */
	for (struct ftpad_module *m = ftpad_modules(); m && b->done < b->n; m = m->next) {
		struct ftpad_site *end = ftpad_batch_end(m, b->bit);

		for (struct ftpad_site *s = ftpad_batch_first(m, b->bit); s && s < end; s++)
			if (s->batch & b->bit)
				b->slots_to_clear += site_done(b, s, !err);
	}
	return err;
}

/* Step 2: the ops of the sites that moved to the full save. */
static void store_late_ops(void)
{
	ftpad_for_each_site(m, s) {
		if (!(s->batch & FTPAD_B_STORE))
			continue;
		s->batch &= ~FTPAD_B_STORE;
		if (__atomic_load_n(&s->ops, __ATOMIC_RELAXED))
			ftpad_note_unpublished();
		__atomic_store_n(&s->ops, s->want, __ATOMIC_RELEASE);
	}
}

/* A site turned off whose slot still holds its pointer: the slot gets
 * its NOPs back in step 4. */
static bool off_but_slotted(const struct ftpad_site *s)
{
	return !(s->state & FTPAD_S_ENABLED) && (s->state & FTPAD_S_SLOTTED);
}

/* Step 4, inside ftpad_modules_hold(): the *n (at most) slots of sites
 * turned off that keep their pointer get their NOPs back.  A module
 * unloaded since step 3 is no longer listed, and one loaded again at its
 * address is a new module (module.c), so neither is written. */
static int clear_slots_held(void *arg)
{
	size_t n = *(size_t *)arg, k = 0;
	struct ftpad_poke *p = scratch_for(&poke_scratch, n, sizeof(*p));
	struct ftpad_seg_cache seg = { 0 };
	int err;

	if (!p)
		return -ENOMEM;
	ftpad_for_each_site(m, s) {
		if (!off_but_slotted(s) || k == n)
			continue;
		ftpad_poke_place(&p[k], &seg, m, ftpad_site_slot(s));
		p[k].len = 8;
		memcpy(p[k].bytes, &ftpad_arch_slot_empty, 8);
		k++;
	}
	err = ftpad_text_poke(p, k, true);
	if (err)
		return err;
	ftpad_for_each_site(m, s)
		if (off_but_slotted(s))
			s->state &= ~FTPAD_S_SLOTTED;
	return 0;
}

static int clear_slots(size_t n)
{
	/* No thread that saw one of these sites call is still dispatching;
	 * later ones find the NOP and never read the slot.  Waited for
	 * outside the hold: a callback may be waiting to dlclose. */
	if (!ftpad_grace_unpublished())
		return -ETIMEDOUT;
	return ftpad_modules_hold(clear_slots_held, &n);
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

		s->state &= ~FTPAD_S_SLOTTED;
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

/* Steps 0 to 3, inside ftpad_modules_hold(): every module there is, and
 * only those, is planned and written. */
static int update_held(void *arg)
{
	struct plan *pl = arg;
	int err;

	ftpad_modules_take_added();
	err = plan(pl);
	if (!err)
		err = write_batch(&pl->up);
	if (!err && pl->nstore)
		store_late_ops();
	if (!err)
		err = write_batch(&pl->down);
	return err;
}

int ftpad_update_sites(struct ftpad_ops *registered, struct ftpad_ops *several)
{
	struct plan pl = { .registered = registered, .several = several };
	int err;

	err = ftpad_modules_hold(update_held, &pl);
	if (!err && pl.down.slots_to_clear)
		err = clear_slots(pl.down.slots_to_clear);
	return err;
}
