/* SPDX-License-Identifier: MIT */
/*
 * ops.c - the ftrace_ops-style API: registering ops, their name filters,
 * and dispatching a call to the ops that trace it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "internal.h"

__thread struct ftpad_ops *ftpad_current_ops __attribute__((tls_model("initial-exec")));

unsigned long ftpad_traps;

#define KNOWN_FLAGS (FTPAD_OPS_FL_ENABLED | FTPAD_OPS_FL_IPMODIFY | FTPAD_OPS_FL_RECURSION)

/* Registered ops, in registration order; readers follow next lock-free. */
static struct ftpad_ops *registered;

struct filter {
	size_t n;
	char *globs[];
};

static struct ftpad_ops *next_ops(const struct ftpad_ops *ops)
{
	return __atomic_load_n(&ops->internal.next, __ATOMIC_ACQUIRE);
}

struct ftpad_ops *ftpad_registered(void)
{
	return __atomic_load_n(&registered, __ATOMIC_ACQUIRE);
}

static bool filter_has(const struct filter *f, const char *name)
{
	for (size_t i = 0; f && name && i < f->n; i++)
		if (!fnmatch(f->globs[i], name, 0))
			return true;
	return false;
}

bool ftpad_ops_match(const struct ftpad_ops *ops, const char *name)
{
	const struct filter *f = ops->internal.filter;

	/* As in ftrace: the notrace list wins over the filter. */
	if (filter_has(ops->internal.notrace, name))
		return false;
	return !f || !f->n || filter_has(f, name);
}

/* Whether ops traces the function at ip: its sorted entries, searched. */
static bool ops_traces(const struct ftpad_ops *ops, uintptr_t ip)
{
	const struct ftpad_entries *e = __atomic_load_n((struct ftpad_entries **)&ops->internal.entries,
							__ATOMIC_ACQUIRE);
	size_t lo = 0, hi = e ? e->n : 0;

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

/* The ops of functions traced by more than one ops: calls each in turn. */
static void list_func(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *list,
		      struct ftpad_regs *regs)
{
	(void)list;
	for (struct ftpad_ops *ops = ftpad_registered(); ops; ops = next_ops(ops)) {
		if (!ops_traces(ops, ip))
			continue;
		ftpad_current_ops = ops;
		ops->func(ip, parent_ip, ops, regs);
	}
}

struct ftpad_ops ftpad_list_ops = { .func = list_func };

void ftpad_dispatch(uintptr_t ip, uintptr_t parent_ip, struct ftpad_ops *ops,
		    struct ftpad_regs *regs)
{
	int saved_errno = errno;

	ftpad_recursion++;
	ftpad_current_ops = ops;
	ops->func(ip, parent_ip, ops, regs);
	ftpad_current_ops = NULL;
	ftpad_recursion--;
	errno = saved_errno;
}

/* Changing ops from a callback would wait for that very callback to end. */
static bool in_callback(void)
{
	return ftpad_current_ops != NULL;
}

/* Take the lock and keep this thread's own calls out of callbacks meanwhile. */
static void lock(void)
{
	pthread_mutex_lock(&ftpad_lock);
	ftpad_recursion++;
}

static void unlock(void)
{
	ftpad_recursion--;
	pthread_mutex_unlock(&ftpad_lock);
}

static bool is_registered(const struct ftpad_ops *ops)
{
	for (struct ftpad_ops *o = registered; o; o = o->internal.next)
		if (o == ops)
			return true;
	return false;
}

static void unlink_ops(struct ftpad_ops *ops)
{
	struct ftpad_ops **pp = &registered;

	while (*pp != ops)
		pp = &(*pp)->internal.next;
	/* ops->internal.next stays, for readers standing on ops right now. */
	__atomic_store_n(pp, ops->internal.next, __ATOMIC_RELEASE);
	ops->flags &= ~FTPAD_OPS_FL_ENABLED;
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

	if (!ops || !ops->func || (ops->flags & ~KNOWN_FLAGS))
		return -EINVAL;
	if (in_callback())
		return -EDEADLK;
	lock();
	err = -EBUSY;
	if (is_registered(ops))
		goto out;
	err = ftpad_modules_refresh();
	if (!err)
		err = check_ipmodify(ops);
	if (err)
		goto out;
	while (*pp)
		pp = &(*pp)->internal.next;
	ops->internal.next = NULL;
	__atomic_store_n(pp, ops, __ATOMIC_RELEASE);
	err = ftpad_update_sites();
	if (err) {
		/* Put every site back the way the remaining ops want it. */
		unlink_ops(ops);
		ftpad_update_sites();
		goto out;
	}
	ops->flags |= FTPAD_OPS_FL_ENABLED;
out:
	ftpad_reclaim(false);
	unlock();
	return err;
}

int ftpad_unregister_ops(struct ftpad_ops *ops)
{
	int err;

	if (!ops)
		return -EINVAL;
	if (in_callback())
		return -EDEADLK;
	lock();
	err = -ENOENT;
	if (!is_registered(ops))
		goto out;
	unlink_ops(ops);
	err = ftpad_update_sites();
	/* No thread can reach ops any more; wait for those that still hold it. */
	ftpad_reclaim(true);
out:
	unlock();
	return err;
}

/* Split "a, b*,c" into a filter holding the globs, after those of old. */
static struct filter *parse_filter(const struct filter *old, const char *globs)
{
	size_t n = old ? old->n : 0, max = n + 1;
	struct filter *f;
	char *copy, *save = NULL;

	for (const char *p = globs; *p; p++)
		max += *p == ',';
	f = calloc(1, sizeof(*f) + max * sizeof(f->globs[0]));
	if (!f)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(f->globs[f->n++] = strdup(old->globs[i])))
			goto fail;
	copy = strdup(globs);
	if (!copy)
		goto fail;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end = tok + strlen(tok);

		tok += strspn(tok, " \t\n");
		while (end > tok && strchr(" \t\n", end[-1]))
			*--end = 0;
		if (*tok && !(f->globs[f->n++] = strdup(tok))) {
			free(copy);
			goto fail;
		}
	}
	free(copy);
	return f;
