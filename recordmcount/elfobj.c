/* SPDX-License-Identifier: MIT */
/*
 * A thin layer over libelf's gelf: typed accessors that hide the ELF class
 * and byte order, changes marked as they are made and written once.
 *
 * The object is never edited in place.  It is copied to a temporary file in
 * its own directory (so that rename() is atomic), libelf edits the copy, and
 * rmc_obj_commit() renames it over the object, keeping its mode.  Any error
 * before that removes the copy: the object is untouched.
 *
 * Layout is libelf's: it packs the sections in index order.  (Linux's tool
 * appends and leaves the old tables as garbage.  We tried the same with
 * ELF_F_LAYOUT, but libelf 0.188 then writes garbage headers for new
 * sections of a file opened with ELF_C_RDWR.)  Section contents, not
 * offsets, are what linkers and tests care about.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rmc.h"

struct rmc_obj {
	const char *path;
	char *tmp_path;		/* the copy libelf edits; NULL in a dry run */
	int fd;
	Elf *elf;
	GElf_Ehdr ehdr;
	size_t shnum, shstrndx;
	GElf_Shdr *shdrs;	/* a cache of every section header, [shnum] */
	bool changed;
	bool elf_magic;		/* the file starts with \177ELF */
	size_t xndx_symtab, xndx_sec;	/* cache: the SHT_SYMTAB_SHNDX of one symtab */
	void **owned;		/* buffers handed to libelf, freed at close */
	size_t nowned;
};

static void vdiag(const char *file, const char *kind, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: %s: " PROG ": ", file, kind);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void rmc_error(const char *file, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdiag(file, "error", fmt, ap);
	va_end(ap);
}

void rmc_warn(const char *file, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdiag(file, "warning", fmt, ap);
	va_end(ap);
}

/* A libelf failure: the reason, then libelf's own words. */
static void elf_fail(const struct rmc_obj *obj, const char *what)
{
	rmc_error(obj->path, "%s: %s", what, elf_errmsg(-1));
}

/* Keep @p alive until close: libelf points into buffers we give it. */
static void *own(struct rmc_obj *obj, void *p)
{
	void **grown = p ? realloc(obj->owned, (obj->nowned + 1) * sizeof(*grown)) : NULL;

	if (!grown) {
		free(p);
		return NULL;
	}
	obj->owned = grown;
	obj->owned[obj->nowned++] = p;
	return p;
}

static void *own_zalloc(struct rmc_obj *obj, size_t size)
{
	return own(obj, calloc(1, size ? size : 1));
}

static int copy_fd(int from, int to)
{
	char buf[1 << 16];
	ssize_t n;

	while ((n = read(from, buf, sizeof(buf))) > 0)
		for (ssize_t done = 0, w; done < n; done += w)
			if ((w = write(to, buf + done, (size_t)(n - done))) < 0)
				return -1;
	return n < 0 ? -1 : 0;
}

