/* SPDX-License-Identifier: MIT */
/*
 * ftpad_site.h - the one definition of ftpad's site record.
 *
 * Every producer (the GCC plugin, the clang pass, recordmcount-ng) writes
 * these records and the runtime reads them.  docs/format.md describes the
 * same format in prose; keep the two in step.  It lives in pad/ beside each
 * architecture's pad definition (pad/<arch>.h: the bytes a record's pad
 * holds and the check whether libftpad can patch it) and installs as
 * <ftpad_site.h>.
 *
 * One record per patchable site, in the section FTPAD_SITES_SECTION.  Each
 * producer emits the records of one function in a section of their own,
 * SHF_LINK_ORDER to the function's text section and inside the function's
 * COMDAT group, so that --gc-sections and COMDAT deduplication keep exactly
 * the records of the functions that survive.  The linker concatenates the
 * input sections into one array per module.
 *
 * Addresses are 32-bit offsets relative to the field that holds them, so a
 * PIE or shared object needs no dynamic relocation for its table and the
 * table can stay read-only.
 *
 * This header is plain C so that C, C++ and assembly-emitting code can share
 * it; it has no dependencies beyond <stdint.h>.
 */
#ifndef FTPAD_SITE_H
#define FTPAD_SITE_H

#include <stdint.h>

#define FTPAD_SITES_SECTION "__ftpad_sites"
/* NUL-terminated function names that records point at (optional). */
#define FTPAD_NAMES_SECTION "__ftpad_names"

/*
 * Each record carries the lowest version that can hold it, so that what an
 * older reader could read stays readable by it: entry sites are version 1,
 * the exit sites that exit=1 adds are version 2 (kind != ENTRY).  A reader
 * knows every version up to FTPAD_SITE_VERSION; docs/format.md
 * "Versioning" says how an older one meets newer records.
 */
#define FTPAD_SITE_VERSION 2
#define FTPAD_SITE_VERSION_ENTRY 1
#define FTPAD_SITE_VERSION_EXIT 2
/* Every input section is aligned to this, and records never straddle it. */
#define FTPAD_SITE_ALIGN 8

/* The architecture a record was made for; the runtime rejects others. */
enum ftpad_site_arch {
	FTPAD_ARCH_NONE = 0,
	FTPAD_ARCH_X86_64 = 1,
	FTPAD_ARCH_AARCH64 = 2,
};

/* Layout and ABI flags (struct ftpad_site_record.flags). */
enum ftpad_site_flags {
	FTPAD_SITE_ENDBR = 1u << 0,  /* endbr64 sits at the entry, before the site */
	FTPAD_SITE_BTI = 1u << 1,    /* bti c sits at the entry, before the site */
	FTPAD_SITE_MOV_X9 = 1u << 2, /* aarch64: the compiler emitted mov x9, x30 before the site */
	FTPAD_SITE_KERNEL = 1u << 3, /* kernel ABI layout (docs/design.md "The kernel ABI") */
	/* The pad is smaller than a site (the kernel ABI's compiler pads,
	 * docs/format.md "Pads without a site"): no site ftpad patches; its
	 * site_len is 0, `site` the first unit behind the entry's landing pad. */
	FTPAD_SITE_NO_SITE = 1u << 4,
	/* exit=1 looked for the function's returns and found none: it never
	 * returns normally (noreturn, an endless loop, left only by longjmp or
	 * an exception).  Its frames end where they are left; without the
	 * flag, an entry with no exit sites is one built without them, whose
	 * calls are entries only.  An older reader ignores it (entries only,
	 * as before). */
	FTPAD_SITE_NO_RETURN = 1u << 5,
};

/* What a site is (struct ftpad_site_record.kind, version 2). */
enum ftpad_site_kind {
	FTPAD_SITE_KIND_ENTRY = 0,     /* at the function's entry (every version 1 record) */
	FTPAD_SITE_KIND_EXIT = 1,      /* in front of a return */
	FTPAD_SITE_KIND_TAIL_EXIT = 2, /* in front of a tail call's jump */
};

/*
 * One site.  24 bytes, 8-byte aligned, no implicit padding.
 *
 * A version of 0 marks filler between input sections and is skipped; any
 * other version the reader does not know makes it reject the table.
 */
struct ftpad_site_record {
	int32_t entry;    /* function entry, the value of its symbol, minus &entry */
	int32_t site;     /* the patchable instruction minus &site */
	int32_t ops;      /* the 8-byte ops slot minus &ops; 0: the function has none */
	int32_t name;     /* the function's NUL-terminated name minus &name; 0: none */
	uint8_t version;  /* FTPAD_SITE_VERSION_ENTRY or _EXIT */
	uint8_t arch;     /* enum ftpad_site_arch */
	uint8_t before;   /* NOP units before the ops slot (bytes on x86_64, insns on aarch64); exits: 0 */
	uint8_t after;    /* NOP units after the entry, behind ENDBR/BTI, the site included; exits: 0 */
	uint8_t site_len; /* bytes of the patchable instruction: 5 on x86_64, 4 on aarch64 */
	uint8_t kind;     /* enum ftpad_site_kind; 0 (reserved) in version 1 */
	uint16_t flags;   /* enum ftpad_site_flags */
};

#ifdef __cplusplus
static_assert(sizeof(struct ftpad_site_record) == 24, "ftpad site record is 24 bytes");
#else
_Static_assert(sizeof(struct ftpad_site_record) == 24, "ftpad site record is 24 bytes");
#endif

/* Resolve one of the relative fields above to an address; 0 stays 0. */
static inline uintptr_t ftpad_site_field_addr(const int32_t *field)
{
	return *field ? (uintptr_t)field + (intptr_t)*field : 0;
}

#endif /* FTPAD_SITE_H */
