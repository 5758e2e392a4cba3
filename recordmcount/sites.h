/* SPDX-License-Identifier: MIT */
/*
 * recordmcount-ng's site modes: --list, --check and --format=ftpad.
 *
 *   sites.c      every site of an object: the entries of __mcount_loc,
 *                __patchable_function_entries and __ftpad_sites, and the
 *                mcount/fentry calls no table records yet, each resolved to
 *                a section, an offset and a function
 *   check.c      --list and --check
 *   ftpad.c      --format=ftpad: __ftpad_sites records and the fixups
 *
 * What a pad's instructions are on one machine is part of its backend,
 * struct rmc_arch (rmc.h, arch/<arch>.c).
 */
#ifndef RMC_SITES_H
#define RMC_SITES_H

#include "ftpad_site.h"
#include "rmc.h"

/* The tables a site can be recorded in. */
enum rmc_table {
	RMC_TABLE_NONE,		/* found through its call's relocation; no table has it yet */
	RMC_TABLE_MCOUNT,	/* __mcount_loc */
	RMC_TABLE_PATCHABLE,	/* __patchable_function_entries */
	RMC_TABLE_FTPAD,	/* __ftpad_sites */
};

/* What a site is. */
enum rmc_site_kind {
	RMC_SITE_FENTRY,	/* a call to __fentry__ */
	RMC_SITE_MCOUNT,	/* a call to mcount/_mcount (after the prologue, with -pg) */
	RMC_SITE_NOP,		/* a table entry at a NOP: -mnop-mcount, objtool, kernel ABI */
	RMC_SITE_PATCHABLE,	/* a -fpatchable-function-entry area */
	RMC_SITE_FTPAD,		/* an ftpad record */
	RMC_SITE_BAD,		/* a table entry that is none of these: see problem */
};

/* An ftpad record, decoded; offsets are in the section of the entry. */
struct rmc_record {
	uint64_t entry, site, ops;
	bool has_ops;
	const char *name;	/* NULL: none */
	uint8_t version, arch, before, after, site_len, kind;
	uint16_t flags;
};

struct rmc_site {
	enum rmc_table table;
	size_t table_sec;	/* the table's section; 0 for RMC_TABLE_NONE */
	size_t index;		/* the entry's index in that section */
	enum rmc_site_kind kind;
	size_t sec;		/* the text section: 0 when the entry cannot be resolved */
	uint64_t offset;	/* what the table records there, or the call's first byte */
	/* A call: its relocation and the instruction's extent. */
	bool has_call;
	size_t relsec, relidx;
	struct rmc_reloc rel;
	uint64_t call_len;	/* 0: the bytes are not the call the relocation expects */
	struct rmc_record rec;	/* RMC_SITE_FTPAD */
	char problem[160];	/* why the entry is wrong, for --check; "" if nothing is known */
};

/* A function symbol, for naming sites and finding entries. */
struct rmc_func {
	size_t sec;
	uint64_t value;
	const char *name;
	unsigned rank;		/* which of several symbols at one address names it: lower wins */
};

/* Everything the site modes know about one object. */
struct rmc_sites {
	struct rmc_obj *obj;
	const char *path;
	const struct rmc_arch *arch;	/* NULL: no backend for the machine; see
					 * rmc_arch_knows_pads() for its pads */
	size_t symtab;			/* the SHT_SYMTAB, 0 if none */
	struct rmc_site *v;
	size_t n, cap;
	struct rmc_func *funcs;		/* sorted by section, value, rank */
	size_t nfuncs;
};

/*
 * Find every site of the object.  NULL after an error (reported); otherwise
 * a table entry that cannot be resolved is kept with its problem set.
 */
struct rmc_sites *rmc_sites_collect(struct rmc_obj *obj);
void rmc_sites_free(struct rmc_sites *s);

/* The function whose entry is exactly @off, or the last one starting before it; NULL if none. */
const struct rmc_func *rmc_func_at(const struct rmc_sites *s, size_t sec, uint64_t off);
const struct rmc_func *rmc_func_before(const struct rmc_sites *s, size_t sec, uint64_t off);

/* The bytes of a text section (NULL, 0 if it has none). */
const unsigned char *rmc_text(const struct rmc_sites *s, size_t sec, size_t *size);

/*
 * A function's pad as the compiler left it.  @start is the first byte of the
 * pad (a __patchable_function_entries entry, or a call at the entry);
 * entry = start + pre, or start - landing when the pad follows the landing
 * pad (GCC records the first NOP behind ENDBR).
 */
struct rmc_pad_layout {
	const struct rmc_func *func;
	uint64_t entry;
	uint64_t pre;		/* bytes of NOPs before the entry */
	uint64_t landing;	/* bytes of the landing pad at the entry: endbr64, bti c */
	uint16_t landing_flag;	/* FTPAD_SITE_ENDBR or FTPAD_SITE_BTI */
	uint64_t after;		/* bytes of NOPs after the landing pad (a call: its length) */
};

/*
 * Resolve @site (a patchable area or a call) to its function's pad.  0, or
 * -1 with @why set to the reason.
 */
int rmc_pad_layout(const struct rmc_sites *s, const struct rmc_site *site,
		   struct rmc_pad_layout *out, char *why, size_t whysize);

/* "__mcount_loc", ...; "call" for RMC_TABLE_NONE. */
const char *rmc_table_name(enum rmc_table t);
const char *rmc_site_kind_name(enum rmc_site_kind k);

#endif