/* The temporary copy, next to the object, with its mode.  -1 on error. */
static int make_copy(struct rmc_obj *obj, int src, mode_t mode)
{
	int fd;

	if (asprintf(&obj->tmp_path, "%s.rmc-XXXXXX", obj->path) < 0) {
		obj->tmp_path = NULL;
		rmc_error(obj->path, "out of memory");
		return -1;
	}
	fd = mkstemp(obj->tmp_path);
	if (fd < 0) {
		rmc_error(obj->path, "cannot create a temporary file next to it: %s", strerror(errno));
		free(obj->tmp_path);
		obj->tmp_path = NULL;
		return -1;
	}
	if (fchmod(fd, mode & 07777) < 0 || copy_fd(src, fd) < 0) {
		rmc_error(obj->path, "cannot copy to %s: %s", obj->tmp_path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * What libelf would only call "invalid": say, as Linux does, which of the
 * identification bytes is wrong.
 */
static int check_ident(struct rmc_obj *obj, const char *path, int fd)
{
	unsigned char ident[EI_NIDENT];

	if (pread(fd, ident, sizeof(ident), 0) != (ssize_t)sizeof(ident) ||
	    memcmp(ident, ELFMAG, SELFMAG) != 0)
		return 0;	/* no ELF file at all: load_headers says so */
	obj->elf_magic = true;
	if (ident[EI_DATA] != ELFDATA2LSB && ident[EI_DATA] != ELFDATA2MSB) {
		rmc_error(path, "unrecognized ELF data encoding %u", ident[EI_DATA]);
		return -1;
	}
	if (ident[EI_CLASS] != ELFCLASS32 && ident[EI_CLASS] != ELFCLASS64) {
		rmc_error(path, "unrecognized ELF class %u", ident[EI_CLASS]);
		return -1;
	}
	return 0;
}

static int load_headers(struct rmc_obj *obj)
{
	if (elf_kind(obj->elf) != ELF_K_ELF) {
		rmc_error(obj->path, obj->elf_magic ? "truncated ELF file" : "not an ELF file");
		return -1;
	}
	if (!gelf_getehdr(obj->elf, &obj->ehdr)) {
		elf_fail(obj, "bad ELF header");
		return -1;
	}
	if (elf_getshdrnum(obj->elf, &obj->shnum) < 0 ||
	    elf_getshdrstrndx(obj->elf, &obj->shstrndx) < 0) {
		elf_fail(obj, "bad section header table");
		return -1;
	}
	free(obj->shdrs);
	obj->shdrs = calloc(obj->shnum ? obj->shnum : 1, sizeof(*obj->shdrs));
	if (!obj->shdrs) {
		rmc_error(obj->path, "out of memory");
		return -1;
	}
	for (size_t i = 1; i < obj->shnum; i++)
		if (!gelf_getshdr(elf_getscn(obj->elf, i), &obj->shdrs[i])) {
			elf_fail(obj, "bad section header");
			return -1;
		}
	return 0;
}

struct rmc_obj *rmc_obj_open(const char *path, bool dry_run)
{
	struct rmc_obj *obj = calloc(1, sizeof(*obj));
	struct stat st;
	int src;

	if (!obj) {
		rmc_error(path, "out of memory");
		return NULL;
	}
	obj->path = path;
	obj->fd = -1;
	src = open(path, O_RDONLY);
	if (src < 0 || fstat(src, &st) < 0) {
		rmc_error(path, "cannot open: %s", strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		rmc_error(path, "not a regular file");
		goto fail;
	}
	if (check_ident(obj, path, src) < 0)
		goto fail;
	if (dry_run) {
		obj->fd = src;
		src = -1;
		obj->elf = elf_begin(obj->fd, ELF_C_READ_MMAP_PRIVATE, NULL);
	} else {
		obj->fd = make_copy(obj, src, st.st_mode);
		if (obj->fd < 0)
			goto fail;
		obj->elf = elf_begin(obj->fd, ELF_C_RDWR, NULL);
	}
	if (!obj->elf) {
		elf_fail(obj, "cannot read ELF");
		goto fail;
	}
	if (load_headers(obj) < 0)
		goto fail;
	if (src >= 0)
		close(src);
	return obj;
fail:
	if (src >= 0)
		close(src);
	rmc_obj_close(obj);
	return NULL;
}

void rmc_obj_close(struct rmc_obj *obj)
{
	if (!obj)
		return;
	if (obj->elf)
		elf_end(obj->elf);
	if (obj->fd >= 0)
		close(obj->fd);
	if (obj->tmp_path) {
		unlink(obj->tmp_path);
		free(obj->tmp_path);
	}
	for (size_t i = 0; i < obj->nowned; i++)
		free(obj->owned[i]);
	free(obj->owned);
	free(obj->shdrs);
	free(obj);
}

int rmc_obj_commit(struct rmc_obj *obj)
{
	if (!obj->changed || !obj->tmp_path)
		return 0;
	for (size_t i = 1; i < obj->shnum; i++)
		if (!gelf_update_shdr(elf_getscn(obj->elf, i), &obj->shdrs[i])) {
			elf_fail(obj, "cannot update a section header");
			return -1;
		}
	if (!gelf_update_ehdr(obj->elf, &obj->ehdr) || elf_update(obj->elf, ELF_C_WRITE) < 0) {
		elf_fail(obj, "cannot write");
		return -1;
	}
	elf_end(obj->elf);
	obj->elf = NULL;
	if (fsync(obj->fd) < 0 || close(obj->fd) < 0) {
		obj->fd = -1;
		rmc_error(obj->path, "cannot write %s: %s", obj->tmp_path, strerror(errno));
		return -1;
	}
	obj->fd = -1;
	if (rename(obj->tmp_path, obj->path) < 0) {
		rmc_error(obj->path, "cannot replace it: %s", strerror(errno));
		return -1;
	}
	free(obj->tmp_path);
	obj->tmp_path = NULL;
	return 0;
}

const char *rmc_obj_path(const struct rmc_obj *obj) { return obj->path; }
const GElf_Ehdr *rmc_obj_ehdr(const struct rmc_obj *obj) { return &obj->ehdr; }
bool rmc_obj_changed(const struct rmc_obj *obj) { return obj->changed; }
size_t rmc_shnum(const struct rmc_obj *obj) { return obj->shnum; }

const GElf_Shdr *rmc_shdr(const struct rmc_obj *obj, size_t ndx)
{
	return ndx > 0 && ndx < obj->shnum ? &obj->shdrs[ndx] : NULL;
}

const char *rmc_secname(const struct rmc_obj *obj, size_t ndx)
{
	const GElf_Shdr *sh = rmc_shdr(obj, ndx);
	const char *name = sh ? elf_strptr(obj->elf, obj->shstrndx, sh->sh_name) : NULL;

	return name ? name : "?";
}

static Elf_Data *section_data(const struct rmc_obj *obj, size_t ndx)
{
	Elf_Scn *scn = ndx < obj->shnum ? elf_getscn(obj->elf, ndx) : NULL;

	return scn ? elf_getdata(scn, NULL) : NULL;
}

unsigned char *rmc_secbytes(struct rmc_obj *obj, size_t ndx, size_t *size)
{
	Elf_Data *d = section_data(obj, ndx);

	if (!d || !d->d_buf) {
		*size = 0;
		return NULL;
	}
	*size = d->d_size;
	return d->d_buf;
}

void rmc_mark_bytes(struct rmc_obj *obj, size_t ndx)
{
	elf_flagdata(section_data(obj, ndx), ELF_C_SET, ELF_F_DIRTY);
	obj->changed = true;
}

static bool is_rela(const struct rmc_obj *obj, size_t relndx)
{
	return obj->shdrs[relndx].sh_type == SHT_RELA;
}

size_t rmc_nrelocs(const struct rmc_obj *obj, size_t relndx)
{
	Elf_Data *d = section_data(obj, relndx);
	size_t entsize = gelf_fsize(obj->elf, is_rela(obj, relndx) ? ELF_T_RELA : ELF_T_REL, 1, EV_CURRENT);

	return d && entsize ? d->d_size / entsize : 0;
}

int rmc_reloc(const struct rmc_obj *obj, size_t relndx, size_t i, struct rmc_reloc *out)
{
	Elf_Data *d = section_data(obj, relndx);
	GElf_Rela rela = { 0 };
	GElf_Rel rel;

	if (is_rela(obj, relndx)) {
		if (!gelf_getrela(d, (int)i, &rela))
			return -1;
	} else {
		if (!gelf_getrel(d, (int)i, &rel))
			return -1;
		rela.r_offset = rel.r_offset;
		rela.r_info = rel.r_info;
	}
	out->offset = rela.r_offset;
	out->sym = (uint32_t)GELF_R_SYM(rela.r_info);
	out->type = (uint32_t)GELF_R_TYPE(rela.r_info);
	out->addend = rela.r_addend;
	return 0;
}

/* gelf's r_info is always in the 64-bit layout; gelf narrows it for ELF32. */
static GElf_Xword r_info(uint32_t sym, uint32_t type)
{
	return GELF_R_INFO(sym, type);
}

static int put_reloc(Elf_Data *d, bool rela, size_t i, const struct rmc_reloc *r)
{
	GElf_Rela ra = { r->offset, r_info(r->sym, r->type), r->addend };
	GElf_Rel rl = { r->offset, ra.r_info };

	return (rela ? gelf_update_rela(d, (int)i, &ra) : gelf_update_rel(d, (int)i, &rl)) ? 0 : -1;
}

int rmc_set_reloc(struct rmc_obj *obj, size_t relndx, size_t i, const struct rmc_reloc *r)
{
	Elf_Data *d = section_data(obj, relndx);

	if (!d || put_reloc(d, is_rela(obj, relndx), i, r) < 0) {
		elf_fail(obj, "cannot update a relocation");
		return -1;
	}
	elf_flagdata(d, ELF_C_SET, ELF_F_DIRTY);
	obj->changed = true;
	return 0;
}

/* The SHT_SYMTAB_SHNDX section that extends @symtab, or 0. */
static size_t shndx_section(const struct rmc_obj *obj, size_t symtab)
{
	struct rmc_obj *cache = (struct rmc_obj *)obj;	/* a lookup cache, not a change */

	if (obj->xndx_symtab == symtab)
		return obj->xndx_sec;
	cache->xndx_symtab = symtab;
	cache->xndx_sec = 0;
	for (size_t i = 1; i < obj->shnum; i++)
		if (obj->shdrs[i].sh_type == SHT_SYMTAB_SHNDX && obj->shdrs[i].sh_link == symtab)
			cache->xndx_sec = i;
	return obj->xndx_sec;
}

size_t rmc_nsyms(const struct rmc_obj *obj, size_t symtab)
{
	Elf_Data *d = section_data(obj, symtab);
	size_t entsize = gelf_fsize(obj->elf, ELF_T_SYM, 1, EV_CURRENT);

	return d && entsize ? d->d_size / entsize : 0;
}

int rmc_sym(const struct rmc_obj *obj, size_t symtab, size_t i, struct rmc_sym *out)
{
	size_t xsec = shndx_section(obj, symtab);
	Elf_Data *xdata = xsec ? section_data(obj, xsec) : NULL;
	GElf_Sym sym;
	Elf32_Word xndx = 0;

	if (!gelf_getsymshndx(section_data(obj, symtab), xdata, (int)i, &sym, &xndx))
		return -1;
	out->name = elf_strptr(obj->elf, obj->shdrs[symtab].sh_link, sym.st_name);
	if (!out->name)
		out->name = "";
	out->value = sym.st_value;
	if (sym.st_shndx == SHN_XINDEX)
		out->shndx = xndx;
	else if (sym.st_shndx >= SHN_LORESERVE)	/* SHN_ABS, SHN_COMMON: no section */
		out->shndx = SHN_UNDEF;
	else
		out->shndx = sym.st_shndx;
	out->bind = GELF_ST_BIND(sym.st_info);
	out->type = GELF_ST_TYPE(sym.st_info);
	return 0;
}

/* ---- growing and adding sections, placed after the end of the file ---- */

/* Give section @ndx a new, larger copy of its data (zero-filled at the end). */
static void *grow_section(struct rmc_obj *obj, size_t ndx, size_t new_size)
{
	Elf_Data *d = section_data(obj, ndx);
	GElf_Shdr *sh = &obj->shdrs[ndx];
	unsigned char *buf;

	if (!d)
		return NULL;
	buf = own_zalloc(obj, new_size);
	if (!buf)
		return NULL;
	memcpy(buf, d->d_buf, d->d_size < new_size ? d->d_size : new_size);
	d->d_buf = buf;
	d->d_size = new_size;
	sh->sh_size = new_size;	/* the same in memory and in the file for bytes */
	elf_flagdata(d, ELF_C_SET, ELF_F_DIRTY);
	obj->changed = true;
	return buf;
}

/* A new, empty section of @type, its data of libelf type @dtype holding @count items. */
static Elf_Data *new_section(struct rmc_obj *obj, const GElf_Shdr *proto, Elf_Type dtype, size_t count,
			     size_t *ndx)
{
	Elf_Scn *scn = elf_newscn(obj->elf);
	size_t fsize = gelf_fsize(obj->elf, dtype, 1, EV_CURRENT);
	GElf_Shdr *grown;
	Elf_Data *d;

	if (!scn || !(d = elf_newdata(scn)))
		return NULL;
	d->d_type = dtype;
	d->d_size = fsize * count;	/* the memory and file sizes agree for these types */
	d->d_buf = own_zalloc(obj, d->d_size);
	d->d_align = proto->sh_addralign;
	d->d_version = EV_CURRENT;
	if (!d->d_buf)
		return NULL;
	grown = realloc(obj->shdrs, (obj->shnum + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	obj->shdrs = grown;
	*ndx = elf_ndxscn(scn);
	obj->shnum = *ndx + 1;
	obj->shdrs[*ndx] = *proto;
	obj->shdrs[*ndx].sh_size = d->d_size;
	obj->changed = true;
	return d;
}

int rmc_add_table(struct rmc_obj *obj, const char *name, const uint64_t *words, size_t nwords,
		  bool rela, const struct rmc_reloc *rels, size_t nrel, size_t symtab)
{
	bool is32 = obj->ehdr.e_ident[EI_CLASS] == ELFCLASS32;
	uint64_t word = is32 ? 4 : 8;
	const char *prefix = rela ? ".rela" : ".rel";
	size_t old_size = obj->shdrs[obj->shstrndx].sh_size, name_len = strlen(prefix) + strlen(name) + 1;
	char *strs = grow_section(obj, obj->shstrndx, old_size + name_len);
	GElf_Shdr table = { .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC,
			    .sh_addralign = word, .sh_entsize = word };
	GElf_Shdr reloc = { .sh_type = rela ? SHT_RELA : SHT_REL, .sh_link = (GElf_Word)symtab,
			    .sh_addralign = word,
			    .sh_entsize = gelf_fsize(obj->elf, rela ? ELF_T_RELA : ELF_T_REL, 1, EV_CURRENT) };
	size_t table_ndx, reloc_ndx;
	Elf_Data *d;

	if (!strs)
		goto fail;
	/* ".rela__mcount_loc\0": the table's name is its suffix, as Linux does. */
	snprintf(strs + old_size, name_len, "%s%s", prefix, name);
	reloc.sh_name = (GElf_Word)old_size;
	table.sh_name = (GElf_Word)(old_size + strlen(prefix));

	d = new_section(obj, &table, ELF_T_ADDR, nwords, &table_ndx);
	if (!d)
		goto fail;
	for (size_t i = 0; i < nwords; i++)
		if (is32)
			((uint32_t *)d->d_buf)[i] = (uint32_t)words[i];
		else
			((uint64_t *)d->d_buf)[i] = words[i];

	reloc.sh_info = (GElf_Word)table_ndx;
	d = new_section(obj, &reloc, rela ? ELF_T_RELA : ELF_T_REL, nrel, &reloc_ndx);
	if (!d)
		goto fail;
	for (size_t i = 0; i < nrel; i++)
		if (put_reloc(d, rela, i, &rels[i]) < 0)
			goto fail;
	return 0;
fail:
	elf_fail(obj, "cannot add the __mcount_loc sections");
	return -1;
}

/* ---- a new section symbol ---- */

/* Every relocation against symbol @from now points at @to. */
static int retarget_relocs(struct rmc_obj *obj, size_t symtab, uint32_t from, uint32_t to)
{
	for (size_t s = 1; s < obj->shnum; s++) {
		const GElf_Shdr *sh = &obj->shdrs[s];

		if ((sh->sh_type != SHT_REL && sh->sh_type != SHT_RELA) || sh->sh_link != symtab)
			continue;
		for (size_t i = 0, n = rmc_nrelocs(obj, s); i < n; i++) {
			struct rmc_reloc r;

			if (rmc_reloc(obj, s, i, &r) < 0)
				return -1;
			if (r.sym != from)
				continue;
			r.sym = to;
			if (rmc_set_reloc(obj, s, i, &r) < 0)
				return -1;
		}
	}
	for (size_t s = 1; s < obj->shnum; s++) {	/* COMDAT signatures */
		GElf_Shdr *sh = &obj->shdrs[s];

		if (sh->sh_type == SHT_GROUP && sh->sh_link == symtab && sh->sh_info == from)
			sh->sh_info = to;
	}
	return 0;
}

size_t rmc_add_section_sym(struct rmc_obj *obj, size_t symtab, size_t secndx)
{
	size_t n = rmc_nsyms(obj, symtab), first_global = obj->shdrs[symtab].sh_info;
	size_t symsize = gelf_fsize(obj->elf, ELF_T_SYM, 1, EV_CURRENT);
	size_t xsec = shndx_section(obj, symtab);
	GElf_Sym moved, secsym = { .st_info = GELF_ST_INFO(STB_LOCAL, STT_SECTION) };
	Elf32_Word moved_x = 0, sec_x = 0;
	Elf_Data *xdata = NULL, *d;

	if (secndx >= SHN_LORESERVE) {
		secsym.st_shndx = SHN_XINDEX;
		sec_x = (Elf32_Word)secndx;
		if (!xsec) {
			rmc_error(obj->path, "section %zu needs SHN_XINDEX but there is no SHT_SYMTAB_SHNDX", secndx);
			return 0;
		}
	} else {
		secsym.st_shndx = (GElf_Half)secndx;
	}
	if (first_global > n)
		first_global = n;
	if (!grow_section(obj, symtab, (n + 1) * symsize))
		goto fail;
	if (xsec && !grow_section(obj, xsec, (n + 1) * sizeof(Elf32_Word)))
		goto fail;
	d = section_data(obj, symtab);
	xdata = xsec ? section_data(obj, xsec) : NULL;
	if (first_global < n) {
		/* The first global moves to the end; the new local takes its place. */
		if (!gelf_getsymshndx(d, xdata, (int)first_global, &moved, &moved_x) ||
		    !gelf_update_symshndx(d, xdata, (int)n, &moved, moved_x) ||
		    retarget_relocs(obj, symtab, (uint32_t)first_global, (uint32_t)n) < 0)
			goto fail;
	}
	if (!gelf_update_symshndx(d, xdata, (int)first_global, &secsym, sec_x))
		goto fail;
	obj->shdrs[symtab].sh_info = (GElf_Word)(first_global + 1);
	return first_global;
fail:
	elf_fail(obj, "cannot add a section symbol");
	return 0;
}
