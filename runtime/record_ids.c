/* SPDX-License-Identifier: MIT */
/*
 * record_ids.c - the recorder's site ids: each module's sites get a run
 * of ids when first met, and a line each in <image>/sites (docs/format.md
 * "The trace directory"); and the ops' callbacks, which turn a site into
 * its id's event.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>

#include "record.h"

bool exits_recorded;

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

	check_sites_fd();
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
int64_t id_of(const struct ftpad_site *s)
{
	struct ftpad_module *m = s ? ftpad_module_of(ftpad_site_addr(s)) : NULL;
	int64_t base;

	if (!m || (base = module_base(m)) < 0)
		return -1;
	return base + (s - m->sites);
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
void publish_modules(void)
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
void register_modules(void)
{
	static struct ftpad_module *list[MAX_MODULES];
	size_t n = list_modules(list);

	for (size_t i = 0; i < n; i++)
		module_base(list[i]);
	write_pending_lines(list, n);
}

/* The ids given so far: a trace's sites. */
uint32_t site_id_count(void)
{
	return next_id;
}

/* A new trace directory: its own site ids. */
void forget_site_ids(void)
{
	nmods = next_id = 0;
	mods_lock = 0;
}

/* In a forked child: the thread that held the lock is not there. */
void reset_site_ids_lock(void)
{
	mods_lock = 0;
}

/* Site s's event, or, when its module has no ids (the table of modules
 * was busy or full), one dropped and counted. */
static void record_site(unsigned kind, const struct ftpad_site *s, struct ftpad_regs *regs)
{
	int64_t id = id_of(s);

	if (id < 0) {
		if (self)
			count_drop(self, FTPAD_LOST_NO_ID);
		return;
	}
	record_event(kind, (uint32_t)id, (uint32_t)ftpad_regs_get_stack_pointer(regs),
		     kind == FTPAD_EVENT_ENTRY && ftpad_site_entries_only(s));
}

void record_entry(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		  struct ftpad_regs *regs)
{
	(void)parent_ip, (void)ops;
	record_site(FTPAD_EVENT_ENTRY, ftpad_site_by_entry(ip), regs);
}

/* An exit or tail exit, at the exit site the dispatch is running for. */
void record_exit(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		 struct ftpad_regs *regs)
{
	const struct ftpad_site *s = ftpad_slot->exit_site;

	(void)ip, (void)parent_ip, (void)ops;
	record_site(s && ftpad_site_kind(s) == FTPAD_SITE_KIND_TAIL_EXIT ? FTPAD_EVENT_TAIL_EXIT
									 : FTPAD_EVENT_EXIT,
		    s, regs);
}
