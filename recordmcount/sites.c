/* SPDX-License-Identifier: MIT */
/*
 * Every site of an object, for --list, --check and --format=ftpad:
 *
 * - each entry of __mcount_loc, __patchable_function_entries (several
 *   sections of that name with clang) and __ftpad_sites, resolved through
 *   its relocation to a section and an offset;
 * - each call to the mcount symbol (mcount, _mcount, __fentry__, as the
 *   drop-in mode finds them), so that a -pg object that no table lists yet
 *   has sites too.  A call that a __mcount_loc entry records is one site.
 *
 * Nothing here writes.  A malformed entry becomes a site with a problem,
 * which --check reports and --format=ftpad refuses; only what makes the
 * whole object unreadable is an error.  Everything is O(n log n) in the
 * number of sections, symbols and relocations.
 */
#include <elf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sites.h"

#define RECORD_SIZE sizeof(struct ftpad_site_record)

const char *rmc_table_name(enum rmc_table t)
{
	switch (t) {
	case RMC_TABLE_MCOUNT: return "__mcount_loc";
	case RMC_TABLE_PATCHABLE: return "__patchable_function_entries";
	case RMC_TABLE_FTPAD: return FTPAD_SITES_SECTION;
	default: return "call";
	}
}

const char *rmc_site_kind_name(enum rmc_site_kind k)
{
	static const char *const names[] = {
		[RMC_SITE_FENTRY] = "fentry", [RMC_SITE_MCOUNT] = "mcount", [RMC_SITE_NOP] = "nop",
		[RMC_SITE_PATCHABLE] = "patchable", [RMC_SITE_FTPAD] = "ftpad", [RMC_SITE_BAD] = "bad",
	};

	return names[k];
}