fail:
	ftpad_free_filter(f);
	return NULL;
}

void ftpad_free_filter(void *filter)
{
	struct filter *f = filter;

	for (size_t i = 0; f && i < f->n; i++)
		free(f->globs[i]);
	free(f);
}

/* Replace or extend one of ops' glob lists, then re-patch if registered. */
static int set_globs(struct ftpad_ops *ops, void **list, const char *globs, int reset)
{
	struct filter *f, *old;
	int err = 0;

	if (!ops || !globs)
		return -EINVAL;
	if (in_callback())
		return -EDEADLK;
	lock();
	old = *list;
	f = parse_filter(reset ? NULL : old, globs);
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
		err = ftpad_update_sites();
	}
	ftpad_free_filter(old);
	ftpad_reclaim(false);
out:
	unlock();
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
	return regs ? ftpad_arch_regs_argument(regs, n) : 0;
}

void ftpad_regs_set_argument(struct ftpad_regs *regs, unsigned int n, unsigned long val)
{
	if (regs)
		ftpad_arch_regs_set_argument(regs, n, val);
}

unsigned long ftpad_regs_get_stack_pointer(struct ftpad_regs *regs)
{
	return regs ? ftpad_arch_regs_stack_pointer(regs) : 0;
}

int ftpad_regs_set_ip(struct ftpad_regs *regs, unsigned long ip)
{
	if (!regs || !ip)
		return -EINVAL;
	if (!ftpad_current_ops || !(ftpad_current_ops->flags & FTPAD_OPS_FL_IPMODIFY))
		return -EPERM;
	ftpad_arch_regs_set_ip(regs, ip);
	return 0;
}

void ftpad_modules_changed(void)
{
	/* From a callback, the next ftpad_* call outside one picks it up. */
	if (in_callback())
		return;
	lock();
	if (!ftpad_modules_refresh() && ftpad_registered())
		ftpad_update_sites();
	ftpad_reclaim(false);
	unlock();
}

int ftpad_get_stats(struct ftpad_stats *st)
{
	struct ftpad_stats s = { .sz = sizeof(s) };

	if (!st || st->sz < sizeof(st->sz))
		return -EINVAL;
	lock();
	ftpad_modules_refresh();
	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next) {
		s.modules += m->nsites > 0;
		s.sites += m->nsites;
		for (size_t i = 0; i < m->nsites; i++)
			s.enabled += m->sites[i].enabled;
	}
	ftpad_reclaim(false);
	unlock();
	s.traps = __atomic_load_n(&ftpad_traps, __ATOMIC_RELAXED);
	s.sz = st->sz;
	memcpy(st, &s, st->sz < sizeof(s) ? st->sz : sizeof(s));
	return 0;
}

/*
 * At load: find the sites of everything loaded with the program (reading
 * tables only, writing nothing), then start the built-in tracer if the
 * environment asks for it.
 */
/*
 * fork: take the lock around it, so that the child never starts with the
 * lock held by a thread it does not have, nor with a batch half written.
 * From inside a callback, only if it is free: its holder may be waiting
 * for this very callback to end.
 */
static bool fork_locked;

static void fork_prepare(void)
{
	fork_locked = in_callback() ? !pthread_mutex_trylock(&ftpad_lock)
				    : !pthread_mutex_lock(&ftpad_lock);
}

static void fork_done(void)
{
	if (fork_locked)
		pthread_mutex_unlock(&ftpad_lock);
}

__attribute__((constructor(101))) static void ftpad_init(void)
{
	pthread_atfork(fork_prepare, fork_done, fork_done);
	lock();
	ftpad_modules_refresh();
	unlock();
	ftpad_tracer_start();
}
