/* SPDX-License-Identifier: MIT */
/*
 * The drop-in algorithm: what Linux 6.12's scripts/recordmcount does to one
 * object, reimplemented over the ELF layer.
 *
 * 1. An object that already has relocations for __mcount_loc is left alone.
 * 2. Every relocation section whose target is executable PROGBITS is looked
 *    at.  In a traced section (.text*, .init.text, ...) each call to the
 *    mcount symbol becomes one __mcount_loc entry: an absolute relocation
 *    against a non-weak symbol of that section (usually its section symbol)
 *    with the call's offset.  In other executable sections the call becomes
 *    a NOP where the architecture knows how, and its relocation R_*_NONE.
 * 3. __mcount_loc and .rel[a]__mcount_loc are appended.
 *
 * One deliberate difference: where a traced section that has mcount calls
 * has no usable symbol (a weak function alone in its -ffunction-sections
 * section, whose section symbol the assembler dropped), Linux fails with
 * "Cannot find symbol for section"; we add the section symbol, as objtool
 * does.  Another: the previous mcount relocation that is_fake_mcount looks
 * at (mips) is the previous one in the same section; Linux carries it over
 * from the last section it looked at and so drops a real call site whose
 * offset is 4 more than the last one of that other section.
 */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rmc.h"

/* The per-file state: everything one run over one object accumulates. */
struct mcount_file {
	const struct rmc_opts *opts;
	struct rmc_obj *obj;
	const struct rmc_arch *arch;
	const char *path;
	uint64_t *words;	/* __mcount_loc contents */
	struct rmc_reloc *rels;	/* and its relocations */
	size_t nrec, cap;
	bool rela;		/* REL or RELA, as the object's own relocations */
	size_t symtab;		/* the symbol table the relocations use */
	size_t nops;		/* calls turned into NOPs */
	size_t base_symtab;	/* base_sym[] and base_value[] are for this symtab, or 0 */
	size_t *base_sym;	/* per section: the symbol records are based on, or 0 */
	uint64_t *base_value;
};

/* Names of the sections whose functions ftrace traces (Linux's list). */
static bool is_traced_section(const char *name)
{
	static const char *const exact[] = {
		".init.text", ".ref.text", ".sched.text", ".spinlock.text", ".irqentry.text",
		".softirqentry.text", ".kprobes.text", ".cpuidle.text",
	};

	if (strncmp(name, ".text", 5) == 0)
		return true;
	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (strcmp(name, exact[i]) == 0)
			return true;
	return false;
}

static bool is_reloc_section(const GElf_Shdr *sh)
{
	return sh->sh_type == SHT_REL || sh->sh_type == SHT_RELA;
}

/* The executable section relocation section @relndx applies to, or 0. */
static size_t code_target(const struct rmc_obj *obj, size_t relndx)
{
	const GElf_Shdr *rel = rmc_shdr(obj, relndx), *txt;

	if (!rel || !is_reloc_section(rel))
		return 0;
	txt = rmc_shdr(obj, rel->sh_info);
	if (!txt || txt->sh_type != SHT_PROGBITS || !(txt->sh_flags & SHF_EXECINSTR))
		return 0;
	return rel->sh_info;
}

static bool already_processed(const struct rmc_obj *obj)
{
	for (size_t i = 1; i < rmc_shnum(obj); i++) {
		const GElf_Shdr *sh = rmc_shdr(obj, i);

		if (is_reloc_section(sh) && strcmp(rmc_secname(obj, sh->sh_info), "__mcount_loc") == 0)
			return true;
	}
	return false;
}

/* Linux does nothing at all, not even NOPs elsewhere, without a traced section's relocations. */
static bool has_traced_relocs(const struct rmc_obj *obj)
{
	for (size_t i = 1; i < rmc_shnum(obj); i++) {
		size_t txt = code_target(obj, i);

		if (txt && is_traced_section(rmc_secname(obj, txt)) && rmc_shdr(obj, i)->sh_size)
			return true;
	}
	return false;
}

static bool is_mcount_name(const struct rmc_arch *arch, const char *name)
{
	if (name[0] == '.')	/* ppc64 ELFv1 function descriptors: ._mcount */
		name++;
	return strcmp(name, arch->mcount) == 0 || strcmp(name, "__fentry__") == 0 ||
	       (arch->alt_mcount && strcmp(name, arch->alt_mcount) == 0);
}

