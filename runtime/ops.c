/* SPDX-License-Identifier: MIT */
/*
 * ops.c - the ftrace_ops-style API: registering ops, their name filters,
 * and dispatching a call to the ops that trace it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "arch.h"
#include "internal.h"

unsigned long ftpad_traps;

#define KNOWN_FLAGS (FTPAD_OPS_FL_ENABLED | FTPAD_OPS_FL_IPMODIFY | FTPAD_OPS_FL_RECURSION | \
		     FTPAD_OPS_FL_SAVE_REGS)

/* Registered ops, in registration order; readers follow next lock-free. */
static struct ftpad_ops *registered;

static struct ftpad_ops *next_ops(const struct ftpad_ops *ops)
{
	return __atomic_load_n(&ops->internal.next, __ATOMIC_ACQUIRE);
}

static struct ftpad_ops *registered_ops(void)
{
	return __atomic_load_n(&registered, __ATOMIC_ACQUIRE);
}

/* Whether ops traces the function at ip: its sorted entries, searched. */
static bool ops_traces(const struct ftpad_ops *ops, uintptr_t ip)
{
	const struct ftpad_entries *e = __atomic_load_n((struct ftpad_entries **)&ops->internal.entries,
							__ATOMIC_ACQUIRE);
	size_t lo = 0, hi = e ? e->n : 0;

	if (e && e->all)
		return true;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (e->ip[mid] == ip)
			return true;
		if (e->ip[mid] < ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/*
 * The ops of functions traced by more than one ops: calls each in turn.
 * An ops that wants the full register save is skipped on a call that came
 * through the other trampoline: that happens only while the site is being
 * switched over for it (Linux's list func does the same).
 */
static void list_func(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *list,
		      struct ftpad_regs *regs)
{
	(void)list;
	for (struct ftpad_ops *ops = registered_ops(); ops; ops = next_ops(ops)) {
		if (!ops_traces(ops, ip))
			continue;
		regs->ops = ops;
		ops->internal.call(ip, parent_ip, ops, regs);
	}
}

/*
 * fn, one of ops' callbacks, behind the recursion guard when ops has
 * FTPAD_OPS_FL_RECURSION: not called while a guarded callback runs on this
 * thread.
 */
static void call_guarded(ftpad_func_t fn, struct ftpad_ops *ops, unsigned long ip,
			 unsigned long parent_ip, struct ftpad_regs *regs)
{
	struct ftpad_thread_slot *t = ftpad_slot;

	if (!(ops->flags & FTPAD_OPS_FL_RECURSION)) {
		fn(ip, parent_ip, ops, regs);
		return;
	}
	if (t->guard)
		return;
	/* Plain increments: a signal handler between load and store leaves
	 * the guard as it found it. */
	t->guard++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	fn(ip, parent_ip, ops, regs);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->guard--;
}

/* An exit callback, with the recursion guard of FTPAD_OPS_FL_RECURSION. */
static void call_exit(struct ftpad_ops *ops, unsigned long ip, unsigned long parent_ip,
		      struct ftpad_regs *regs)
{
	if (!ops->exit_func)
		return;
	regs->ops = ops;
	call_guarded(ops->exit_func, ops, ip, parent_ip, regs);
}

/* list_func() at an exit: every registered ops with an exit callback. */
static void list_exit(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *list,
		      struct ftpad_regs *regs)
{
	(void)list;
	for (struct ftpad_ops *ops = registered_ops(); ops; ops = next_ops(ops))
		if (ops->exit_func && ops_traces(ops, ip))
			call_exit(ops, ip, parent_ip, regs);
}

/* Dispatches to every registered ops that traces the function. */
static struct ftpad_ops list_ops = { .func = list_func, .exit_func = list_exit,
				     .internal.call = list_func };

/* What an entry site calls for an ops with an exit callback only: its
 * entry sites are enabled too (one plan for both), and call nothing. */
static void no_entry(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		     struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
}

/* Every site as the registered ops want it (patch.c). */
static int update_sites(void)
{
	return ftpad_update_sites(registered_ops(), &list_ops);
}

/*
 * What the trampoline calls for an ops with FTPAD_OPS_FL_RECURSION or
 * FTPAD_OPS_FL_SAVE_REGS (Linux's ftrace_ops_assist_func): the recursion
 * guard, and no call with a partial register save for an ops that wants
 * the full one (a thread that entered the old trampoline while the site
 * was being switched to the full save).
 */
static void assist(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		   struct ftpad_regs *regs)
{
	if ((ops->flags & FTPAD_OPS_FL_SAVE_REGS) && !regs->full)
		return;
	call_guarded(ops->func, ops, ip, parent_ip, regs);
}

void ftpad_dispatch_site(uintptr_t ip, uintptr_t parent_ip, struct ftpad_regs *regs,
			 uintptr_t site, uintptr_t slot)
{
	struct ftpad_thread_slot *t = ftpad_enter();
	struct ftpad_site *s;
	struct ftpad_ops *ops;
	int saved_errno;

	if (!t)
		return;
	/* The slot is read only while the site calls: see patch.c. */
	if (slot && ftpad_arch_site_calls(site))
		s = (struct ftpad_site *)__atomic_load_n((uintptr_t *)slot, __ATOMIC_RELAXED);
	else
		s = ftpad_site_by_addr(site);
	ops = s ? __atomic_load_n(&s->ops, __ATOMIC_ACQUIRE) : NULL;
	if (ops) {
		saved_errno = *t->errno_ptr;
		regs->ops = ops;
		ops->internal.call(ip, parent_ip, ops, regs);
		*t->errno_ptr = saved_errno;
	}
	ftpad_exit(t);
}

/*
 * The dispatch at an exit site (the exit trampolines): its struct
 * ftpad_site (known from the stub, or by address), whose ->ops is the ops
 * or list_ops; ip is the function's entry.  Exit sites have no slot of
 * their own.
 */
void ftpad_dispatch_exit(uintptr_t site, struct ftpad_site *known, uintptr_t parent_ip,
			 struct ftpad_regs *regs)
{
	struct ftpad_thread_slot *t = ftpad_enter();
	struct ftpad_site *s;
	struct ftpad_ops *ops;
	int saved_errno;

	if (!t)
		return;
	s = known ? known : ftpad_site_by_addr(site);
	ops = s ? __atomic_load_n(&s->ops, __ATOMIC_ACQUIRE) : NULL;
	if (ops) {
		struct ftpad_site *outer_site = t->exit_site; /* a callback's own traced calls nest */

		saved_errno = *t->errno_ptr;
		t->exit_site = s;
		if (ops == &list_ops)
			list_exit(s->entry, parent_ip, ops, regs);
		else
			call_exit(ops, s->entry, parent_ip, regs);
		t->exit_site = outer_site;
		*t->errno_ptr = saved_errno;
	}
	ftpad_exit(t);
}

/* Changing ops from a callback would wait for that very callback to end. */
static bool in_callback(void)
{
	return ftpad_in_dispatch();
}

static bool is_registered(const struct ftpad_ops *ops)
{
	for (struct ftpad_ops *o = registered; o; o = o->internal.next)
		if (o == ops)
			return true;
	return false;
}

/* Unlink the registered ops; where it was linked. */
static struct ftpad_ops **unlink_ops(struct ftpad_ops *ops)
{
	struct ftpad_ops **pp = &registered;

	while (*pp != ops)
		pp = &(*pp)->internal.next;
	/* ops->internal.next stays, for readers standing on ops right now. */
	__atomic_store_n(pp, ops->internal.next, __ATOMIC_RELEASE);
	ftpad_note_unpublished();
	ops->flags &= ~FTPAD_OPS_FL_ENABLED;
	return pp;
}

/* Only one IPMODIFY ops may trace a function: two redirects cannot both win. */
static int check_ipmodify(const struct ftpad_ops *ops)
{
	if (!(ops->flags & FTPAD_OPS_FL_IPMODIFY))
		return 0;
	for (struct ftpad_ops *o = registered; o; o = o->internal.next) {
		if (o == ops || !(o->flags & FTPAD_OPS_FL_IPMODIFY))
			continue;
		ftpad_for_each_site(m, s)
			if (ftpad_ops_match(o, s->name) && ftpad_ops_match(ops, s->name)) {
				ftpad_warn("ftpad: %s: already redirected by another IPMODIFY ops\n",
					   s->name ? s->name : "(unnamed)");
				return -EBUSY;
			}
	}
	return 0;
}

int ftpad_register_ops(struct ftpad_ops *ops)
{
	struct ftpad_ops **pp = &registered;
	int err;

	if (!ops || (!ops->func && !ops->exit_func) || (ops->flags & ~KNOWN_FLAGS))
		return -EINVAL;
	if (in_callback())
		return -EDEADLK;
	ftpad_lock_take();
	err = -EBUSY;
	if (is_registered(ops))
		goto out;
	ops->internal.call = !ops->func ? no_entry
			     : ops->flags & (FTPAD_OPS_FL_RECURSION | FTPAD_OPS_FL_SAVE_REGS)
				     ? assist : ops->func;
	err = ftpad_modules_refresh();
	if (!err)
		err = check_ipmodify(ops);
	if (err)
		goto out;
	while (*pp)
		pp = &(*pp)->internal.next;
	ops->internal.next = NULL;
	__atomic_store_n(pp, ops, __ATOMIC_RELEASE);
	err = update_sites();
	if (err) {
		/* Put every site back the way the remaining ops want it.  Sites
		 * written before the failure may have called ops meanwhile: the
		 * caller may free it once this returns, as after unregistering. */
		unlink_ops(ops);
		update_sites();
		ftpad_reclaim(true);
		goto out;
	}
	ops->flags |= FTPAD_OPS_FL_ENABLED;
out:
	ftpad_reclaim(false);
	ftpad_lock_give();
	return err;
}

/* ops, unlinked from *pp by unlink_ops() under the lock held since, goes
 * back where it was, and its sites back to calling it. */
static void relink_ops(struct ftpad_ops *ops, struct ftpad_ops **pp)
{
	__atomic_store_n(pp, ops, __ATOMIC_RELEASE);
	ops->flags |= FTPAD_OPS_FL_ENABLED;
	if (update_sites())
		ftpad_warn("ftpad: unregister timed out, and some of the ops' sites could not be "
			   "enabled again: they stay off until the next change\n");
}

/* The end of a wait of timeout_ms from now (CLOCK_MONOTONIC). */
static struct timespec deadline_in(long timeout_ms)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += timeout_ms / 1000;
	t.tv_nsec += timeout_ms % 1000 * 1000000L;
	if (t.tv_nsec >= 1000000000L)
		t.tv_sec++, t.tv_nsec -= 1000000000L;
	return t;
}

/*
 * Unregister, waiting at most until *until (NULL: no limit) for the lock
 * and for the callbacks in flight.  When that passes, ops goes back: a
 * caller that gives up on waiting must still be able to keep it.
 */
static int unregister(struct ftpad_ops *ops, const struct timespec *until)
{
	struct ftpad_ops **pp;
	int err;

	if (!ops)
		return -EINVAL;
	if (in_callback())
		return -EDEADLK;
	err = ftpad_lock_take_until(until);
	if (err)
		return err;
	err = -ENOENT;
	if (!is_registered(ops))
		goto out;
	pp = unlink_ops(ops);
	ftpad_grace_set_deadline(until);
	err = update_sites();
	/* No thread can reach ops any more; wait for those that still hold it. */
	if (!ftpad_reclaim(true) || err == -ETIMEDOUT) {
		/* Enabling sites needs no grace period: the deadline stays. */
		relink_ops(ops, pp);
		err = -ETIMEDOUT;
	}
	ftpad_grace_set_deadline(NULL);
out:
	ftpad_lock_give();
	return err;
}

int ftpad_unregister_ops(struct ftpad_ops *ops)
{
	return unregister(ops, NULL);
}

int ftpad_unregister_ops_timeout(struct ftpad_ops *ops, long timeout_ms)
{
	struct timespec until;

	if (timeout_ms < 0)
		return unregister(ops, NULL);
	until = deadline_in(timeout_ms);
	return unregister(ops, &until);
}

/* Replace or extend one of ops' glob lists, then re-patch if registered. */
static int set_globs(struct ftpad_ops *ops, void **list, const char *globs, int reset)
{
	struct ftpad_filter *f, *old;
	int err = 0;

	if (!ops || !globs)
		return -EINVAL;
	if (in_callback())
		return -EDEADLK;
	ftpad_lock_take();
	old = *list;
	f = ftpad_filter_parse(reset ? NULL : old, globs);
	if (!f) {
		err = -ENOMEM;
		goto out;
	}
	/* Filters are read only under the lock, so the old one can go now. */
	*list = f;
	if (is_registered(ops)) {
		err = check_ipmodify(ops);
		if (err) {
			*list = old;
			ftpad_free_filter(f);
			goto out;
		}
		err = update_sites();
	}
	ftpad_free_filter(old);
	ftpad_reclaim(false);
out:
	ftpad_lock_give();
	return err;
}

int ftpad_set_filter(struct ftpad_ops *ops, const char *globs, int reset)
{
	return set_globs(ops, ops ? &ops->internal.filter : NULL, globs, reset);
}

int ftpad_set_notrace(struct ftpad_ops *ops, const char *globs, int reset)
{
	return set_globs(ops, ops ? &ops->internal.notrace : NULL, globs, reset);
}

unsigned long ftpad_regs_get_argument(struct ftpad_regs *regs, unsigned int n)
{
	return regs ? *ftpad_arch_regs_argument_slot(regs, n) : 0;
}

void ftpad_regs_set_argument(struct ftpad_regs *regs, unsigned int n, unsigned long val)
{
	if (regs)
		*ftpad_arch_regs_argument_slot(regs, n) = val;
}

unsigned long ftpad_regs_get_stack_pointer(struct ftpad_regs *regs)
{
	return regs ? ftpad_arch_regs_stack_pointer(regs) : 0;
}

int ftpad_regs_set_ip(struct ftpad_regs *regs, unsigned long ip)
{
	if (!regs || !ip)
		return -EINVAL;
	/* At an exit: the function returns to its caller, whatever the flags. */
	if (regs->full == FTPAD_REGS_EXIT || !regs->ops ||
	    !(regs->ops->flags & FTPAD_OPS_FL_IPMODIFY))
		return -EPERM;
	ftpad_arch_regs_set_ip(regs, ip);
	return 0;
}

struct ftpad_pt_regs *ftpad_get_pt_regs(struct ftpad_regs *regs)
{
	return regs && regs->full == FTPAD_REGS_FULL ? &regs->pt : NULL;
}

void *ftpad_regs_return_reg(struct ftpad_regs *regs, enum ftpad_return_reg r)
{
	return regs && regs->full == FTPAD_REGS_EXIT ? ftpad_arch_regs_return_reg(regs, r) : NULL;
}

unsigned long ftpad_regs_get_return_value(struct ftpad_regs *regs)
{
	unsigned long *v = ftpad_regs_return_reg(regs, FTPAD_RET_INT0);

	return v ? *v : 0;
}

int ftpad_regs_set_return_value(struct ftpad_regs *regs, unsigned long val)
{
	unsigned long *v = ftpad_regs_return_reg(regs, FTPAD_RET_INT0);

	if (!v)
		return -EINVAL;
	*v = val;
	return 0;
}

/* Under the lock: refresh, and bring the sites of the modules read since
 * the last update in line with the registered ops. */
static int sync_modules(void)
{
	int err = ftpad_modules_refresh();

	if (!err && ftpad_modules_take_added() && registered_ops())
		err = update_sites();
	return err;
}

void ftpad_modules_changed(void)
{
	/* From a callback, the next ftpad_* call outside one picks it up
	 * (every call that writes code refreshes the modules first, in
	 * ftpad_modules_hold()); before the first call that needed the
	 * tables, nothing to do. */
	if (in_callback() || !ftpad_modules_scanned())
		return;
	ftpad_lock_take();
	sync_modules();
	ftpad_reclaim(false);
	ftpad_lock_give();
}

int ftpad_get_stats(struct ftpad_stats *st)
{
	struct ftpad_stats s = { .sz = sizeof(s) };

	if (!st || st->sz < sizeof(st->sz))
		return -EINVAL;
	/* The lock's holder may be waiting for this very callback to end. */
	if (in_callback())
		return -EDEADLK;
	ftpad_lock_take();
	/* Modules loaded since are patched now, as by any call (dlhooks.c
	 * does it earlier in libftpad.so). */
	sync_modules();
	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next) {
		s.modules += m->nsites > 0;
		s.sites += m->nsites - m->nexits;
		s.exit_sites += m->nexits;
		for (size_t i = 0; i < m->nsites; i++) {
			const struct ftpad_site *site = &m->sites[i];
			bool on = site->state & FTPAD_S_ENABLED;

			if (ftpad_site_is_exit(site)) {
				s.exits_enabled += on;
				continue;
			}
			s.enabled += on;
			s.entries_only += ftpad_site_entries_only(site);
		}
	}
	ftpad_reclaim(false);
	ftpad_lock_give();
	s.traps = __atomic_load_n(&ftpad_traps, __ATOMIC_RELAXED);
	s.thread_slots = ftpad_grace_slots();
	s.sz = st->sz;
	memcpy(st, &s, st->sz < sizeof(s) ? st->sz : sizeof(s));
	return 0;
}

/* A link with libftpad.a takes this file whenever the program calls an
 * ftpad function; this takes the start-up with it (early_preinit.c),
 * whose constructor starts the built-in tracer.  A reference for the
 * linker only: nothing here calls the start-up. */
__attribute__((used)) static const char *const take_start_up = &ftpad_start_up;
