/* SPDX-License-Identifier: MIT */
/*
 * --format=ftpad: turn the pads other compilers leave into what the ftpad
 * GCC plugin emits, so that libftpad can patch them.
 *
 * Sites come from sites.c: __patchable_function_entries (gcc or clang
 * -fpatchable-function-entry=N,M), calls to __fentry__ (-pg -mfentry), and
 * __mcount_loc entries at NOPs (-mrecord-mcount -mnop-mcount).  For each
 * function:
 * - the site becomes what libftpad patches (arch/<arch>.c): on x86_64 one
 *   5-byte NOP, never several small ones, and `call __fentry__` a 5-byte
 *   NOP with its relocation R_X86_64_NONE; on aarch64 the second of two
 *   NOPs, libftpad writing `mov x9, x30` into the first;
 * - 8 bytes of NOPs right before an 8-aligned entry become the ops slot;
 * - a record goes into __ftpad_sites (docs/format.md).
 *
 * The records follow the GCC plugin's rules (docs/design.md "Records and
 * linkers"): a __ftpad_sites section SHF_LINK_ORDER to the text section
 * and in its COMDAT group, and an R_*_NONE relocation from the text to its
 * records, so that bfd, gold and lld keep a record exactly when they keep
 * the function.  One record section per text section, not per function:
 * the functions of one section are kept or dropped together.  Names go to
 * __ftpad_names, one section per COMDAT group.
 *
 * The tables read are emptied and marked SHF_EXCLUDE: GCC's single
 * __patchable_function_entries section (PR110729) would otherwise make gold
 * and lld refuse COMDAT programs, and its absolute addresses would need a
 * dynamic relocation each.
 */
#include <elf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sites.h"

#define RECORD_SIZE sizeof(struct ftpad_site_record)
#define SITES_REL_NAME ".rela" FTPAD_SITES_SECTION	/* FTPAD_SITES_SECTION is its suffix */
#define RETIRED ".ftpad.retired"	/* what the tables read become */

/* One function's record. */
struct plan {
	size_t sec;
	uint64_t entry, site, ops;
	bool has_ops;
	const char *name;
	uint8_t before, after;
	uint16_t flags;
	const struct rmc_site *from;	/* the site it was made from */
};

/* What is written for one text section that has records. */
struct text_out {
	size_t sec, group;
	size_t first, nplans;		/* its plans: plans[first .. first + nplans) */
	size_t records, records_rel, new_rel;	/* the sections added; new_rel 0 if it had one */
	size_t names;			/* index into names[] */
	uint32_t text_sym, records_sym;	/* section symbols of the text and its records */
};

/* One __ftpad_names section: per COMDAT group, and one for the rest. */
struct names_out {
	size_t group, sec;
	uint32_t sym;			/* its section symbol */
	char *buf;
	size_t size, cap;
};

struct ftpad_file {
	const struct rmc_opts *opts;
	const char *path;
	struct rmc_obj *obj;
	struct rmc_sites *s;
	const struct rmc_arch *arch;	/* the machine's backend, which knows its pads */
	struct plan *plans;
	size_t nplans;
	size_t fixups;			/* code ranges rewritten */
	size_t *group_of, *rel_of, *secsym;	/* per section of the object as it came */
	struct text_out *texts;
	size_t ntexts;
	struct names_out *names;
	size_t nnames;
	uint64_t *name_off;		/* per plan: its name's offset in its names section */
};

