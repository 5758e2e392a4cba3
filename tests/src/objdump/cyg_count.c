/* SPDX-License-Identifier: MIT */
/* cyg_count.c - counts the calls of a -finstrument-functions build, the
 * peer that tests/trace/test_objdump_trace.py holds `ftpad record` against.
 * Preloaded; at exit it writes one line per function that was entered or
 * left, "<offset from the object's base, hex> <entries> <exits>", to the
 * file named by CYG_COUNT_OUT.  One thread only (objdump has one): the
 * counters take no lock, so that counting changes the program no more than
 * it must. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Open addressing; binutils' objdump has about 8,000 functions. */
#define SLOTS (1u << 16)

struct counter {
	void *fn;
	unsigned long entries, exits;
};

static struct counter table[SLOTS];
static int full;

static struct counter *counter_of(void *fn)
{
	uintptr_t h = ((uintptr_t)fn >> 4) * 0x9e3779b97f4a7c15u;
	unsigned i, n;

	for (i = (unsigned)(h >> 48) % SLOTS, n = 0; n < SLOTS; i = (i + 1) % SLOTS, n++) {
		if (table[i].fn == fn)
			return &table[i];
		if (!table[i].fn) {
			table[i].fn = fn;
			return &table[i];
		}
	}
	full = 1;
	return NULL;
}

void __cyg_profile_func_enter(void *fn, void *call_site)
{
	struct counter *c = counter_of(fn);

	(void)call_site;
	if (c)
		c->entries++;
}

void __cyg_profile_func_exit(void *fn, void *call_site)
{
	struct counter *c = counter_of(fn);

	(void)call_site;
	if (c)
		c->exits++;
}

/* Written to a temporary and renamed: a reader never sees half a file. */
static void write_counts(void)
{
	const char *out = getenv("CYG_COUNT_OUT");
	char tmp[4096];
	unsigned i;
	FILE *f;

	if (!out || snprintf(tmp, sizeof(tmp), "%s.tmp", out) >= (int)sizeof(tmp))
		return;
	f = fopen(tmp, "w");
	if (!f)
		return;
	if (full)
		fputs("full\n", f);
	for (i = 0; i < SLOTS; i++) {
		Dl_info info;

		if (table[i].fn && dladdr(table[i].fn, &info) && info.dli_fbase)
			fprintf(f, "%lx %lu %lu\n",
				(unsigned long)((char *)table[i].fn - (char *)info.dli_fbase),
				table[i].entries, table[i].exits);
	}
	if (fclose(f) == 0)
		rename(tmp, out);
}

__attribute__((destructor)) static void at_exit(void)
{
	write_counts();
}
