/* SPDX-License-Identifier: MIT */
/*
 * symtab.c - a module's file as mapped (module.c): its sections, and its
 * symbol table, which ftrace would take from kallsyms: .symtab when the
 * file has one, else .dynsym.  Tables are read once per module, on first
 * need, and then only read without locks, so that callbacks can name
 * their callers (symbols.c).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

#include "internal.h"

/* The module file's first section called name (NULL: any) of type (0: any). */
const ElfW(Shdr) *ftpad_module_section(const struct ftpad_module *mod, const char *name,
				       unsigned type)
{
	const ElfW(Ehdr) *eh = mod->map;
	const ElfW(Shdr) *sh = (const void *)((const char *)mod->map + eh->e_shoff);
	const ElfW(Shdr) *strs = &sh[eh->e_shstrndx];

	if (strs->sh_offset + strs->sh_size > mod->map_size)
		return NULL;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (type && sh[i].sh_type != type)
			continue;
		if (!name)
			return &sh[i];
		if (sh[i].sh_name < strs->sh_size &&
		    !strncmp((const char *)mod->map + strs->sh_offset + sh[i].sh_name, name,
			     strs->sh_size - sh[i].sh_name))
			return &sh[i];
	}
	return NULL;
}

/* Taken only to build a table; never held while calling out. */
static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;
static bool fork_locked;

/* As ftpad_lock around fork (fork.c): a callback may be building a table. */
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

static bool eager; /* under ftpad_lock */

bool ftpad_symbols_eager(void)
{
	return eager;
}

void ftpad_symbols_set_eager(void)
{
	eager = true;
}