static int ftpad_error(struct ftpad_file *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int ftpad_error(struct ftpad_file *f, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rmc_error(f->path, "--format=ftpad: %s", msg);
	return -1;
}

static bool has_section(const struct rmc_obj *obj, const char *name)
{
	for (size_t i = 1; i < rmc_shnum(obj); i++)
		if (strcmp(rmc_secname(obj, i), name) == 0)
			return true;
	return false;
}

/* ---- planning: one record per function, and the code fixups ---- */

/* The site's table entry or call, for messages: "__patchable_function_entries[2]". */
static const char *site_source(const struct rmc_site *site, char *buf, size_t size)
{
	if (site->table == RMC_TABLE_NONE)
		snprintf(buf, size, "the call at +%#llx", (unsigned long long)site->offset);
	else
		snprintf(buf, size, "%s[%zu]", rmc_table_name(site->table), site->index);
	return buf;
}

static int refuse_site(struct ftpad_file *f, const struct rmc_site *site)
{
	const struct rmc_func *fn = site->sec ? rmc_func_before(f->s, site->sec, site->offset) : NULL;
	char src[64];

	site_source(site, src, sizeof(src));
	if (site->kind == RMC_SITE_MCOUNT)
		return ftpad_error(f, "%s: the call to %s at %s+%#llx follows the prologue (-pg without "
				   "-mfentry); libftpad patches sites at a function's entry only: compile "
				   "with -pg -mfentry (x86_64) or -fpatchable-function-entry=N[,M]",
				   fn ? fn->name : "?", f->arch->mcount, rmc_secname(f->obj, site->sec),
				   (unsigned long long)site->offset);
	return ftpad_error(f, "%s: %s", src, site->problem[0] ? site->problem : "not a usable site");
}

/* The NOP area behind the landing pad becomes the site. */
static int plan_site(struct ftpad_file *f, struct plan *p, unsigned char *text, uint64_t area,
		     uint64_t len)
{
	bool changed;

	if (len < f->arch->min_after)
		return ftpad_error(f, "%s: %llu bytes of NOPs after its entry; a libftpad site needs %u "
				   "(-fpatchable-function-entry=N,M with N-M >= %u)", p->name,
				   (unsigned long long)len, f->arch->min_after,
				   f->arch->min_after / f->arch->unit);
	if (len / f->arch->unit > 255)
		return ftpad_error(f, "%s: %llu bytes of NOPs after its entry; a record counts at most "
				   "255 units", p->name, (unsigned long long)len);
	p->site = area + f->arch->make_site(text + area, len, &changed);
	p->after = (uint8_t)(len / f->arch->unit);
	f->fixups += changed;
	return 0;
}

/* NOPs before an 8-aligned entry (in any link) become the ops slot. */
static int plan_slot(struct ftpad_file *f, struct plan *p, unsigned char *text, uint64_t start,
		     uint64_t pre)
{
	const GElf_Shdr *sh = rmc_shdr(f->obj, p->sec);
	uint64_t at = start, before = pre;
	unsigned char old[FTPAD_PAD_SLOT_LEN];

	p->has_ops = pre >= FTPAD_PAD_SLOT_LEN && p->entry % FTPAD_PAD_SLOT_LEN == 0 &&
		     sh->sh_addralign >= FTPAD_PAD_SLOT_LEN;
	if (p->has_ops)
		before -= FTPAD_PAD_SLOT_LEN;
	if (before / f->arch->unit > 255)
		return ftpad_error(f, "%s: %llu bytes of NOPs before its entry; a record counts at most "
				   "255 units", p->name, (unsigned long long)pre);
	p->before = (uint8_t)(before / f->arch->unit);
	if (!p->has_ops)
		return 0;
	p->ops = p->entry - FTPAD_PAD_SLOT_LEN;
	/* Before the slot, NOPs must end exactly at it: tidy them if one straddles it. */
	for (size_t n = 1; at < p->ops && n; at += n)
		n = f->arch->nop_len(text + at, p->entry - at);
	if (at != p->ops) {
		f->arch->fill(text + start, p->ops - start);
		f->fixups++;
	}
	memcpy(old, text + p->ops, FTPAD_PAD_SLOT_LEN);
	f->arch->make_slot(text + p->ops);
	f->fixups += memcmp(old, text + p->ops, FTPAD_PAD_SLOT_LEN) != 0;
	return 0;
}

static int plan_function(struct ftpad_file *f, const struct rmc_site *site, struct plan *p)
{
	struct rmc_pad_layout pad;
	size_t size;
	unsigned char *text = rmc_secbytes(f->obj, site->sec, &size);
	uint64_t area;
	char why[160];

	if (site->kind == RMC_SITE_MCOUNT || site->kind == RMC_SITE_BAD || site->problem[0])
		return refuse_site(f, site);
	if (rmc_pad_layout(f->s, site, &pad, why, sizeof(why)) < 0)
		return ftpad_error(f, "%s", why);
	*p = (struct plan){ .sec = site->sec, .entry = pad.entry, .name = pad.func->name,
			    .flags = pad.landing_flag, .from = site };
	area = pad.entry + pad.landing;
	if (site->kind == RMC_SITE_FENTRY) {
		if (!f->arch->disable_call || !f->arch->disable_call(text + area, site->call_len))
			return ftpad_error(f, "%s: cannot turn its call to __fentry__ into a NOP", p->name);
		f->fixups++;
	}
	if (plan_site(f, p, text, area, pad.after) < 0)
		return -1;
	return plan_slot(f, p, text, site->offset < pad.entry ? site->offset : pad.entry, pad.pre);
}

static int cmp_plan(const void *a, const void *b)
{
	const struct plan *x = a, *y = b;

	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	return x->entry < y->entry ? -1 : x->entry > y->entry;
}

static int plan_all(struct ftpad_file *f)
{
	f->plans = calloc(f->s->n ? f->s->n : 1, sizeof(*f->plans));
	if (!f->plans)
		return ftpad_error(f, "out of memory");
	for (size_t i = 0; i < f->s->n; i++)
		if (plan_function(f, &f->s->v[i], &f->plans[f->nplans++]) < 0)
			return -1;
	qsort(f->plans, f->nplans, sizeof(*f->plans), cmp_plan);
	for (size_t i = 1; i < f->nplans; i++)
		if (f->plans[i].sec == f->plans[i - 1].sec && f->plans[i].entry == f->plans[i - 1].entry)
			return ftpad_error(f, "%s has two sites (%s and %s): compile it with only one of "
					   "-pg -mfentry and -fpatchable-function-entry", f->plans[i].name,
					   rmc_table_name(f->plans[i - 1].from->table),
					   rmc_table_name(f->plans[i].from->table));
	return 0;
}

/* ---- what the object holds already ---- */

/* Per section: its COMDAT group, its relocation section, a section symbol. */
static int index_object(struct ftpad_file *f)
{
	size_t shnum = rmc_shnum(f->obj), symtab = f->s->symtab;

	f->group_of = calloc(shnum, sizeof(*f->group_of));
	f->rel_of = calloc(shnum, sizeof(*f->rel_of));
	f->secsym = calloc(shnum, sizeof(*f->secsym));
	if (!f->group_of || !f->rel_of || !f->secsym)
		return ftpad_error(f, "out of memory");
	for (size_t i = 1; i < shnum; i++) {
		const GElf_Shdr *sh = rmc_shdr(f->obj, i);
		size_t size;
		const unsigned char *words;

		if ((sh->sh_type == SHT_REL || sh->sh_type == SHT_RELA) && sh->sh_link == symtab &&
		    sh->sh_info < shnum)
			f->rel_of[sh->sh_info] = i;
		if (sh->sh_type != SHT_GROUP || !(words = rmc_secbytes(f->obj, i, &size)))
			continue;
		for (size_t w = 4; w + 4 <= size; w += 4) {	/* word 0 holds the flags */
			uint32_t member;

			memcpy(&member, words + w, 4);	/* ELF_T_WORD: host order in memory */
			if (member < shnum)
				f->group_of[member] = i;
		}
	}
	for (size_t i = 1, n = rmc_nsyms(f->obj, symtab); i < n; i++) {
		struct rmc_sym sym;

		if (rmc_sym(f->obj, symtab, i, &sym) == 0 && sym.type == STT_SECTION && sym.shndx &&
		    sym.shndx < shnum && !f->secsym[sym.shndx] && sym.bind == STB_LOCAL)
			f->secsym[sym.shndx] = i;
	}
	return 0;
}

/* ---- building the new sections ---- */

static struct names_out *names_for(struct ftpad_file *f, size_t group)
{
	struct names_out *grown;

	for (size_t i = 0; i < f->nnames; i++)
		if (f->names[i].group == group)
			return &f->names[i];
	grown = realloc(f->names, (f->nnames + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	f->names = grown;
	f->names[f->nnames] = (struct names_out){ .group = group };
	return &f->names[f->nnames++];
}

static int add_name(struct names_out *n, const char *name, uint64_t *off)
{
	size_t len = strlen(name) + 1;

	if (n->size + len > n->cap) {
		size_t cap = 2 * (n->size + len);
		char *buf = realloc(n->buf, cap);

		if (!buf)
			return -1;
		n->buf = buf;
		n->cap = cap;
	}
	memcpy(n->buf + n->size, name, len);
	*off = n->size;
	n->size += len;
	return 0;
}

/* Group the sorted plans by text section; collect names per group. */
static int gather(struct ftpad_file *f)
{
	f->texts = calloc(f->nplans, sizeof(*f->texts));
	f->name_off = calloc(f->nplans, sizeof(*f->name_off));
	if (!f->texts || !f->name_off)
		return ftpad_error(f, "out of memory");
	for (size_t i = 0; i < f->nplans; i++) {
		struct text_out *t = f->ntexts ? &f->texts[f->ntexts - 1] : NULL;
		struct names_out *names;

		if (!t || t->sec != f->plans[i].sec) {
			t = &f->texts[f->ntexts++];
			*t = (struct text_out){ .sec = f->plans[i].sec, .first = i,
						.group = f->group_of[f->plans[i].sec] };
			names = names_for(f, t->group);
			if (!names)
				return ftpad_error(f, "out of memory");
			t->names = (size_t)(names - f->names);
		}
		t->nplans++;
		if (add_name(&f->names[t->names], f->plans[i].name, &f->name_off[i]) < 0)
			return ftpad_error(f, "out of memory");
	}
	return 0;
}

static void put_le16(unsigned char *p, uint16_t v)
{
	p[0] = v & 0xff;
	p[1] = v >> 8;
}

/* The records of one text section; the address fields come from relocations. */
static unsigned char *record_bytes(struct ftpad_file *f, const struct text_out *t)
{
	unsigned char *buf = calloc(t->nplans, RECORD_SIZE);

	for (size_t i = 0; buf && i < t->nplans; i++) {
		const struct plan *p = &f->plans[t->first + i];
		unsigned char *r = buf + i * RECORD_SIZE;

		r[16] = FTPAD_SITE_VERSION_ENTRY;
		r[17] = f->arch->ftpad_arch;
		r[18] = p->before;
		r[19] = p->after;
		r[20] = (unsigned char)f->arch->site_len;
		put_le16(r + 22, p->flags);
	}
	return buf;
}

enum { NAME_SITES_REL, NAME_NAMES, NAME_FIXED };

/*
 * ".rela__ftpad_sites", "__ftpad_names" and a ".rela<text>" per text without
 * relocations, into .shstrtab in one go.  *@offsets (NAME_* first, then
 * the .rela<text> names in text order) is freed by the caller; NULL after
 * an error.
 */
static int add_section_names(struct ftpad_file *f, uint64_t **offsets)
{
	size_t n = NAME_FIXED;
	const char **names = calloc(NAME_FIXED + f->ntexts, sizeof(*names));
	char **owned = calloc(f->ntexts + 1, sizeof(*owned));
	int ret = -1;

	*offsets = calloc(NAME_FIXED + f->ntexts, sizeof(**offsets));
	if (!names || !owned || !*offsets) {
		ftpad_error(f, "out of memory");
		goto out;
	}
	names[NAME_SITES_REL] = SITES_REL_NAME;
	names[NAME_NAMES] = FTPAD_NAMES_SECTION;
	for (size_t i = 0; i < f->ntexts; i++) {
		const char *sec = rmc_secname(f->obj, f->texts[i].sec);
		size_t len = strlen(sec) + sizeof(".rela");

		if (f->rel_of[f->texts[i].sec])
			continue;
		owned[i] = malloc(len);
		if (!owned[i]) {
			ftpad_error(f, "out of memory");
			goto out;
		}
		snprintf(owned[i], len, ".rela%s", sec);
		names[n++] = owned[i];
	}
	ret = rmc_add_shstrs(f->obj, names, n, *offsets);	/* reports its own errors */
out:
	if (ret < 0) {
		free(*offsets);
		*offsets = NULL;
	}
	for (size_t i = 0; owned && i < f->ntexts; i++)
		free(owned[i]);
	free(owned);
	free(names);
	return ret;
}

/* A new section, and its place in @group. */
static size_t new_section(struct ftpad_file *f, GElf_Shdr sh, size_t group, const void *data,
			  size_t size)
{
	if (group)
		sh.sh_flags |= SHF_GROUP;
	return rmc_new_section(f->obj, &sh, data, size);
}

static int add_sections(struct ftpad_file *f)
{
	uint64_t *off;
	size_t next_rel_name = NAME_FIXED;

	if (add_section_names(f, &off) < 0)
		return -1;
	for (size_t i = 0; i < f->ntexts; i++) {
		struct text_out *t = &f->texts[i];
		unsigned char *records = record_bytes(f, t);
		GElf_Shdr rec = { .sh_name = (GElf_Word)(off[NAME_SITES_REL] + strlen(".rela")),
				  .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC | SHF_LINK_ORDER,
				  .sh_link = (GElf_Word)t->sec, .sh_addralign = FTPAD_SITE_ALIGN };
		GElf_Shdr rel = { .sh_name = (GElf_Word)off[NAME_SITES_REL], .sh_type = SHT_RELA,
				  .sh_flags = SHF_INFO_LINK, .sh_link = (GElf_Word)f->s->symtab,
				  .sh_addralign = 8,
				  .sh_entsize = sizeof(Elf64_Rela) };	/* both machines are ELF64 */

		if (!records) {
			free(off);
			return ftpad_error(f, "out of memory");
		}
		t->records = new_section(f, rec, t->group, records, t->nplans * RECORD_SIZE);
		free(records);
		rel.sh_info = (GElf_Word)t->records;
		t->records_rel = t->records ? new_section(f, rel, t->group, NULL, 0) : 0;
		if (t->records_rel && !f->rel_of[t->sec]) {
			rel.sh_name = (GElf_Word)off[next_rel_name++];
			rel.sh_info = (GElf_Word)t->sec;
			t->new_rel = new_section(f, rel, t->group, NULL, 0);
			f->rel_of[t->sec] = t->new_rel;
		}
		if (!t->records || !t->records_rel || (!t->new_rel && !f->rel_of[t->sec])) {
			free(off);
			return -1;
		}
	}
	for (size_t i = 0; i < f->nnames; i++) {
		GElf_Shdr names = { .sh_name = (GElf_Word)off[NAME_NAMES], .sh_type = SHT_PROGBITS,
				    .sh_flags = SHF_ALLOC, .sh_addralign = 1 };

		f->names[i].sec = new_section(f, names, f->names[i].group, f->names[i].buf,
					      f->names[i].size);
		if (!f->names[i].sec) {
			free(off);
			return -1;
		}
	}
	free(off);
	return 0;
}

/* Every new section of a COMDAT group joins it: they stay or go with its text. */
static int join_groups(struct ftpad_file *f)
{
	size_t *members = calloc(3 * f->ntexts + f->nnames + 1, sizeof(*members));
	int ret = 0;

	if (!members)
		return ftpad_error(f, "out of memory");
	for (size_t g = 0; g < f->nnames && ret == 0; g++) {
		size_t group = f->names[g].group, n = 0;

		if (!group)
			continue;
		for (size_t i = 0; i < f->ntexts; i++) {
			const struct text_out *t = &f->texts[i];

			if (t->group != group)
				continue;
			members[n++] = t->records;
			members[n++] = t->records_rel;
			if (t->new_rel)
				members[n++] = t->new_rel;
		}
		members[n++] = f->names[g].sec;
		ret = rmc_group_add(f->obj, group, members, n);
	}
	free(members);
	return ret;
}

/* Section symbols for the texts that lack one, the records and the names: one batch. */
static int add_symbols(struct ftpad_file *f)
{
	size_t n = 0, *secs = calloc(2 * f->ntexts + f->nnames + 1, sizeof(*secs)), *idx;
	int ret;

	idx = calloc(2 * f->ntexts + f->nnames + 1, sizeof(*idx));
	if (!secs || !idx) {
		free(secs);
		free(idx);
		return ftpad_error(f, "out of memory");
	}
	for (size_t i = 0; i < f->ntexts; i++) {
		if (!f->secsym[f->texts[i].sec])
			secs[n++] = f->texts[i].sec;
		secs[n++] = f->texts[i].records;
	}
	for (size_t i = 0; i < f->nnames; i++)
		secs[n++] = f->names[i].sec;
	ret = rmc_add_section_syms(f->obj, f->s->symtab, secs, n, idx);
	n = 0;	/* in the order secs[] was filled */
	for (size_t i = 0; ret == 0 && i < f->ntexts; i++) {
		struct text_out *t = &f->texts[i];

		t->text_sym = (uint32_t)(f->secsym[t->sec] ? f->secsym[t->sec] : idx[n++]);
		t->records_sym = (uint32_t)idx[n++];
	}
	for (size_t i = 0; ret == 0 && i < f->nnames; i++)
		f->names[i].sym = (uint32_t)idx[n++];
	free(secs);
	free(idx);
	return ret;
}

/* entry, site, ops and name of each record: PC-relative, from the field itself. */
static int write_record_relocs(struct ftpad_file *f, const struct text_out *t)
{
	struct rmc_reloc *rels = calloc(4 * t->nplans, sizeof(*rels));
	uint32_t text_sym = t->text_sym, names_sym = f->names[t->names].sym;
	size_t n = 0;
	int ret;

	if (!rels)
		return ftpad_error(f, "out of memory");
	for (size_t i = 0; i < t->nplans; i++) {
		const struct plan *p = &f->plans[t->first + i];
		uint64_t at = i * RECORD_SIZE;
		uint32_t pc32 = f->arch->pc32_reloc;

		rels[n++] = (struct rmc_reloc){ at, text_sym, pc32, (int64_t)p->entry };
		rels[n++] = (struct rmc_reloc){ at + 4, text_sym, pc32, (int64_t)p->site };
		if (p->has_ops)
			rels[n++] = (struct rmc_reloc){ at + 8, text_sym, pc32, (int64_t)p->ops };
		rels[n++] = (struct rmc_reloc){ at + 12, names_sym, pc32,
						(int64_t)f->name_off[t->first + i] };
	}
	ret = rmc_append_relocs(f->obj, t->records_rel, rels, n);
	free(rels);
	return ret;
}

/*
 * The calls to __fentry__ that became NOPs: R_*_NONE against nothing, but
 * the text's first such relocation (or a new one) names its records, so
 * that gold, which ignores SHF_LINK_ORDER when it collects garbage, keeps
 * them with the text.
 */
static int write_text_relocs(struct ftpad_file *f, const struct text_out *t)
{
	struct rmc_reloc keep = { .offset = f->plans[t->first].entry,
				  .sym = t->records_sym, .type = f->arch->none_reloc };
	bool referenced = false;

	for (size_t i = 0; i < t->nplans; i++) {
		const struct rmc_site *site = f->plans[t->first + i].from;
		struct rmc_reloc r;

		if (site->kind != RMC_SITE_FENTRY || !site->has_call)
			continue;
		r = (struct rmc_reloc){ .offset = site->rel.offset, .type = f->arch->none_reloc };
		if (!referenced)
			r.sym = keep.sym;
		referenced = true;
		if (rmc_set_reloc(f->obj, site->relsec, site->relidx, &r) < 0)
			return -1;
	}
	return referenced ? 0 : rmc_append_relocs(f->obj, f->rel_of[t->sec], &keep, 1);
}

static bool is_retired_table(const char *name)
{
	return strcmp(name, "__patchable_function_entries") == 0 || strcmp(name, "__mcount_loc") == 0;
}

/* Empty, excluded from links, and named RETIRED: bfd insists that a section
 * named __patchable_function_entries has a linked-to section. */
static int retire(struct ftpad_file *f, size_t ndx, uint64_t name)
{
	GElf_Shdr *sh = rmc_shdr_edit(f->obj, ndx);

	sh->sh_name = (GElf_Word)name;
	sh->sh_flags = SHF_EXCLUDE | (sh->sh_flags & (SHF_GROUP | SHF_INFO_LINK));
	if (sh->sh_type != SHT_REL && sh->sh_type != SHT_RELA)
		sh->sh_link = 0;
	return sh->sh_type == SHT_NOBITS || rmc_resize_section(f->obj, ndx, 0) ? 0 : -1;
}

/* The tables read are retired; so are their relocation sections. */
static int retire_tables(struct ftpad_file *f)
{
	static const char *const retired[] = { RETIRED };
	size_t shnum = rmc_shnum(f->obj);
	uint64_t name = 0;
	bool any = false;

	for (size_t i = 1; i < shnum && !any; i++)
		any = is_retired_table(rmc_secname(f->obj, i));
	if (!any || rmc_add_shstrs(f->obj, retired, 1, &name) < 0)
		return any ? -1 : 0;
	for (size_t r = 1; r < shnum; r++) {	/* the relocation sections, while names still tell */
		const GElf_Shdr *rel = rmc_shdr(f->obj, r);

		if ((rel->sh_type == SHT_REL || rel->sh_type == SHT_RELA) && rel->sh_info < shnum &&
		    is_retired_table(rmc_secname(f->obj, rel->sh_info)) && retire(f, r, name) < 0)
			return -1;
	}
	for (size_t i = 1; i < shnum; i++)
		if (is_retired_table(rmc_secname(f->obj, i)) && retire(f, i, name) < 0)
			return -1;
	return 0;
}

static int write_all(struct ftpad_file *f)
{
	if (index_object(f) < 0 || gather(f) < 0 || add_sections(f) < 0 || join_groups(f) < 0 ||
	    add_symbols(f) < 0)
		return -1;
	for (size_t i = 0; i < f->ntexts; i++)
		if (write_record_relocs(f, &f->texts[i]) < 0 || write_text_relocs(f, &f->texts[i]) < 0)
			return -1;
	return retire_tables(f);
}

/* ---- one file ---- */

static bool ftpad_supported(struct ftpad_file *f)
{
	const GElf_Ehdr *eh = rmc_obj_ehdr(f->obj);

	if (eh->e_type != ET_REL) {
		rmc_error(f->path, "not a relocatable object (ET_REL)");
		return false;
	}
	f->arch = rmc_arch_for(eh->e_machine, eh->e_ident[EI_CLASS]);
	if (!rmc_arch_knows_pads(f->arch) || !f->arch->ftpad_arch || eh->e_ident[EI_DATA] != ELFDATA2LSB) {
		ftpad_error(f, "libftpad has records for x86_64 and little-endian aarch64 only, not "
			    "e_machine %u (%d-bit, %s-endian)", eh->e_machine,
			    eh->e_ident[EI_CLASS] == ELFCLASS32 ? 32 : 64,
			    eh->e_ident[EI_DATA] == ELFDATA2MSB ? "big" : "little");
		return false;
	}
	return true;
}

static int process(struct ftpad_file *f)
{
	if (!ftpad_supported(f))
		return -1;
	if (has_section(f->obj, FTPAD_SITES_SECTION)) {
		rmc_warn(f->path, FTPAD_SITES_SECTION " already exists; left alone");
		return 0;
	}
	f->s = rmc_sites_collect(f->obj);
	if (!f->s)
		return -1;
	if (f->s->n && !f->s->symtab)
		return ftpad_error(f, "no symbol table");
	if (plan_all(f) < 0)
		return -1;
	if (f->opts->dry_run) {
		printf("%s: %zu functions to record in " FTPAD_SITES_SECTION
		       ", %zu code ranges to rewrite\n", f->path, f->nplans, f->fixups);
		return 0;
	}
	return f->nplans ? write_all(f) : 0;
}

int rmc_ftpad_file(const struct rmc_opts *opts, const char *path)
{
	struct ftpad_file f = { .opts = opts, .path = path };
	int ret;

	f.obj = rmc_obj_open(path, opts->dry_run);
	if (!f.obj)
		return RMC_FAILED;
	ret = process(&f);
	if (ret == 0 && !opts->dry_run)
		ret = rmc_obj_commit(f.obj);
	rmc_obj_close(f.obj);
	rmc_sites_free(f.s);
	for (size_t i = 0; i < f.nnames; i++)
		free(f.names[i].buf);
	free(f.names);
	free(f.texts);
	free(f.name_off);
	free(f.plans);
	free(f.group_of);
	free(f.rel_of);
	free(f.secsym);
	return ret == 0 ? RMC_OK : RMC_FAILED;
}
