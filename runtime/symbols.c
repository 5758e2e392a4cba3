/* SPDX-License-Identifier: MIT */
/*
 * symbols.c - function names for addresses, as ftrace takes them from
 * kallsyms: looked up in the modules' own symbol tables (symtab.c), from
 * callbacks too, and in the modules not read yet when nothing is found.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void ftpad_load_symbols_eagerly(void)
{
	ftpad_lock_take();
	ftpad_symbols_set_eager();
	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next)
		ftpad_module_load_symbols(m);
	ftpad_lock_give();
}

const struct ftpad_sym *ftpad_symbol_of(uintptr_t addr)
{
	struct ftpad_module *mod = ftpad_module_of(addr);

	return mod ? ftpad_module_symbol(mod, addr) : NULL;
}

static const char *name_of(unsigned long ip)
{
	const struct ftpad_site *site = ftpad_site_by_entry(ip);
	const struct ftpad_sym *sym;

	if (site && site->name)
		return site->name;
	sym = ftpad_symbol_of(ip);
	return sym && sym->addr == ip ? sym->name : NULL;
}

static const char *find_name(unsigned long ip)
{
	/* Counted as dispatching, so that dlclose does not free the module
	 * under us (inside libftpad's locked calls, the lock does that). */
	struct ftpad_thread_slot *t = ftpad_enter();
	const char *name = name_of(ip);

	if (t)
		ftpad_exit(t);
	return name;
}

/* A lookup reads the tables like any other call: what it does not find may
 * be in a module not read yet (no call before, or a dlopen since). */
const char *ftpad_lookup_name(unsigned long ip)
{
	const char *name = find_name(ip);

	if (!name && ftpad_modules_try_refresh())
		name = find_name(ip);
	if (!name)
		errno = ENOENT;
	return name;
}

/* 1, 0, or -ENOENT (ftpad.h); counted as dispatching, as find_name(). */
static int entries_only(unsigned long ip)
{
	struct ftpad_thread_slot *t = ftpad_enter();
	const struct ftpad_site *site = ftpad_site_by_entry(ip);
	int r = site ? ftpad_site_entries_only(site) : -ENOENT;

	if (t)
		ftpad_exit(t);
	return r;
}

int ftpad_lookup_entries_only(unsigned long ip)
{
	int r = entries_only(ip);

	if (r == -ENOENT && ftpad_modules_try_refresh())
		r = entries_only(ip);
	return r;
}

static int format_symbol(unsigned long addr, char *buf, size_t size)
{
	const struct ftpad_sym *sym = ftpad_symbol_of(addr);
	const char *name = sym ? sym->name : NULL;
	unsigned long start = sym ? sym->addr : 0;
	Dl_info info;

	/* dladdr knows the dynamic symbols of modules ftpad has no file for. */
	if (!name && dladdr((void *)addr, &info) && info.dli_sname) {
		name = info.dli_sname;
		start = (unsigned long)info.dli_saddr;
	}
	if (!name)
		return snprintf(buf, size, "%#lx", addr);
	if (addr == start)
		return snprintf(buf, size, "%s", name);
	return snprintf(buf, size, "%s+%#lx", name, addr - start);
}

int ftpad_lookup_symbol(unsigned long addr, char *buf, size_t size)
{
	struct ftpad_thread_slot *t;
	bool known;
	int len;

	if (!buf && size)
		return -EINVAL;
	t = ftpad_enter(); /* as in find_name() */
	known = ftpad_symbol_of(addr) != NULL;
	if (t)
		ftpad_exit(t);
	/* Modules not read yet, as in ftpad_lookup_name(). */
	if (!known)
		ftpad_modules_try_refresh();
	t = ftpad_enter();
	len = format_symbol(addr, buf, size);
	if (t)
		ftpad_exit(t);
	return len;
}
