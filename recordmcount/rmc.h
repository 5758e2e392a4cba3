/* SPDX-License-Identifier: MIT */
/*
 * recordmcount-ng: the declarations its parts share.
 *
 *   main.c      command line
 *   elfobj.c    a thin gelf layer: typed accessors hiding ELF class and byte
 *               order, changes marked and written once (temp file + rename)
 *   mcount.c    the drop-in algorithm of Linux's scripts/recordmcount
 *   sites.c, check.c, ftpad.c
 *               the site modes, --list, --check and --format=ftpad (sites.h)
 *   arch.c      e_machine -> backend: the one place a machine is looked up
 *   arch/<arch>.c one file per architecture, each defining the same names:
 *               its mcount calls and, where ftpad knows its pads, their
 *               instructions (x86.c for x86_64 and i386, arm64.c for aarch64)
 *   fuzz/fuzz_elf.c a libFuzzer target running every mode on any input
 *               (tests/recordmcount/test_recordmcount_fuzz.py); not part of the tool
 *   ../pad/     the record format and libftpad's pad definitions, shared
 *               with the plugins and libftpad: their bytes and check
 */
#ifndef RMC_H
#define RMC_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pad.h"

#define PROG "recordmcount-ng"

/* What the tool does to each file (--format, --check, --list). */
enum rmc_mode {
	RMC_MODE_MCOUNT,	/* the drop-in: __mcount_loc, as Linux's recordmcount */
	RMC_MODE_FTPAD,		/* --format=ftpad: __ftpad_sites records for libftpad (ftpad.c) */
	RMC_MODE_CHECK,		/* --check: verify the recorded sites (check.c) */
	RMC_MODE_LIST,		/* --list: print the sites as JSON lines (check.c) */
};

/* Everything the command line sets. */
struct rmc_opts {
	bool warn_notrace;	/* -w: warn about sections ftrace ignores (Linux: warn_on_notrace_sect) */
	bool dry_run;		/* --dry-run: say what would change, write nothing */
	enum rmc_mode mode;
	bool help;
	bool version;
};

/* Exit statuses; for files they are Linux's: 0 done or nothing to do, 1 failed. */
enum rmc_status {
	RMC_OK = 0,
	RMC_FAILED = 1,		/* a file could not be processed */
	RMC_USAGE = 2,		/* bad command line (Linux exits 0 here) */
};

