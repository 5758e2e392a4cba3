/* SPDX-License-Identifier: MIT */
/*
 * symbols.c - function names from the modules' own symbol tables, as ftrace
 * uses kallsyms: .symtab when the file has one, else .dynsym.  Tables are
 * read once per module, on first need, and then only read without locks,
 * so that callbacks can name their callers.
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

/* Taken only to build a table; never held while calling out. */
static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;
static bool fork_locked;

/* As ftpad_lock around fork (ops.c): a callback may be building a table. */
void ftpad_symbols_fork_prepare(bool may_block)
{
	fork_locked = may_block ? !pthread_mutex_lock(&sym_lock) : !pthread_mutex_trylock(&sym_lock);
}

void ftpad_symbols_fork_done(bool child)
{
	if (fork_locked)
		pthread_mutex_unlock(&sym_lock);
	else if (child)
		pthread_mutex_init(&sym_lock, NULL);
}

static bool is_function(const ElfW(Sym) *sym)
{
	int type = ELF64_ST_TYPE(sym->st_info);

	return (type == STT_FUNC || type == STT_GNU_IFUNC) && sym->st_shndx != SHN_UNDEF &&
	       sym->st_value;
}

/* By address; at one address prefer a global name over local or weak ones. */
static int cmp_sym(const void *a, const void *b)
{
	const struct ftpad_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->global != y->global)
		return x->global ? -1 : 1;
	return x->size > y->size ? -1 : x->size < y->size;
}

static size_t read_table(const struct ftpad_module *mod, const ElfW(Shdr) *symtab,
			 struct ftpad_sym **out)
{
	const ElfW(Ehdr) *eh = mod->map;
	const ElfW(Shdr) *strtab = (const ElfW(Shdr) *)((const char *)mod->map + eh->e_shoff) +
				   symtab->sh_link;
	const ElfW(Sym) *sym = (const void *)((const char *)mod->map + symtab->sh_offset);
	size_t n = symtab->sh_size / sizeof(*sym), kept = 0;
	struct ftpad_sym *syms;
	const char *strs;

	if (symtab->sh_link >= eh->e_shnum || symtab->sh_offset + symtab->sh_size > mod->map_size ||
	    strtab->sh_offset + strtab->sh_size > mod->map_size || !strtab->sh_size)
		return 0;
	strs = (const char *)mod->map + strtab->sh_offset;
	if (strs[strtab->sh_size - 1])
		return 0;
	syms = ftpad_alloc((n ? n : 1) * sizeof(*syms));
	if (!syms)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!is_function(&sym[i]) || sym[i].st_name >= strtab->sh_size ||
		    !strs[sym[i].st_name])
			continue;
		syms[kept].addr = mod->base + sym[i].st_value;
		syms[kept].size = sym[i].st_size;
		syms[kept].name = strs + sym[i].st_name;
		syms[kept].global = ELF64_ST_BIND(sym[i].st_info) == STB_GLOBAL;
		kept++;
	}
	ftpad_sort(syms, kept, sizeof(*syms), cmp_sym);
	*out = syms;
	return kept;
}

int ftpad_module_load_symbols(struct ftpad_module *mod)
{
	const ElfW(Shdr) *symtab;
	struct ftpad_sym *syms = NULL;
	size_t n = 0;

	if (__atomic_load_n(&mod->syms_loaded, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&sym_lock);
	if (!mod->syms_loaded) {
		if (mod->map) {
			symtab = ftpad_module_section(mod, NULL, SHT_SYMTAB);
			if (!symtab)
				symtab = ftpad_module_section(mod, NULL, SHT_DYNSYM);
			if (symtab)
				n = read_table(mod, symtab, &syms);
		}
		mod->syms = syms;
		mod->nsyms = n;
		__atomic_store_n(&mod->syms_loaded, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&sym_lock);
	return 0;
}

static bool eager; /* under ftpad_lock */

bool ftpad_symbols_eager(void)
{
	return eager;
}

void ftpad_load_symbols_eagerly(void)
{
	pthread_mutex_lock(&ftpad_lock);
	eager = true;
	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next)
		ftpad_module_load_symbols(m);
	pthread_mutex_unlock(&ftpad_lock);
}

const struct ftpad_sym *ftpad_module_symbol(struct ftpad_module *mod, uintptr_t addr)
{
	size_t lo = 0, hi;
	const struct ftpad_sym *s;

	ftpad_module_load_symbols(mod);
	if (!mod->nsyms || addr < mod->syms[0].addr)
		return NULL;
	hi = mod->nsyms;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (mod->syms[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	/* The first of equal addresses is the preferred alias. */
	while (lo && mod->syms[lo - 1].addr == mod->syms[lo].addr)
		lo--;
	s = &mod->syms[lo];
	/* A symbol without a size covers up to the next one. */
	if (s->size ? addr - s->addr < s->size : addr == s->addr || hi < mod->nsyms)
		return s;
	return NULL;
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