/*
 * Walk the mcount calls of relocation section @relndx, calling @fn for
 * each.  Like Linux, the mcount symbol is the first one a relocation of the
 * section names; relocations against it that the backend calls fake are
 * skipped.  @fn returns <0 to fail, 1 to stop, 0 to go on.
 */
typedef int (*call_fn)(struct mcount_file *f, size_t relndx, size_t i, struct rmc_reloc *r, void *arg);

static int for_each_mcount_call(struct mcount_file *f, size_t relndx, call_fn fn, void *arg)
{
	size_t symtab = rmc_shdr(f->obj, relndx)->sh_link;
	uint32_t mcount_sym = 0;
	uint64_t prev = UINT64_MAX;	/* the previous mcount relocation's offset, in this section only */

	for (size_t i = 0, n = rmc_nrelocs(f->obj, relndx); i < n; i++) {
		struct rmc_reloc r;
		struct rmc_sym s;
		bool fake;
		int ret;

		if (rmc_reloc(f->obj, relndx, i, &r) < 0) {
			rmc_error(f->path, "%s: bad relocation %zu", rmc_secname(f->obj, relndx), i);
			return -1;
		}
		if (!mcount_sym && r.sym && rmc_sym(f->obj, symtab, r.sym, &s) == 0 &&
		    is_mcount_name(f->arch, s.name))
			mcount_sym = r.sym;
		if (!mcount_sym || r.sym != mcount_sym)
			continue;
		fake = f->arch->is_fake_mcount && f->arch->is_fake_mcount(&r, prev);
		prev = r.offset;
		if (fake)
			continue;
		ret = fn(f, relndx, i, &r, arg);
		if (ret)
			return ret < 0 ? -1 : 0;
	}
	return 0;
}

static int count_call(struct mcount_file *f, size_t relndx, size_t i, struct rmc_reloc *r, void *arg)
{
	(void)f, (void)relndx, (void)i, (void)r;
	++*(size_t *)arg;
	return 1;	/* one is enough */
}

/*
 * The symbol records of a section are based on: its first local or global
 * (never weak: an overriding definition would move it) symbol, as Linux
 * chooses.  One pass over the symbol table finds it for every section.
 */
static int index_base_symbols(struct mcount_file *f, size_t symtab)
{
	size_t shnum = rmc_shnum(f->obj);

	free(f->base_sym);
	free(f->base_value);
	f->base_symtab = 0;
	f->base_sym = calloc(shnum, sizeof(*f->base_sym));
	f->base_value = calloc(shnum, sizeof(*f->base_value));
	if (!f->base_sym || !f->base_value) {
		rmc_error(f->path, "out of memory");
		return -1;
	}
	for (size_t i = 1, n = rmc_nsyms(f->obj, symtab); i < n; i++) {
		struct rmc_sym s;

		if (rmc_sym(f->obj, symtab, i, &s) < 0 || s.shndx == SHN_UNDEF || s.shndx >= shnum)
			continue;
		if (s.bind != STB_LOCAL && s.bind != STB_GLOBAL)
			continue;
		if (f->arch->avoid_func_syms && s.type == STT_FUNC)
			continue;
		if (!f->base_sym[s.shndx]) {
			f->base_sym[s.shndx] = i;
			f->base_value[s.shndx] = s.value;
		}
	}
	f->base_symtab = symtab;
	return 0;
}

/* The base symbol of section @txt, or 0; -1 on error. */
static long base_symbol(struct mcount_file *f, size_t symtab, size_t txt, uint64_t *value)
{
	/* !base_sym: nothing indexed yet, even for a relocation section whose sh_link is 0 */
	if ((f->base_symtab != symtab || !f->base_sym) && index_base_symbols(f, symtab) < 0)
		return -1;
	*value = f->base_value[txt];
	return (long)f->base_sym[txt];
}

