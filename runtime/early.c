/* SPDX-License-Identifier: MIT */
/*
 * early.c - very early tracing (docs/design.md "Very early tracing", after the
 * very early ftrace kernel patch, kbuild/0006): with FTPAD_EARLY=1 next to FTPAD_FILTER, the
 * built-in tracer's functions are traced from the first instrumented call,
 * before the program's constructors, without malloc, into a static buffer
 * filtered through a sorted address table searched by bisection; the
 * tracer merges those entries into its trace, ahead of its own lines, once
 * it is fully up (tracer.c).
 *
 * Where it starts: libftpad.a puts ftpad_early_start() in .preinit_array
 * (early_preinit.c), which an executable runs before any shared library's
 * constructor; libftpad.so calls it from its first constructor, before the
 * constructors of the program and of the libraries that load after it.
 * Where the tracer takes over: libftpad.so wraps the program's main
 * (starthook.c), so the constructors of the program itself are traced
 * early too; libftpad.a at its own constructor.
 *
 * Nothing here allocates: the runtime maps its tables (alloc.c), and these
 * buffers are static (in .bss: no page until used).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "internal.h"

#define MAX_IPS 65536
#define MAX_ENTRIES 16384

static struct ftpad_early_entry entries[MAX_ENTRIES];
static unsigned int nentries; /* atomic: may pass MAX_ENTRIES; the rest were dropped */
static uintptr_t ips[MAX_IPS]; /* sorted: the functions FTPAD_FILTER selects */
static size_t nips;
static int state;              /* 0 never, 1 tracing, 2 handed over */

/* A filtered, lock-free append of a call of the function at ip (an
 * entry, or an exit at exit_site); NULL if not chosen or no room. */
static struct ftpad_early_entry *append(unsigned long ip, unsigned long parent_ip,
					 struct ftpad_regs *regs,
					 const struct ftpad_site *exit_site)
{
	unsigned int i;

	if (!ftpad_sorted_has(ips, nips, ip))
		return NULL;
	i = __atomic_fetch_add(&nentries, 1, __ATOMIC_RELAXED);
	if (i >= MAX_ENTRIES)
		return NULL;
	entries[i].exit_site = exit_site;
	entries[i].ip = ip;
	entries[i].parent_ip = parent_ip;
	entries[i].time = ftpad_trace_clock();
	entries[i].sp = (uint32_t)ftpad_regs_get_stack_pointer(regs);
	entries[i].tid = gettid();
	return &entries[i];
}

/* The callback: an entry, with the thread's name for the text tracer. */
static void record(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		   struct ftpad_regs *regs)
{
	struct ftpad_early_entry *e = append(ip, parent_ip, regs, NULL);

	(void)ops;
	if (e)
		prctl(PR_GET_NAME, e->comm);
}

/* The exits of the same functions, for the recorder (record_session.c takes
 * them into its trace; the text tracer writes entries only): ip is the
 * function's entry, the dispatch knows the exit site. */
static void record_exit(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
			struct ftpad_regs *regs)
{
	(void)ops;
	append(ip, parent_ip, regs, ftpad_slot->exit_site);
}

static struct ftpad_ops early_ops = { .func = record, .flags = FTPAD_OPS_FL_RECURSION };

static int cmp_ip(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/* The sorted table of the entries the filter selects. */
static void build_table(void)
{
	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next)
		for (size_t i = 0; i < m->nsites && nips < MAX_IPS; i++)
			if (!ftpad_site_is_exit(&m->sites[i]) &&
			    ftpad_ops_match(&early_ops, m->sites[i].name))
				ips[nips++] = m->sites[i].entry;
	ftpad_sort(ips, nips, sizeof(ips[0]), cmp_ip);
}

/* getenv() before libc is initialized (.preinit_array) finds nothing:
 * the loader passes the environment along. */
static const char *env_value(char **envp, const char *name)
{
	size_t len = strlen(name);

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, len) && (*envp)[len] == '=')
			return *envp + len + 1;
	return NULL;
}

/* The functions to trace early: the tracer's, else the recorder's (all
 * by default); NULL when neither is on. */
static const char *early_filter(char **envp)
{
	const char *filter = env_value(envp, FTPAD_ENV_FILTER), *dir;

	if (filter)
		return filter;
	dir = env_value(envp, FTPAD_ENV_RECORD);
	if (!dir || !*dir)
		return NULL;
	filter = env_value(envp, FTPAD_ENV_RECORD_FILTER);
	return filter && *filter ? filter : "*";
}

static bool wanted_in(char **envp)
{
	const char *early = env_value(envp, FTPAD_ENV_EARLY);

	return early && *early && strcmp(early, "0") && early_filter(envp);
}

void ftpad_early_start(char **envp)
{
	struct ftpad_stats st = { .sz = sizeof(st) };
	int err;

	if (state || !wanted_in(envp))
		return;
	state = 1;
	/* The recorder's trace has exits (the text tracer's has none). */
	if (!env_value(envp, FTPAD_ENV_FILTER))
		early_ops.exit_func = record_exit;
	err = ftpad_set_filter(&early_ops, early_filter(envp), 1);
	if (!err)
		err = ftpad_get_stats(&st); /* reads the site tables */
	if (!err) {
		build_table();
		err = ftpad_register_ops(&early_ops);
	}
	if (err) {
		ftpad_warn("ftpad: error: cannot start early tracing: %s\n", ftpad_strerror(err));
		state = 2;
	}
}

bool ftpad_early_active(void)
{
	return state == 1;
}

const struct ftpad_early_entry *ftpad_early_stop(size_t *n, size_t *dropped)
{
	unsigned int all = __atomic_load_n(&nentries, __ATOMIC_ACQUIRE);

	*n = *dropped = 0;
	if (state != 1)
		return entries;
	state = 2;
	/* After this no callback of ours runs: the entries are final. */
	ftpad_unregister_ops(&early_ops);
	all = __atomic_load_n(&nentries, __ATOMIC_ACQUIRE);
	*n = all < MAX_ENTRIES ? all : MAX_ENTRIES;
	*dropped = all - *n;
	return entries;
}

/* libftpad.so: its first constructor.  (libftpad.a started already, from
 * .preinit_array; a second call does nothing.) */
__attribute__((constructor(101))) static void early_init(int argc, char **argv, char **envp)
{
	(void)argc, (void)argv;
	ftpad_early_start(envp);
}
