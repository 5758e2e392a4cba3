/* SPDX-License-Identifier: MIT */
/*
 * --list and --check: read-only views of the sites sites.c finds.
 *
 * --list prints one JSON object a line per site, for tools and tests:
 *   {"file":"a.o","function":"f","section":".text","offset":16,
 *    "kind":"fentry","table":"__mcount_loc"}
 * --check verifies that every site a table records holds the bytes its
 * table promises and lies in an executable section, names each violation
 * on stderr and fails if there is one.
 */
#include <elf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sites.h"

/* A JSON string: quotes, backslashes and every byte outside printable ASCII escaped. */
static void put_json_string(FILE *out, const char *s)
{
	if (!s) {
		fputs("null", out);
		return;
	}
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

/* The function a site belongs to, for messages and --list; NULL if none. */
static const char *site_function(const struct rmc_sites *s, const struct rmc_site *site)
{
	struct rmc_pad_layout pad;
	const struct rmc_func *f;
	char why[160];

	if (!site->sec)
		return NULL;
	if (site->kind == RMC_SITE_FTPAD) {
		if (site->rec.name)
			return site->rec.name;
		f = rmc_func_at(s, site->sec, site->rec.entry);
		return f ? f->name : NULL;
	}
	if (site->kind == RMC_SITE_PATCHABLE && rmc_pad_layout(s, site, &pad, why, sizeof(why)) == 0)
		return pad.func->name;
	f = rmc_func_before(s, site->sec, site->offset);
	return f ? f->name : NULL;
}

static void list_site(const struct rmc_sites *s, const struct rmc_site *site)
{
	fputs("{\"file\":", stdout);
	put_json_string(stdout, s->path);
	fputs(",\"function\":", stdout);
	put_json_string(stdout, site_function(s, site));
	fputs(",\"section\":", stdout);
	put_json_string(stdout, site->sec ? rmc_secname(s->obj, site->sec) : NULL);
	if (site->sec)
		printf(",\"offset\":%llu", (unsigned long long)site->offset);
	else
		fputs(",\"offset\":null", stdout);
	printf(",\"kind\":\"%s\",\"table\":", rmc_site_kind_name(site->kind));
	put_json_string(stdout, site->table == RMC_TABLE_NONE ? NULL : rmc_table_name(site->table));
	if (site->problem[0]) {
		fputs(",\"problem\":", stdout);
		put_json_string(stdout, site->problem);
	}
	fputs("}\n", stdout);
}

/* ---- --check ---- */

struct checker {
	const struct rmc_sites *s;
	size_t violations;
};

static void violation(struct checker *c, const struct rmc_site *site, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "a.o: error: recordmcount-ng: __mcount_loc[3] .text+0x20 (f): reason" */
static void violation(struct checker *c, const struct rmc_site *site, const char *fmt, ...)
{
	const char *func = site_function(c->s, site);
	char where[256], reason[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (site->sec)
		snprintf(where, sizeof(where), " %s+%#llx%s%s%s", rmc_secname(c->s->obj, site->sec),
			 (unsigned long long)site->offset, func ? " (" : "", func ? func : "",
			 func ? ")" : "");
	else
		where[0] = '\0';
	rmc_error(c->s->path, "%s[%zu]%s: %s", rmc_table_name(site->table), site->index, where, reason);
	c->violations++;
}

/* Entry, site and ops lie inside the section; the slot is 8-aligned in any
 * link and ends at the entry, as every layout has it (docs/design.md "Pad
 * layouts"). */
static const char *record_bounds(const struct rmc_sites *s, const struct rmc_site *site, size_t size)
{
	const struct rmc_record *rec = &site->rec;
	const GElf_Shdr *sh = rmc_shdr(s->obj, site->sec);

	if (rec->entry >= size || rec->site >= size || rec->site_len > size - rec->site)
		return "the entry or the site lies outside its section";
	if (rec->has_ops && (rec->ops > size || size - rec->ops < FTPAD_PAD_SLOT_LEN))
		return "the ops slot lies outside its section";
	if (rec->has_ops && (rec->ops % FTPAD_PAD_SLOT_LEN || sh->sh_addralign < FTPAD_PAD_SLOT_LEN))
		return "the ops slot is not 8-aligned";
	if (rec->has_ops && rec->ops + FTPAD_PAD_SLOT_LEN != rec->entry)
		return "the ops slot does not end at the entry";
	return NULL;
}

/* Why the record's pad is not one libftpad patches, by libftpad's own rule; NULL if it is. */
static const char *pad_problem(const struct rmc_arch *arch, const struct rmc_record *rec,
			       const unsigned char *text, size_t size)
{
	const struct ftpad_pad_site pad = {
		.entry = rec->entry, .site = rec->site, .ops = rec->ops, .has_ops = rec->has_ops,
		.site_len = rec->site_len, .kind = rec->kind, .flags = rec->flags,
	};
	enum ftpad_pad_verdict v = arch->pad_check(&pad, text, size);

	/* FTPAD_PAD_PREPARED too: libftpad writes that MOV; a file never holds it. */
	return v == FTPAD_PAD_OK ? NULL : arch->pad_reason(v);
}

static void check_record(struct checker *c, const struct rmc_site *site)
{
	const struct rmc_sites *s = c->s;
	const struct rmc_record *rec = &site->rec;
	const GElf_Shdr *table = rmc_shdr(s->obj, site->table_sec);
	size_t size;
	const unsigned char *text = rmc_text(s, site->sec, &size);
	const char *why;

	if (!rec->version || rec->version > FTPAD_SITE_VERSION) {
		violation(c, site, "version %u; this tool knows 1 to %u", rec->version,
			  FTPAD_SITE_VERSION);
		return;
	}
	/* A record carries the lowest version that holds it: an exit is 2. */
	if (rec->kind != FTPAD_SITE_KIND_ENTRY && rec->version < FTPAD_SITE_VERSION_EXIT) {
		violation(c, site, "kind %u in a version %u record", rec->kind, rec->version);
		return;
	}
	if (!rmc_arch_knows_pads(s->arch) || !s->arch->ftpad_arch ||
	    rec->arch != s->arch->ftpad_arch) {
		violation(c, site, "a record for arch %u in an object for %s", rec->arch,
			  rmc_arch_knows_pads(s->arch) ? s->arch->name : "another machine");
		return;
	}
	if (!(table->sh_flags & SHF_LINK_ORDER) || table->sh_link != site->sec)
		violation(c, site, "its section is not SHF_LINK_ORDER to %s: a linker can drop "
			  "or misplace the record", rmc_secname(s->obj, site->sec));
	why = record_bounds(s, site, size);
	/* A pad that says it has no site is not one to patch: libftpad skips
	 * it (docs/format.md "Pads without a site"), so it breaks no rule. */
	if (!why && !(rec->flags & FTPAD_SITE_NO_SITE))
		why = pad_problem(s->arch, rec, text, size);
	if (why)
		violation(c, site, "%s", why);
}

static void check_site(struct checker *c, const struct rmc_site *site)
{
	struct rmc_pad_layout pad;
	char why[160];

	switch (site->kind) {
	case RMC_SITE_BAD:
		violation(c, site, "%s", site->problem);
		break;
	case RMC_SITE_FENTRY:
	case RMC_SITE_MCOUNT:
		if (site->problem[0])
			violation(c, site, "%s", site->problem);
		break;
	case RMC_SITE_NOP:
		break;
	case RMC_SITE_PATCHABLE:
		if (rmc_pad_layout(c->s, site, &pad, why, sizeof(why)) < 0)
			violation(c, site, "%s", why);
		break;
	case RMC_SITE_FTPAD:
		check_record(c, site);
		break;
	}
}

/* Open @path read-only and find its sites; NULL after an error (reported). */
static struct rmc_sites *open_sites(const char *path, struct rmc_obj **obj)
{
	const GElf_Ehdr *eh;
	struct rmc_sites *s;

	*obj = rmc_obj_open(path, true);
	if (!*obj)
		return NULL;
	eh = rmc_obj_ehdr(*obj);
	if (eh->e_type != ET_REL) {
		rmc_error(path, "not a relocatable object (ET_REL)");
	} else if (!rmc_arch_for(eh->e_machine, eh->e_ident[EI_CLASS])) {
		rmc_error(path, "unsupported machine (e_machine %u, %d-bit)", eh->e_machine,
			  eh->e_ident[EI_CLASS] == ELFCLASS32 ? 32 : 64);
	} else if ((s = rmc_sites_collect(*obj))) {
		return s;
	}
	rmc_obj_close(*obj);
	*obj = NULL;
	return NULL;
}

int rmc_list_file(const struct rmc_opts *opts, const char *path)
{
	struct rmc_obj *obj;
	struct rmc_sites *s = open_sites(path, &obj);

	(void)opts;
	if (!s)
		return RMC_FAILED;
	for (size_t i = 0; i < s->n; i++)
		list_site(s, &s->v[i]);
	rmc_sites_free(s);
	rmc_obj_close(obj);
	return RMC_OK;
}

int rmc_check_file(const struct rmc_opts *opts, const char *path)
{
	struct rmc_obj *obj;
	struct rmc_sites *s = open_sites(path, &obj);
	struct checker c = { .s = s };
	size_t checked = 0;

	(void)opts;
	if (!s)
		return RMC_FAILED;
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i].table == RMC_TABLE_NONE)
			continue;	/* a call no table records: nothing promised */
		check_site(&c, &s->v[i]);
		checked++;
	}
	printf("%s: %zu sites checked, %zu violation%s\n", path, checked, c.violations,
	       c.violations == 1 ? "" : "s");
	rmc_sites_free(s);
	rmc_obj_close(obj);
	return c.violations ? RMC_FAILED : RMC_OK;
}