/* Section symbols for @n sections of @symtab, in one batch (one pass over the relocations). */
static int add_section_syms(struct mcount_file *f, size_t symtab, const size_t *secs, size_t n)
{
	size_t *syms = n ? calloc(n, sizeof(*syms)) : NULL;
	int ret;

	if (!n)
		return 0;
	if (!syms) {
		rmc_error(f->path, "out of memory");
		return -1;
	}
	ret = rmc_add_section_syms(f->obj, symtab, secs, n, syms);
	free(syms);
	f->base_symtab = 0;	/* symbols moved */
	return ret;
}

/*
 * Before anything is recorded (symbol indexes may move): give every traced
 * section that has mcount calls but no base symbol a section symbol.  All
 * at once: one at a time renumbers every relocation each time, quadratic
 * in a -ffunction-sections object full of weak functions.
 */
static int add_missing_section_symbols(struct mcount_file *f)
{
	size_t shnum = rmc_shnum(f->obj), n = 0, symtab = 0;
	size_t *secs = calloc(shnum ? shnum : 1, sizeof(*secs));
	bool *seen = calloc(shnum ? shnum : 1, sizeof(*seen));
	int ret = -1;

	if (!secs || !seen) {
		rmc_error(f->path, "out of memory");
		goto out;
	}
	for (size_t relndx = 1; relndx < shnum; relndx++) {
		size_t txt = code_target(f->obj, relndx), calls = 0, link;
		uint64_t value;
		long base;

		if (!txt || seen[txt] || !is_traced_section(rmc_secname(f->obj, txt)))
			continue;
		link = rmc_shdr(f->obj, relndx)->sh_link;
		if (n && link != symtab) {	/* another symbol table: its own batch */
			if (add_section_syms(f, symtab, secs, n) < 0)
				goto out;
			n = 0;
		}
		symtab = link;
		base = base_symbol(f, symtab, txt, &value);
		if (base)
			continue;
		if (base < 0 || for_each_mcount_call(f, relndx, count_call, &calls) < 0)
			goto out;
		if (!calls)
			continue;
		seen[txt] = true;
		secs[n++] = txt;
	}
	ret = add_section_syms(f, symtab, secs, n);
out:
	free(secs);
	free(seen);
	return ret;
}

struct base { long sym; uint64_t value; };

static int record_call(struct mcount_file *f, size_t relndx, size_t i, struct rmc_reloc *r, void *arg)
{
	const struct base *base = arg;
	uint64_t addr = r->offset - base->value + (uint64_t)(int64_t)f->arch->mcount_adjust;
	size_t word = rmc_obj_ehdr(f->obj)->e_ident[EI_CLASS] == ELFCLASS32 ? 4 : 8;

	(void)relndx, (void)i;
	if (f->nrec == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 64;
		uint64_t *words = realloc(f->words, cap * sizeof(*words));
		struct rmc_reloc *rels = words ? realloc(f->rels, cap * sizeof(*rels)) : NULL;

		if (words)
			f->words = words;
		if (!rels) {
			rmc_error(f->path, "out of memory");
			return -1;
		}
		f->rels = rels;
		f->cap = cap;
	}
	if (word == 4)
		addr &= 0xffffffffu;
	/* REL keeps the addend in the word, RELA in the relocation. */
	f->words[f->nrec] = f->rela ? 0 : addr;
	f->rels[f->nrec] = (struct rmc_reloc){
		.offset = f->nrec * word, .sym = (uint32_t)base->sym,
		.type = f->arch->abs_reloc, .addend = f->rela ? (int64_t)addr : 0,
	};
	f->nrec++;
	return 0;
}

static int record_section(struct mcount_file *f, size_t relndx, size_t txt)
{
	const GElf_Shdr *rel = rmc_shdr(f->obj, relndx);
	struct base base;

	base.sym = base_symbol(f, rel->sh_link, txt, &base.value);
	if (base.sym <= 0)	/* an error, or no mcount calls: else we added one */
		return (int)base.sym;
	f->symtab = rel->sh_link;
	f->rela = rel->sh_type == SHT_RELA;
	return for_each_mcount_call(f, relndx, record_call, &base);
}

struct nop_state { size_t txt; bool warned; };