/* ---- diagnostics: "file.o: error: recordmcount-ng: reason" ---- */
void rmc_error(const char *file, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void rmc_warn(const char *file, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- the ELF layer (elfobj.c) ---- */

/* One relocation, REL or RELA, of either class, in host order. */
struct rmc_reloc {
	uint64_t offset;
	uint32_t sym;
	uint32_t type;
	int64_t addend;		/* 0 for REL */
};

/* One symbol, with its section index already resolved through SHN_XINDEX. */
struct rmc_sym {
	const char *name;
	uint64_t value;
	uint32_t shndx;		/* its section's index, or 0 for none (undefined, SHN_ABS, SHN_COMMON):
				 * above 0xff00 an index is a real section, never SHN_ABS */
	unsigned char bind;
	unsigned char type;
};

struct rmc_obj;		/* an open object file; opaque */

/*
 * Open @path for processing.  With @dry_run the object is mapped privately
 * and nothing is ever written; otherwise it is copied to a temporary file
 * next to it, which rmc_obj_commit() renames over @path.  NULL after an
 * error (already reported).
 */
struct rmc_obj *rmc_obj_open(const char *path, bool dry_run);
/* Write the changes, if any, and rename the temp file over the object. */
int rmc_obj_commit(struct rmc_obj *obj);
/* Forget everything: the temp file is removed and the object is untouched. */
void rmc_obj_close(struct rmc_obj *obj);

const char *rmc_obj_path(const struct rmc_obj *obj);
const GElf_Ehdr *rmc_obj_ehdr(const struct rmc_obj *obj);
bool rmc_obj_changed(const struct rmc_obj *obj);
struct rmc_arch;
/* The backend once known: relocations are then read and written in its r_info layout. */
void rmc_obj_set_arch(struct rmc_obj *obj, const struct rmc_arch *arch);

size_t rmc_shnum(const struct rmc_obj *obj);
/* Section header @ndx (0 < ndx < rmc_shnum()), or NULL. */
const GElf_Shdr *rmc_shdr(const struct rmc_obj *obj, size_t ndx);
const char *rmc_secname(const struct rmc_obj *obj, size_t ndx);
/* A section's bytes, for reading and (after rmc_mark_bytes) writing. */
unsigned char *rmc_secbytes(struct rmc_obj *obj, size_t ndx, size_t *size);
void rmc_mark_bytes(struct rmc_obj *obj, size_t ndx);

/* Relocation sections: count, read, write (type only changes in place). */
size_t rmc_nrelocs(const struct rmc_obj *obj, size_t relndx);
int rmc_reloc(const struct rmc_obj *obj, size_t relndx, size_t i, struct rmc_reloc *out);
int rmc_set_reloc(struct rmc_obj *obj, size_t relndx, size_t i, const struct rmc_reloc *r);

/* Symbols of symbol table @symtab (a section index). */
size_t rmc_nsyms(const struct rmc_obj *obj, size_t symtab);
int rmc_sym(const struct rmc_obj *obj, size_t symtab, size_t i, struct rmc_sym *out);

/*
 * Append the section pair @name (PROGBITS, SHF_ALLOC, holding @nwords
 * address-sized @words) and .rel@name / .rela@name (@rela) holding @nrel
 * relocations against @symtab, exactly as Linux's recordmcount lays them out.
 */
int rmc_add_table(struct rmc_obj *obj, const char *name, const uint64_t *words, size_t nwords,
		  bool rela, const struct rmc_reloc *rels, size_t nrel, size_t symtab);

/* ---- the architecture backends (arch/<arch>.c) ---- */

/* Bytes of a text section around one call site, for make_nop. */
struct rmc_text {
	unsigned char *bytes;
	size_t size;
	bool big_endian;	/* the object's data order */
};

/*
 * Everything recordmcount-ng knows about one machine: its mcount calls, for
 * every mode, and, where the site modes know its pads, their instructions.
 * Every arch/<arch>.c defines the same static helpers and exports one const
 * struct per ELF machine/class it serves.
 */
struct rmc_arch {
	const char *name;		/* for messages and docs: "x86_64" */
	uint16_t machine;		/* e_machine */
	unsigned char elfclass;		/* ELFCLASS32/64, or 0 for either */

	/* ---- the mcount calls: the drop-in mode and the site modes ---- */
	const char *mcount;		/* the profiling call's symbol: "mcount" or "_mcount" */
	const char *alt_mcount;		/* a second accepted name (arm: __gnu_mcount_nc), or NULL */
	bool avoid_func_syms;		/* never base records on STT_FUNC symbols (arm: Thumb bit) */
	int mcount_adjust;		/* added to the relocation offset to get the call's address */
	uint32_t abs_reloc;		/* the absolute address relocation for __mcount_loc */
	uint32_t none_reloc;		/* R_*_NONE, for calls turned into NOPs */
	/*
	 * Optional: true for a relocation against the mcount symbol that is
	 * not a call site of its own (the second half of a mips lui/addiu
	 * pair, an arm64 ADR).  @prev_offset is the offset of the previous
	 * mcount relocation in this section, or UINT64_MAX.
	 */
	bool (*is_fake_mcount)(const struct rmc_reloc *r, uint64_t prev_offset);
	/*
	 * Optional: turn the call whose relocation is at @offset into a NOP
	 * when it is the expected unrelocated call; return false (and change
	 * nothing) otherwise.  NULL: the architecture leaves such calls alone.
	 */
	bool (*make_nop)(struct rmc_text *text, uint64_t offset);
	/*
	 * Optional: r_info in a layout of the machine's own, which libelf
	 * does not translate (mips64: r_sym, r_ssym, r_type3, r_type2, r_type
	 * in file order).  @info is r_info as gelf returns it, the 8 bytes
	 * read as one word of the object's byte order.  @type may pack several
	 * fields; encode_r_info(decode_r_info(x)) must give x back.  NULL: the
	 * gABI's ELF*_R_SYM / ELF*_R_TYPE.
	 */
	void (*decode_r_info)(uint64_t info, bool big_endian, uint32_t *sym, uint32_t *type);
	uint64_t (*encode_r_info)(uint32_t sym, uint32_t type, bool big_endian);

	/*
	 * ---- the pads: --list and --check (nop_len to is_nop_site, and
	 * fill), --format=ftpad (the rest).  All NULL or 0 for a machine whose
	 * pads the site modes do not know (rmc_arch_knows_pads()). ----
	 */
	uint8_t ftpad_arch;	/* enum ftpad_site_arch; 0: no ftpad records for it */
	unsigned unit;		/* bytes of one NOP unit, as records count them */
	unsigned site_len;	/* bytes of the patchable instruction */
	unsigned min_after;	/* bytes the area behind the landing pad needs for a site */
	uint32_t pc32_reloc;	/* the 32-bit PC-relative relocation records use */
	/* Bytes of the NOP instruction at @p (of @size), or 0. */
	size_t (*nop_len)(const unsigned char *p, size_t size);
	/* Bytes of the landing pad at @p (endbr64, bti c) and its record flag, or 0. */
	size_t (*landing_pad)(const unsigned char *p, size_t size, uint16_t *flag);
	/*
	 * The call that relocation @r, against the mcount symbol, belongs to:
	 * its first byte and length in @text.  False when the bytes there are
	 * not such a call.
	 */
	bool (*call_insn)(const unsigned char *text, size_t size, const struct rmc_reloc *r,
			  uint64_t *start, uint64_t *len);
	/* Whether @p holds a call site turned into a NOP (-mnop-mcount, objtool, Linux). */
	bool (*is_nop_site)(const unsigned char *p, size_t size);
	/* Fill @len bytes with NOPs. */
	void (*fill)(unsigned char *p, size_t len);
	/*
	 * ftpad: make a site of the NOP area @p[0..len) (len >= min_after) and
	 * return its offset in the area; *changed says whether bytes changed.
	 */
	uint64_t (*make_site)(unsigned char *p, size_t len, bool *changed);
	/* ftpad: turn the call @p[0..len) at the entry into the site (NULL: never). */
	bool (*disable_call)(unsigned char *p, size_t len);
	/* ftpad: make the 8 NOP bytes at @p the empty ops slot. */
	void (*make_slot)(unsigned char *p);
	/*
	 * --check: whether a record's pad is what libftpad accepts, and why
	 * not: the machine's pad definition (pad/<arch>.h), which libftpad
	 * runs too.  NULL for a machine without ftpad records.
	 */
	enum ftpad_pad_verdict (*pad_check)(const struct ftpad_pad_site *rec, const uint8_t *bytes,
					    size_t size);
	const char *(*pad_reason)(enum ftpad_pad_verdict v);
};

/* Whether the site modes know the pads of @arch (which may be NULL). */
static inline bool rmc_arch_knows_pads(const struct rmc_arch *arch)
{
	return arch && arch->nop_len;
}

/* The backend for this object, or NULL. */
const struct rmc_arch *rmc_arch_for(uint16_t machine, unsigned char elfclass);

extern const struct rmc_arch rmc_arch_x86_64, rmc_arch_i386, rmc_arch_aarch64;
extern const struct rmc_arch rmc_arch_arm, rmc_arch_mips32, rmc_arch_mips64,
	rmc_arch_loongarch64, rmc_arch_loongarch32;
extern const struct rmc_arch rmc_arch_powerpc, rmc_arch_powerpc64, rmc_arch_s390x, rmc_arch_sh,
	rmc_arch_sparc64;

/* ---- the drop-in algorithm (mcount.c) ---- */
int rmc_process_file(const struct rmc_opts *opts, const char *path);

/* ---- the site modes (sites.h): each returns an enum rmc_status ---- */
int rmc_ftpad_file(const struct rmc_opts *opts, const char *path);
int rmc_check_file(const struct rmc_opts *opts, const char *path);
int rmc_list_file(const struct rmc_opts *opts, const char *path);

/* ---- editing (elfobj.c): the site modes, and the drop-in's section symbols ---- */
/* Section header @ndx for changing; it is written back at commit.  NULL if out of range. */
GElf_Shdr *rmc_shdr_edit(struct rmc_obj *obj, size_t ndx);
/* Give section @ndx @new_size bytes, its old contents first, zeros after; NULL on error. */
void *rmc_resize_section(struct rmc_obj *obj, size_t ndx, size_t new_size);
/* Append @n names to .shstrtab in one go; their offsets go to @offsets. */
int rmc_add_shstrs(struct rmc_obj *obj, const char *const *names, size_t n, uint64_t *offsets);
/*
 * A new section, last in the file, with header @proto and @size bytes of
 * @data (for REL/RELA and GROUP in memory form).  Its index, 0 on error.
 */
size_t rmc_new_section(struct rmc_obj *obj, const GElf_Shdr *proto, const void *data, size_t size);
/* Append @n relocations to relocation section @relndx. */
int rmc_append_relocs(struct rmc_obj *obj, size_t relndx, const struct rmc_reloc *rels, size_t n);
/* Append sections @members to SHT_GROUP section @group. */
int rmc_group_add(struct rmc_obj *obj, size_t group, const size_t *members, size_t n);
/*
 * Add a local STT_SECTION symbol for each of sections @secs to @symtab, in
 * one pass: the globals move up by @n, and every relocation, group
 * signature and .llvm_addrsig entry follows them.  The new indexes go to
 * @out.  A .symtab_shndx is added if a section index needs one.
 */
int rmc_add_section_syms(struct rmc_obj *obj, size_t symtab, const size_t *secs, size_t n, size_t *out);

#endif