static void set_problem(struct rmc_site *site, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_problem(struct rmc_site *site, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(site->problem, sizeof(site->problem), fmt, ap);
	va_end(ap);
}

static int push_site(struct rmc_sites *s, const struct rmc_site *site)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		struct rmc_site *v = realloc(s->v, cap * sizeof(*v));

		if (!v) {
			rmc_error(s->path, "out of memory");
			return -1;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = *site;
	return 0;
}

const unsigned char *rmc_text(const struct rmc_sites *s, size_t sec, size_t *size)
{
	const GElf_Shdr *sh = rmc_shdr(s->obj, sec);

	*size = 0;
	if (!sh || sh->sh_type != SHT_PROGBITS)
		return NULL;
	return rmc_secbytes(s->obj, sec, size);
}

static bool is_code(const struct rmc_obj *obj, size_t sec)
{
	const GElf_Shdr *sh = rmc_shdr(obj, sec);

	return sh && sh->sh_type == SHT_PROGBITS && (sh->sh_flags & SHF_EXECINSTR);
}

/* The same names as the drop-in mode (mcount.c): any leading '.' is ignored. */
static bool is_mcount_name(const struct rmc_arch *arch, const char *name)
{
	if (name[0] == '.')
		name++;
	return strcmp(name, arch->mcount) == 0 || strcmp(name, "__fentry__") == 0 ||
	       (arch->alt_mcount && strcmp(name, arch->alt_mcount) == 0);
}

/* ---- function symbols ---- */

static int cmp_func(const void *a, const void *b)
{
	const struct rmc_func *x = a, *y = b;

	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/*
 * Rank: a global name before a weak one before a local one, then the symbol
 * table's order, so that aliases name a site the same way every time.
 */
static int index_funcs(struct rmc_sites *s)
{
	size_t n = s->symtab ? rmc_nsyms(s->obj, s->symtab) : 0, shnum = rmc_shnum(s->obj);

	s->funcs = calloc(n ? n : 1, sizeof(*s->funcs));
	if (!s->funcs) {
		rmc_error(s->path, "out of memory");
		return -1;
	}
	for (size_t i = 1; i < n; i++) {
		struct rmc_sym sym;
		unsigned bind_rank;

		if (rmc_sym(s->obj, s->symtab, i, &sym) < 0 || !sym.shndx || sym.shndx >= shnum ||
		    (sym.type != STT_FUNC && sym.type != STT_GNU_IFUNC))
			continue;
		bind_rank = sym.bind == STB_GLOBAL ? 0 : sym.bind == STB_WEAK ? 1 : 2;
		s->funcs[s->nfuncs++] = (struct rmc_func){
			.sec = sym.shndx, .value = sym.value, .name = sym.name,
			.rank = (unsigned)(bind_rank * (n + 1) + i),
		};
	}
	qsort(s->funcs, s->nfuncs, sizeof(*s->funcs), cmp_func);
	return 0;
}

/* The first function at or after (sec, off). */
static size_t lower_bound(const struct rmc_sites *s, size_t sec, uint64_t off)
{
	size_t lo = 0, hi = s->nfuncs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct rmc_func *f = &s->funcs[mid];

		if (f->sec < sec || (f->sec == sec && f->value < off))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct rmc_func *rmc_func_at(const struct rmc_sites *s, size_t sec, uint64_t off)
{
	size_t i = lower_bound(s, sec, off);

	return i < s->nfuncs && s->funcs[i].sec == sec && s->funcs[i].value == off ? &s->funcs[i]
										    : NULL;
}

const struct rmc_func *rmc_func_before(const struct rmc_sites *s, size_t sec, uint64_t off)
{
	size_t i = lower_bound(s, sec, off);

	if (i < s->nfuncs && s->funcs[i].sec == sec && s->funcs[i].value == off)
		return &s->funcs[i];
	if (i == 0 || s->funcs[i - 1].sec != sec)
		return NULL;
	return rmc_func_at(s, sec, s->funcs[i - 1].value);	/* the best-ranked alias */
}

/* ---- calls through relocations ---- */

static int collect_calls_in(struct rmc_sites *s, size_t relsec, size_t txt)
{
	size_t size, symtab = rmc_shdr(s->obj, relsec)->sh_link;
	const unsigned char *text = rmc_text(s, txt, &size);
	uint64_t prev = UINT64_MAX;

	for (size_t i = 0, n = rmc_nrelocs(s->obj, relsec); i < n; i++) {
		struct rmc_site site = { .table = RMC_TABLE_NONE, .sec = txt, .has_call = true,
					 .relsec = relsec, .relidx = i };
		struct rmc_sym sym;
		const char *name;
		bool fake;

		if (rmc_reloc(s->obj, relsec, i, &site.rel) < 0) {
			rmc_error(s->path, "%s: bad relocation %zu", rmc_secname(s->obj, relsec), i);
			return -1;
		}
		if (!site.rel.sym || rmc_sym(s->obj, symtab, site.rel.sym, &sym) < 0 ||
		    !is_mcount_name(s->arch, sym.name))
			continue;
		fake = s->arch->is_fake_mcount && s->arch->is_fake_mcount(&site.rel, prev);
		prev = site.rel.offset;
		if (fake)
			continue;
		name = sym.name[0] == '.' ? sym.name + 1 : sym.name;
		site.kind = strcmp(name, "__fentry__") == 0 ? RMC_SITE_FENTRY : RMC_SITE_MCOUNT;
		if (!(text && rmc_arch_knows_pads(s->arch) &&
		      s->arch->call_insn(text, size, &site.rel, &site.offset, &site.call_len))) {
			site.offset = site.rel.offset + (uint64_t)(int64_t)s->arch->mcount_adjust;
			set_problem(&site, "the relocation against %s at %s+%#llx is not in a call",
				    sym.name, rmc_secname(s->obj, txt),
				    (unsigned long long)site.rel.offset);
		}
		if (push_site(s, &site) < 0)
			return -1;
	}
	return 0;
}

static int collect_calls(struct rmc_sites *s)
{
	for (size_t relsec = 1; s->arch && relsec < rmc_shnum(s->obj); relsec++) {
		const GElf_Shdr *sh = rmc_shdr(s->obj, relsec);

		if ((sh->sh_type != SHT_REL && sh->sh_type != SHT_RELA) || !sh->sh_link ||
		    sh->sh_link != s->symtab || !is_code(s->obj, sh->sh_info))
			continue;
		if (collect_calls_in(s, relsec, sh->sh_info) < 0)
			return -1;
	}
	return 0;
}

/* ---- table entries ---- */

static uint64_t read_word(const unsigned char *p, size_t size, bool big_endian)
{
	uint64_t v = 0;

	for (size_t i = 0; i < size; i++)
		v |= (uint64_t)p[big_endian ? size - 1 - i : i] << (8 * i);
	return v;
}

struct table {
	size_t sec, relsec;
	const unsigned char *bytes;
	size_t size;
	bool rela, big_endian;
	struct rmc_reloc *rels;	/* sorted by offset */
	size_t nrels;
};

static int cmp_reloc(const void *a, const void *b)
{
	const struct rmc_reloc *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The relocation at @offset of the table, or NULL. */
static const struct rmc_reloc *reloc_at(const struct table *t, uint64_t offset)
{
	size_t lo = 0, hi = t->nrels;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->rels[mid].offset < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->nrels && t->rels[lo].offset == offset ? &t->rels[lo] : NULL;
}

/*
 * Where relocation @r of the table points: (section, offset) of its symbol
 * plus the addend, which a REL object keeps in the @width bytes it patches.
 */
static bool resolve(struct rmc_sites *s, const struct table *t, const struct rmc_reloc *r,
		    size_t width, size_t *sec, uint64_t *off, struct rmc_site *site)
{
	size_t symtab = rmc_shdr(s->obj, t->relsec)->sh_link;
	struct rmc_sym sym;
	int64_t addend = r->addend;

	if (rmc_sym(s->obj, symtab, r->sym, &sym) < 0) {
		set_problem(site, "the relocation names symbol %u, which does not exist", r->sym);
		return false;
	}
	if (!sym.shndx || sym.shndx >= rmc_shnum(s->obj)) {
		set_problem(site, "refers to %s, which is not defined here",
			    sym.name[0] ? sym.name : "an undefined symbol");
		return false;
	}
	if (!t->rela) {
		uint64_t v = read_word(t->bytes + r->offset, width, t->big_endian);

		addend = width == 4 ? (int64_t)(int32_t)v : (int64_t)v;
	}
	*sec = sym.shndx;
	*off = sym.value + (uint64_t)addend;
	return true;
}

/* __mcount_loc and __patchable_function_entries: one address-sized word per site. */
static int collect_words(struct rmc_sites *s, const struct table *t, enum rmc_table which)
{
	size_t word = rmc_obj_ehdr(s->obj)->e_ident[EI_CLASS] == ELFCLASS64 ? 8 : 4;

	for (size_t i = 0; i < t->nrels; i++) {
		const struct rmc_reloc *r = &t->rels[i];
		struct rmc_site site = {
			.table = which, .table_sec = t->sec, .index = r->offset / word,
			.kind = which == RMC_TABLE_MCOUNT ? RMC_SITE_BAD : RMC_SITE_PATCHABLE,
		};

		if (r->offset % word || r->offset + word > t->size)
			set_problem(&site, "a relocation at +%#llx is not on an entry",
				    (unsigned long long)r->offset);
		else if (resolve(s, t, r, word, &site.sec, &site.offset, &site) &&
			 !is_code(s->obj, site.sec))
			set_problem(&site, "points into %s, which is not executable",
				    rmc_secname(s->obj, site.sec));
		if (site.problem[0])
			site.kind = RMC_SITE_BAD;
		if (push_site(s, &site) < 0)
			return -1;
	}
	return 0;
}

/* One address field of an ftpad record: 0 with no relocation means "none". */
static bool record_field(struct rmc_sites *s, const struct table *t, uint64_t at, const char *what,
			 bool optional, size_t *sec, uint64_t *off, struct rmc_site *site)
{
	const struct rmc_reloc *r = reloc_at(t, at);

	if (!r) {
		if (!optional || read_word(t->bytes + at, 4, t->big_endian))
			set_problem(site, "the record's %s field has no relocation", what);
		*sec = 0;
		return false;
	}
	if (!resolve(s, t, r, 4, sec, off, site))
		return false;
	return true;
}

static void read_record_name(struct rmc_sites *s, size_t sec, uint64_t off, struct rmc_site *site)
{
	size_t size;
	const unsigned char *p = rmc_shdr(s->obj, sec) && rmc_shdr(s->obj, sec)->sh_type == SHT_PROGBITS
					 ? rmc_secbytes(s->obj, sec, &size) : NULL;

	if (!p || off >= size || !memchr(p + off, 0, size - off))
		set_problem(site, "the record's name is not a string inside %s", rmc_secname(s->obj, sec));
	else
		site->rec.name = (const char *)p + off;
}

static void decode_record(struct rmc_sites *s, const struct table *t, uint64_t at, struct rmc_site *site)
{
	const unsigned char *p = t->bytes + at;
	struct rmc_record *rec = &site->rec;
	size_t esec = 0, ssec = 0, osec = 0, nsec = 0;
	uint64_t name = 0;

	rec->version = p[16], rec->arch = p[17], rec->before = p[18], rec->after = p[19];
	rec->site_len = p[20], rec->kind = p[21];
	rec->flags = (uint16_t)read_word(p + 22, 2, t->big_endian);
	if (!record_field(s, t, at, "entry", false, &esec, &rec->entry, site) ||
	    !record_field(s, t, at + 4, "site", false, &ssec, &rec->site, site))
		return;
	rec->has_ops = record_field(s, t, at + 8, "ops", true, &osec, &rec->ops, site);
	if (site->problem[0])
		return;
	if (record_field(s, t, at + 12, "name", true, &nsec, &name, site))
		read_record_name(s, nsec, name, site);
	if (site->problem[0])
		return;
	if (ssec != esec || (rec->has_ops && osec != esec)) {
		set_problem(site, "the entry, the site and the ops slot are not in one section");
		return;
	}
	site->sec = esec;
	site->offset = rec->site;
	if (!is_code(s->obj, esec))
		set_problem(site, "points into %s, which is not executable", rmc_secname(s->obj, esec));
}

static int collect_records(struct rmc_sites *s, const struct table *t)
{
	if (t->size % RECORD_SIZE) {
		struct rmc_site site = { .table = RMC_TABLE_FTPAD, .table_sec = t->sec,
					 .kind = RMC_SITE_BAD };

		set_problem(&site, "%zu bytes: not a whole number of %zu-byte records", t->size,
			    RECORD_SIZE);
		return push_site(s, &site);
	}
	for (uint64_t at = 0; at < t->size; at += RECORD_SIZE) {
		struct rmc_site site = { .table = RMC_TABLE_FTPAD, .table_sec = t->sec,
					 .index = at / RECORD_SIZE, .kind = RMC_SITE_FTPAD };

		if (t->bytes[at + 16] == 0)	/* filler */
			continue;
		decode_record(s, t, at, &site);
		if (site.problem[0]) {
			site.kind = RMC_SITE_BAD;
			site.sec = 0;
		}
		if (push_site(s, &site) < 0)
			return -1;
	}
	return 0;
}

static enum rmc_table table_of(const char *name)
{
	if (strcmp(name, "__mcount_loc") == 0)
		return RMC_TABLE_MCOUNT;
	if (strcmp(name, "__patchable_function_entries") == 0)
		return RMC_TABLE_PATCHABLE;
	if (strcmp(name, FTPAD_SITES_SECTION) == 0)
		return RMC_TABLE_FTPAD;
	return RMC_TABLE_NONE;
}

static int read_table_relocs(struct rmc_sites *s, struct table *t)
{
	size_t n = rmc_nrelocs(s->obj, t->relsec);

	t->rels = calloc(n ? n : 1, sizeof(*t->rels));
	if (!t->rels) {
		rmc_error(s->path, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (rmc_reloc(s->obj, t->relsec, i, &t->rels[i]) < 0) {
			rmc_error(s->path, "%s: bad relocation %zu", rmc_secname(s->obj, t->relsec), i);
			return -1;
		}
	t->nrels = n;
	qsort(t->rels, n, sizeof(*t->rels), cmp_reloc);
	return 0;
}

static int collect_tables(struct rmc_sites *s)
{
	size_t shnum = rmc_shnum(s->obj);
	size_t *rel_of = calloc(shnum ? shnum : 1, sizeof(*rel_of));	/* table -> its relocations */
	bool big_endian = rmc_obj_ehdr(s->obj)->e_ident[EI_DATA] == ELFDATA2MSB;
	int ret = -1;

	if (!rel_of) {
		rmc_error(s->path, "out of memory");
		return -1;
	}
	for (size_t i = 1; i < shnum; i++) {
		const GElf_Shdr *sh = rmc_shdr(s->obj, i);

		if ((sh->sh_type == SHT_REL || sh->sh_type == SHT_RELA) && sh->sh_info < shnum &&
		    sh->sh_link == s->symtab && s->symtab)
			rel_of[sh->sh_info] = i;
	}
	for (size_t i = 1; i < shnum; i++) {
		enum rmc_table which = table_of(rmc_secname(s->obj, i));
		struct table t = { .sec = i, .relsec = rel_of[i], .big_endian = big_endian };

		if (which == RMC_TABLE_NONE || rmc_shdr(s->obj, i)->sh_type != SHT_PROGBITS)
			continue;
		t.bytes = rmc_secbytes(s->obj, i, &t.size);
		if (!t.bytes || !t.relsec)	/* empty, or nothing relocates it: no sites */
			continue;
		t.rela = rmc_shdr(s->obj, t.relsec)->sh_type == SHT_RELA;
		ret = read_table_relocs(s, &t);
		if (ret == 0)
			ret = which == RMC_TABLE_FTPAD ? collect_records(s, &t)
						       : collect_words(s, &t, which);
		free(t.rels);
		if (ret < 0)
			goto out;
	}
	ret = 0;
out:
	free(rel_of);
	return ret;
}

/* ---- putting it together ---- */

static int cmp_site(const void *a, const void *b)
{
	const struct rmc_site *x = a, *y = b;

	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	if (x->table != y->table)	/* a table's entry before the call it records */
		return x->table > y->table ? -1 : 1;
	if (x->table_sec != y->table_sec)
		return x->table_sec < y->table_sec ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

static void take_call(struct rmc_site *entry, const struct rmc_site *call)
{
	entry->has_call = true;
	entry->relsec = call->relsec;
	entry->relidx = call->relidx;
	entry->rel = call->rel;
	entry->call_len = call->call_len;
	entry->kind = call->kind;
	memcpy(entry->problem, call->problem, sizeof(entry->problem));
}

/* A __mcount_loc entry without a call: a NOP site, or wrong. */
static void classify_uncalled(struct rmc_sites *s, struct rmc_site *site)
{
	size_t size;
	const unsigned char *text = rmc_text(s, site->sec, &size);
	char hex[3 * 6 + 1] = "", *h = hex;

	if (site->offset >= size) {
		set_problem(site, "lies outside %s", rmc_secname(s->obj, site->sec));
		return;
	}
	if (rmc_arch_knows_pads(s->arch) && s->arch->is_nop_site(text + site->offset, size - site->offset)) {
		site->kind = RMC_SITE_NOP;
		return;
	}
	for (size_t i = 0; i < 6 && site->offset + i < size; i++)
		h += snprintf(h, 4, "%s%02x", i ? " " : "", text[site->offset + i]);
	set_problem(site, "neither a call to %s or __fentry__ nor a NOP: %s",
		    s->arch ? s->arch->mcount : "mcount", hex);
}

/* Merge each call into the __mcount_loc entry that records it; sort. */
static void merge(struct rmc_sites *s)
{
	size_t out = 0;

	if (s->n > 1)	/* qsort(NULL, 0, ...) is undefined */
		qsort(s->v, s->n, sizeof(*s->v), cmp_site);
	for (size_t i = 0; i < s->n; i++) {
		struct rmc_site *cur = &s->v[i];

		if (cur->table == RMC_TABLE_NONE && out > 0 && s->v[out - 1].sec == cur->sec &&
		    s->v[out - 1].offset == cur->offset && cur->sec) {
			struct rmc_site *prev = &s->v[out - 1];

			if (prev->table == RMC_TABLE_MCOUNT && !prev->has_call &&
			    prev->kind == RMC_SITE_BAD && !prev->problem[0])
				take_call(prev, cur);
			if (prev->table == RMC_TABLE_MCOUNT || prev->table == RMC_TABLE_NONE)
				continue;	/* recorded already, or a second relocation of one call */
		}
		s->v[out++] = *cur;
	}
	s->n = out;
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].table == RMC_TABLE_MCOUNT && !s->v[i].has_call && !s->v[i].problem[0])
			classify_uncalled(s, &s->v[i]);
}

struct rmc_sites *rmc_sites_collect(struct rmc_obj *obj)
{
	struct rmc_sites *s = calloc(1, sizeof(*s));
	const GElf_Ehdr *eh = rmc_obj_ehdr(obj);

	if (!s) {
		rmc_error(rmc_obj_path(obj), "out of memory");
		return NULL;
	}
	s->obj = obj;
	s->path = rmc_obj_path(obj);
	s->arch = rmc_arch_for(eh->e_machine, eh->e_ident[EI_CLASS]);
	rmc_obj_set_arch(obj, s->arch);	/* relocations in the machine's r_info layout */
	for (size_t i = 1; i < rmc_shnum(obj) && !s->symtab; i++)
		if (rmc_shdr(obj, i)->sh_type == SHT_SYMTAB)
			s->symtab = i;
	if (index_funcs(s) < 0 || collect_calls(s) < 0 || collect_tables(s) < 0) {
		rmc_sites_free(s);
		return NULL;
	}
	merge(s);
	return s;
}

void rmc_sites_free(struct rmc_sites *s)
{
	if (!s)
		return;
	free(s->v);
	free(s->funcs);
	free(s);
}

/* ---- a function's pad ---- */

static int fail(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
	return -1;
}

/* The function @start belongs to when it is its entry or right behind its landing pad. */
static const struct rmc_func *entry_at(const struct rmc_sites *s, size_t sec, uint64_t start,
				       const unsigned char *text, size_t size, struct rmc_pad_layout *out)
{
	const struct rmc_func *f = rmc_func_at(s, sec, start);
	size_t landing;

	out->landing = 0;
	if (f)
		return f;
	f = rmc_func_before(s, sec, start);
	if (!f || f->value >= size)
		return NULL;
	landing = s->arch->landing_pad(text + f->value, size - f->value, &out->landing_flag);
	if (!landing || f->value + landing != start)
		return NULL;
	out->landing = landing;
	return f;
}

/* Bytes of NOPs from @at, stopping at the next function. */
static uint64_t nops_from(const struct rmc_sites *s, size_t sec, const unsigned char *text, size_t size,
			  uint64_t at)
{
	uint64_t p = at;

	while (p < size) {
		size_t n = s->arch->nop_len(text + p, size - p);

		if (!n || (p > at && rmc_func_at(s, sec, p)))
			break;
		p += n;
	}
	return p - at;
}

/* A patchable area's entry: the first function where its NOPs stop. */
static const struct rmc_func *entry_after(const struct rmc_sites *s, size_t sec, uint64_t start,
					  const unsigned char *text, size_t size)
{
	uint64_t p = start;

	while (p < size) {
		const struct rmc_func *f = rmc_func_at(s, sec, p);
		size_t n;

		if (f)
			return f;
		n = s->arch->nop_len(text + p, size - p);
		if (!n)
			break;
		p += n;
	}
	return rmc_func_at(s, sec, p);
}

int rmc_pad_layout(const struct rmc_sites *s, const struct rmc_site *site, struct rmc_pad_layout *out,
		   char *why, size_t whysize)
{
	size_t size;
	const unsigned char *text = rmc_text(s, site->sec, &size);
	const char *secname = rmc_secname(s->obj, site->sec);
	const struct rmc_func *f;
	unsigned long long at = site->offset;

	memset(out, 0, sizeof(*out));
	if (!rmc_arch_knows_pads(s->arch))
		return fail(why, whysize, "no instruction knowledge for this machine");
	if (!text || site->offset >= size)
		return fail(why, whysize, "%s+%#llx lies outside its section", secname, at);
	f = entry_at(s, site->sec, site->offset, text, size, out);
	if (site->kind != RMC_SITE_PATCHABLE) {	/* a call, or a NOP that was one */
		if (!f) {
			const struct rmc_func *in = rmc_func_before(s, site->sec, site->offset);

			if (in)
				return fail(why, whysize,
					    "the %s site at %s+%#llx is not at its function's entry",
					    rmc_site_kind_name(site->kind), in->name,
					    (unsigned long long)(site->offset - in->value));
			return fail(why, whysize, "no function starts at %s+%#llx", secname, at);
		}
		out->after = site->kind == RMC_SITE_NOP
				     ? s->arch->nop_len(text + site->offset, size - site->offset)
				     : site->call_len;
	} else {
		if (!f) {
			f = entry_after(s, site->sec, site->offset, text, size);
			if (!f)
				return fail(why, whysize,
					    "no function starts at the end of the NOPs at %s+%#llx",
					    secname, at);
			out->pre = f->value - site->offset;
		}
		if (!out->landing)	/* the entry itself, or the area ended there */
			out->landing = s->arch->landing_pad(text + f->value, size - f->value,
							   &out->landing_flag);
		out->after = nops_from(s, site->sec, text, size, f->value + out->landing);
		if (!out->after)
			return fail(why, whysize, "%s has no NOP after its entry", f->name);
	}
	out->func = f;
	out->entry = f->value;
	if (!out->landing)
		out->landing_flag = 0;
	return 0;
}