static int nop_call(struct mcount_file *f, size_t relndx, size_t i, struct rmc_reloc *r, void *arg)
{
	struct nop_state *st = arg;
	struct rmc_text text = { .big_endian = rmc_obj_ehdr(f->obj)->e_ident[EI_DATA] == ELFDATA2MSB };
	bool done = false;

	text.bytes = rmc_secbytes(f->obj, st->txt, &text.size);
	if (f->arch->make_nop && text.bytes)
		done = f->arch->make_nop(&text, r->offset);
	if (f->opts->warn_notrace && !st->warned) {
		rmc_warn(f->path, "section %s has mcount callers being ignored",
			 rmc_secname(f->obj, st->txt));
		st->warned = true;
		if (!f->arch->make_nop)
			return 1;
	}
	if (!done)
		return 0;
	rmc_mark_bytes(f->obj, st->txt);
	r->type = f->arch->none_reloc;
	f->nops++;
	return rmc_set_reloc(f->obj, relndx, i, r);
}

static int process_sections(struct mcount_file *f)
{
	for (size_t relndx = 1; relndx < rmc_shnum(f->obj); relndx++) {
		size_t txt = code_target(f->obj, relndx);
		struct nop_state st = { .txt = txt };

		if (!txt)
			continue;
		if (is_traced_section(rmc_secname(f->obj, txt))) {
			if (record_section(f, relndx, txt) < 0)
				return -1;
		} else if (f->opts->warn_notrace || f->arch->make_nop) {
			if (for_each_mcount_call(f, relndx, nop_call, &st) < 0)
				return -1;
		}
	}
	return 0;
}

/* The checks Linux makes before it looks inside; the backend, or NULL. */
static const struct rmc_arch *check_header(const char *path, const GElf_Ehdr *eh)
{
	const struct rmc_arch *arch;

	if (eh->e_ident[EI_DATA] != ELFDATA2LSB && eh->e_ident[EI_DATA] != ELFDATA2MSB) {
		rmc_error(path, "unrecognized ELF data encoding %u", eh->e_ident[EI_DATA]);
		return NULL;
	}
	if (eh->e_ident[EI_CLASS] != ELFCLASS32 && eh->e_ident[EI_CLASS] != ELFCLASS64) {
		rmc_error(path, "unrecognized ELF class %u", eh->e_ident[EI_CLASS]);
		return NULL;
	}
	if (eh->e_type != ET_REL || eh->e_version != EV_CURRENT) {
		rmc_error(path, "not a relocatable object (ET_REL)");
		return NULL;
	}
	arch = rmc_arch_for(eh->e_machine, eh->e_ident[EI_CLASS]);
	if (!arch)
		rmc_error(path, "unsupported machine (e_machine %u, %d-bit)", eh->e_machine,
			  eh->e_ident[EI_CLASS] == ELFCLASS32 ? 32 : 64);
	return arch;
}

static int process_object(struct mcount_file *f)
{
	f->arch = check_header(f->path, rmc_obj_ehdr(f->obj));
	if (!f->arch)
		return -1;
	rmc_obj_set_arch(f->obj, f->arch);
	if (already_processed(f->obj)) {
		rmc_warn(f->path, "__mcount_loc already exists; left alone");
		return 0;
	}
	if (!has_traced_relocs(f->obj))
		return 0;
	if (add_missing_section_symbols(f) < 0 || process_sections(f) < 0)
		return -1;
	if (f->nrec && rmc_add_table(f->obj, "__mcount_loc", f->words, f->nrec, f->rela, f->rels,
				     f->nrec, f->symtab) < 0)
		return -1;
	return 0;
}

int rmc_process_file(const struct rmc_opts *opts, const char *path)
{
	struct mcount_file f = { .opts = opts, .path = path };
	int ret;

	f.obj = rmc_obj_open(path, opts->dry_run);
	if (!f.obj)
		return RMC_FAILED;
	ret = process_object(&f);
	if (ret == 0 && opts->dry_run)
		printf("%s: %zu call sites to record, %zu calls to turn into NOPs%s\n", path, f.nrec,
		       f.nops, rmc_obj_changed(f.obj) ? "" : " (unchanged)");
	if (ret == 0 && !opts->dry_run)
		ret = rmc_obj_commit(f.obj);
	rmc_obj_close(f.obj);
	free(f.words);
	free(f.rels);
	free(f.base_sym);
	free(f.base_value);
	return ret == 0 ? RMC_OK : RMC_FAILED;
}
