/* SPDX-License-Identifier: MIT */
/*
 * A thin layer over libelf's gelf: typed accessors that hide the ELF class
 * and byte order, changes marked as they are made and written once.
 *
 * The object is read into memory with one read() and handed to libelf with
 * elf_memory(): libelf then finds every section in that buffer, with no
 * read of its own, and converts only what we ask for.  The file itself is
 * never edited.  When something changed, libelf lays the new file out
 * (elf_update(ELF_C_NULL): the sections packed in index order, the section
 * header table last), the image is built in memory (sections we never
 * looked at are copied as they were, the rest through libelf's
 * translators), written with one write() to a temporary file in the
 * object's own directory (so that rename() is atomic) with the object's
 * mode, and renamed over the object.  Any error before that removes the
 * temporary file: the object is untouched.  An object with nothing to do
 * costs one read: no temporary file is ever made for it.
 *
 * The temporary file is not fsync()ed: the compiler that wrote the object
 * did not sync it either, so a crash of the machine can lose it just the
 * same, while a process killed at any point leaves either the old object
 * or the new one, never a mix.  (On ext4, fsync per object made a kernel
 * build's recordmcount step 9 times slower in wall time.)
 *
 * Layout is libelf's: it packs the sections in index order.  (Linux's tool
 * appends and leaves the old tables as garbage.  We tried the same with
 * ELF_F_LAYOUT, but libelf 0.188 then writes garbage headers for new
 * sections of a file opened with ELF_C_RDWR.)  Section contents, not
 * offsets, are what linkers and tests care about.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rmc.h"

/* What we know of one section beyond its header. */
struct sec_state {
	Elf_Data *data;		/* its data once asked for (the pointer libelf keeps stable), else NULL */
	uint64_t raw_offset;	/* where its bytes lie in the file read, if it was there */
	uint64_t raw_size;
	bool in_file;		/* it was in the file read (not added) */
	signed char strings;	/* as a string table: 0 not checked yet, 1 ends in NUL, -1 does not */
};

struct rmc_obj {
	const char *path;
	unsigned char *image;	/* the whole file, as read */
	size_t image_size;
	mode_t mode;		/* the file's, for the replacement */
	bool dry_run;		/* never write */
	Elf *elf;		/* libelf's view of image */
	GElf_Ehdr ehdr;
	GElf_Shdr ehdr_sh0;	/* section 0's header: the ELF header's extension */
	size_t shnum, shstrndx;
	GElf_Shdr *shdrs;	/* a cache of every section header, [shnum] */
	struct sec_state *secs;	/* [shnum], alongside */
	size_t shdrs_cap;	/* room in shdrs and secs: grown by doubling, as sections are added */
	bool changed;
	bool elf_magic;		/* the file starts with \177ELF */
	size_t xndx_symtab, xndx_sec;	/* cache: the SHT_SYMTAB_SHNDX of one symtab */
	const struct rmc_arch *arch;	/* for its r_info layout, once known */
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

/*
 * The whole of @fd (a regular file of about @size bytes) into obj->image.
 * One read(), not mmap() as Linux's tool does: over a kernel build's
 * objects mapping them made recordmcount-ng a third slower (a fault per
 * page touched, the unmapping), and a mapped file truncated meanwhile
 * would kill the process with SIGBUS.
 */
static int read_image(struct rmc_obj *obj, int fd, size_t size)
{
	size_t cap = size + 1, len = 0;	/* + 1: sees the end of the file in the first read */
	ssize_t n;

	obj->image = malloc(cap);
	if (!obj->image) {
		rmc_error(obj->path, "out of memory");
		return -1;
	}
	while ((n = read(fd, obj->image + len, cap - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rmc_error(obj->path, "cannot read: %s", strerror(errno));
			return -1;
		}
		len += (size_t)n;
		if (len == cap) {	/* it grew since fstat */
			unsigned char *grown = realloc(obj->image, cap *= 2);

			if (!grown) {
				rmc_error(obj->path, "out of memory");
				return -1;
			}
			obj->image = grown;
		}
	}
	obj->image_size = len;
	return 0;
}

/*
 * What libelf would only call "invalid": say, as Linux does, which of the
 * identification bytes is wrong.
 */
static int check_ident(struct rmc_obj *obj)
{
	const unsigned char *ident = obj->image;

	if (obj->image_size < EI_NIDENT || memcmp(ident, ELFMAG, SELFMAG) != 0)
		return 0;	/* no ELF file at all: load_headers says so */
	obj->elf_magic = true;
	if (ident[EI_DATA] != ELFDATA2LSB && ident[EI_DATA] != ELFDATA2MSB) {
		rmc_error(obj->path, "unrecognized ELF data encoding %u", ident[EI_DATA]);
		return -1;
	}
	if (ident[EI_CLASS] != ELFCLASS32 && ident[EI_CLASS] != ELFCLASS64) {
		rmc_error(obj->path, "unrecognized ELF class %u", ident[EI_CLASS]);
		return -1;
	}
	return 0;
}

#define MAX_ALIGN (1u << 24)	/* 16 MiB: more than any object needs (huge pages are 2 MiB) */

/*
 * Every section's bytes lie inside the file, and its alignment is sane.  libelf checks that only when
 * a section's data is read, and elf_update() reads past its own buffers
 * (found by fuzzing) when one it never read does not.
 */
static int check_extents(struct rmc_obj *obj)
{
	uint64_t file_size = obj->image_size;

	/* libelf reports a truncated table as no sections at all. */
	if ((obj->ehdr.e_shoff || obj->ehdr.e_shnum) &&
	    (obj->ehdr.e_shoff > file_size || obj->shnum == 0 ||
	     obj->shnum > (file_size - obj->ehdr.e_shoff) / obj->ehdr.e_shentsize)) {
		rmc_error(obj->path, "bad section header table: it lies outside the file");
		return -1;
	}
	for (size_t i = 1; i < obj->shnum; i++) {
		const GElf_Shdr *sh = &obj->shdrs[i];

		if (sh->sh_type != SHT_NOBITS && sh->sh_type != SHT_NULL &&
		    (sh->sh_offset > file_size || sh->sh_size > file_size - sh->sh_offset)) {
			rmc_error(obj->path, "bad section header: section %zu lies outside the file", i);
			return -1;
		}
		/* libelf lays the file out again: an absurd alignment would make it gigabytes. */
		if ((sh->sh_addralign & (sh->sh_addralign - 1)) || sh->sh_addralign > MAX_ALIGN) {
			rmc_error(obj->path, "bad section header: section %zu has alignment %#llx", i,
				  (unsigned long long)sh->sh_addralign);
			return -1;
		}
	}
	return 0;
}

/* Room for @n sections in shdrs and secs. */
static int reserve_sections(struct rmc_obj *obj, size_t n)
{
	GElf_Shdr *shdrs;
	struct sec_state *secs;

	if (n <= obj->shdrs_cap)
		return 0;
	shdrs = realloc(obj->shdrs, n * sizeof(*shdrs));
	if (!shdrs)
		return -1;
	obj->shdrs = shdrs;
	secs = realloc(obj->secs, n * sizeof(*secs));
	if (!secs)
		return -1;
	memset(secs + obj->shdrs_cap, 0, (n - obj->shdrs_cap) * sizeof(*secs));
	obj->secs = secs;
	obj->shdrs_cap = n;
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
	/* As Linux checks; libelf accepts other sizes and then trips its own asserts. */
	if (obj->ehdr.e_shentsize != gelf_fsize(obj->elf, ELF_T_SHDR, 1, EV_CURRENT) ||
	    obj->ehdr.e_ehsize != gelf_fsize(obj->elf, ELF_T_EHDR, 1, EV_CURRENT)) {
		rmc_error(obj->path, "bad ELF header: e_ehsize %u, e_shentsize %u", obj->ehdr.e_ehsize,
			  obj->ehdr.e_shentsize);
		return -1;
	}
	/*
	 * Section 0's header first: with SHN_XINDEX in a foreign byte order,
	 * libelf 0.188's elf_getshdrstrndx() would otherwise pread() it from
	 * the file descriptor an elf_memory() object does not have.
	 */
	if (elf_getshdrnum(obj->elf, &obj->shnum) < 0 ||
	    (obj->shnum && !gelf_getshdr(elf_getscn(obj->elf, 0), &obj->ehdr_sh0)) ||
	    elf_getshdrstrndx(obj->elf, &obj->shstrndx) < 0) {
		elf_fail(obj, "bad section header table");
		return -1;
	}
	if (reserve_sections(obj, obj->shnum ? obj->shnum : 1) < 0) {
		rmc_error(obj->path, "out of memory");
		return -1;
	}
	memset(obj->shdrs, 0, sizeof(*obj->shdrs));
	for (size_t i = 1; i < obj->shnum; i++) {
		if (!gelf_getshdr(elf_getscn(obj->elf, i), &obj->shdrs[i])) {
			elf_fail(obj, "bad section header");
			return -1;
		}
		obj->secs[i] = (struct sec_state){ .raw_offset = obj->shdrs[i].sh_offset,
						   .raw_size = obj->shdrs[i].sh_size, .in_file = true };
	}
	if (obj->shnum > 1 && (obj->shstrndx == 0 || obj->shstrndx >= obj->shnum ||
			       obj->shdrs[obj->shstrndx].sh_type != SHT_STRTAB)) {
		rmc_error(obj->path, "bad section header table: section %zu is not the names' string table",
			  obj->shstrndx);
		return -1;
	}
	return check_extents(obj);
}

/* The file into obj->image, with its mode; a regular file only. */
static int read_file(struct rmc_obj *obj)
{
	struct stat st;
	int fd = open(obj->path, O_RDONLY | O_CLOEXEC), ret = -1;

	if (fd < 0 || fstat(fd, &st) < 0) {
		rmc_error(obj->path, "cannot open: %s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rmc_error(obj->path, "not a regular file");
		goto out;
	}
	obj->mode = st.st_mode;
	ret = read_image(obj, fd, (size_t)st.st_size);
out:
	if (fd >= 0)
		close(fd);
	return ret;
}

/* The size of the ELF header of the object's class (check_ident passed). */
static size_t ehdr_size(const struct rmc_obj *obj)
{
	return obj->image[EI_CLASS] == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
}

struct rmc_obj *rmc_obj_open(const char *path, bool dry_run)
{
	struct rmc_obj *obj = calloc(1, sizeof(*obj));

	if (!obj) {
		rmc_error(path, "out of memory");
		return NULL;
	}
	obj->path = path;
	obj->dry_run = dry_run;
	if (read_file(obj) < 0 || check_ident(obj) < 0)
		goto fail;
	/* Private: libelf's sections point into image, which only we change. */
	obj->elf = elf_memory((char *)obj->image, obj->image_size);
	if (!obj->elf && obj->elf_magic && obj->image_size < ehdr_size(obj)) {
		rmc_error(path, "truncated ELF file");	/* libelf: "invalid ELF file data" */
		goto fail;
	}
	if (!obj->elf) {
		elf_fail(obj, "cannot read ELF");
		goto fail;
	}
	if (load_headers(obj) < 0)
		goto fail;
	return obj;
fail:
	rmc_obj_close(obj);
	return NULL;
}

void rmc_obj_close(struct rmc_obj *obj)
{
	if (!obj)
		return;
	if (obj->elf)
		elf_end(obj->elf);
	for (size_t i = 0; i < obj->nowned; i++)
		free(obj->owned[i]);
	free(obj->owned);
	free(obj->shdrs);
	free(obj->secs);
	free(obj->image);
	free(obj);
}

/* ---- writing: libelf's layout, gathered in pieces, one writev ---- */

/* A run of the new file's bytes, at @offset. */
struct piece {
	uint64_t offset;
	const void *bytes;
	size_t size;
};

/* The new file as pieces, in any order; the gaps between them are zeros. */
struct layout {
	struct piece *pieces;
	size_t n, cap;
	uint64_t size;		/* the file's, as libelf laid it out */
	void **bufs;		/* file forms we made (swapped data, headers), freed with it */
	size_t nbufs;
};

static void free_layout(struct layout *l)
{
	for (size_t i = 0; i < l->nbufs; i++)
		free(l->bufs[i]);
	free(l->bufs);
	free(l->pieces);
}

static int add_piece(struct layout *l, uint64_t offset, const void *bytes, size_t size)
{
	if (!size)
		return 0;
	if (offset > l->size || size > l->size - offset)
		return -1;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct piece *grown = realloc(l->pieces, cap * sizeof(*grown));

		if (!grown)
			return -1;
		l->pieces = grown;
		l->cap = cap;
	}
	l->pieces[l->n++] = (struct piece){ offset, bytes, size };
	return 0;
}

/* A buffer of @size bytes that lives as long as @l; NULL if out of memory. */
static void *layout_buffer(struct layout *l, size_t size)
{
	void **grown = realloc(l->bufs, (l->nbufs + 1) * sizeof(*grown));
	void *buf = grown ? malloc(size ? size : 1) : NULL;

	if (grown)
		l->bufs = grown;
	if (buf)
		l->bufs[l->nbufs++] = buf;
	return buf;
}

static bool needs_swap(const struct rmc_obj *obj)
{
	unsigned char host = BYTE_ORDER == LITTLE_ENDIAN ? ELFDATA2LSB : ELFDATA2MSB;

	return obj->ehdr.e_ident[EI_DATA] != host;
}

/*
 * @src (memory form) as a piece of the file at @offset.  Natively the
 * memory form is the file form, as in libelf's own writer: the piece is
 * @src's bytes.  Swapped, libelf's translator makes the file form; a
 * trailing partial record (a corrupt object) is copied as it is.
 */
static int add_data(struct rmc_obj *obj, struct layout *l, uint64_t offset, const Elf_Data *src)
{
	size_t rec = src->d_type == ELF_T_BYTE ? 1 : gelf_fsize(obj->elf, src->d_type, 1, EV_CURRENT);
	size_t whole = rec ? src->d_size - src->d_size % rec : 0;
	Elf_Data in = *src, out = { .d_size = whole, .d_version = EV_CURRENT };

	if (!needs_swap(obj) || rec <= 1)
		return add_piece(l, offset, src->d_buf, src->d_size);
	out.d_buf = layout_buffer(l, src->d_size);
	if (!out.d_buf)
		return -1;
	in.d_size = whole;
	if (whole && !gelf_xlatetof(obj->elf, &out, &in, obj->ehdr.e_ident[EI_DATA]))
		return -1;
	memcpy((unsigned char *)out.d_buf + whole, (const unsigned char *)src->d_buf + whole,
	       src->d_size - whole);
	return add_piece(l, offset, out.d_buf, src->d_size);
}

/* One header of libelf's (@mem, one record of @type, memory form) at @offset. */
static int add_header(struct rmc_obj *obj, struct layout *l, uint64_t offset, void *mem, Elf_Type type)
{
	Elf_Data d = { .d_buf = mem, .d_type = type, .d_version = EV_CURRENT,
		       .d_size = gelf_fsize(obj->elf, type, 1, EV_CURRENT) };

	return mem && d.d_size ? add_data(obj, l, offset, &d) : -1;
}

static void *mem_shdr(struct rmc_obj *obj, Elf_Scn *scn)
{
	return obj->ehdr.e_ident[EI_CLASS] == ELFCLASS64 ? (void *)elf64_getshdr(scn)
							  : (void *)elf32_getshdr(scn);
}

/* Section @i's header and bytes where libelf placed them: the file's own bytes, or its data's. */
static int add_section(struct rmc_obj *obj, struct layout *l, size_t i, uint64_t shoff)
{
	size_t shentsize = gelf_fsize(obj->elf, ELF_T_SHDR, 1, EV_CURRENT);
	Elf_Scn *scn = elf_getscn(obj->elf, i);
	const struct sec_state *st = &obj->secs[i];
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh) || add_header(obj, l, shoff + i * shentsize, mem_shdr(obj, scn),
							  ELF_T_SHDR) < 0)
		return -1;
	if (i == 0 || sh.sh_type == SHT_NOBITS || sh.sh_type == SHT_NULL || sh.sh_size == 0)
		return 0;
	if (!st->data && st->in_file && st->raw_size == sh.sh_size)	/* never looked at */
		return add_piece(l, sh.sh_offset, obj->image + st->raw_offset, st->raw_size);
	for (Elf_Data *d = elf_getdata(scn, NULL); d; d = elf_getdata(scn, d)) {
		if (!d->d_size || !d->d_buf)
			continue;
		if (d->d_off < 0 || (uint64_t)d->d_off > sh.sh_size || d->d_size > sh.sh_size - d->d_off ||
		    add_data(obj, l, sh.sh_offset + d->d_off, d) < 0)
			return -1;
	}
	return 0;
}

/* The new file, laid out by libelf (elf_update(ELF_C_NULL)), as pieces. */
static int lay_out(struct rmc_obj *obj, struct layout *l)
{
	off_t size;
	GElf_Ehdr eh;

	for (size_t i = 1; i < obj->shnum; i++)
		if (!gelf_update_shdr(elf_getscn(obj->elf, i), &obj->shdrs[i])) {
			elf_fail(obj, "cannot update a section header");
			return -1;
		}
	if (!gelf_update_ehdr(obj->elf, &obj->ehdr) || (size = elf_update(obj->elf, ELF_C_NULL)) < 0 ||
	    !gelf_getehdr(obj->elf, &eh)) {
		elf_fail(obj, "cannot lay out the new file");
		return -1;
	}
	l->size = (uint64_t)size;
	if (add_header(obj, l, 0, eh.e_ident[EI_CLASS] == ELFCLASS64 ? (void *)elf64_getehdr(obj->elf)
								     : (void *)elf32_getehdr(obj->elf),
		       ELF_T_EHDR) < 0)
		goto fail;
	for (size_t i = 0; i < obj->shnum; i++)
		if (add_section(obj, l, i, eh.e_shoff) < 0)
			goto fail;
	return 0;
fail:
	{
		int e = elf_errno();

		rmc_error(obj->path, "cannot write the new file: %s",
			  e ? elf_errmsg(e) : "a section lies outside the new layout");
	}
	return -1;
}

static int by_offset(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* All of @iov[@n] to @fd, however the kernel splits it. */
static int writev_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t done = writev(fd, iov, n);

		if (done < 0 && errno == EINTR)
			continue;
		if (done <= 0)
			return -1;
		for (; n > 0 && (size_t)done >= iov->iov_len; iov++, n--)
			done -= (ssize_t)iov->iov_len;
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + done;
			iov->iov_len -= (size_t)done;
		}
	}
	return 0;
}

/* The iovecs of one writev(): flushed when full. */
struct gather {
	int fd;
	int n;
	struct iovec iov[1024];	/* IOV_MAX on Linux */
};

static int gather(struct gather *g, const void *bytes, size_t size)
{
	if (g->n == (int)(sizeof(g->iov) / sizeof(g->iov[0]))) {
		if (writev_all(g->fd, g->iov, g->n) < 0)
			return -1;
		g->n = 0;
	}
	g->iov[g->n++] = (struct iovec){ (void *)bytes, size };
	return 0;
}

/* The pieces of @l in file order, the gaps as zeros, in as few writev()s as IOV_MAX allows. */
static int write_layout(int fd, struct layout *l)
{
	static const unsigned char zeros[4096];
	struct gather *g = malloc(sizeof(*g));
	uint64_t at = 0;
	int ret = -1;

	if (!g)
		return -1;
	g->fd = fd;
	g->n = 0;
	qsort(l->pieces, l->n, sizeof(*l->pieces), by_offset);
	for (size_t i = 0; i <= l->n; i++) {
		uint64_t next = i < l->n ? l->pieces[i].offset : l->size;

		if (next < at) {	/* overlapping pieces: libelf's layout has none */
			errno = EINVAL;
			goto out;
		}
		for (size_t gap; at < next; at += gap) {
			gap = next - at < sizeof(zeros) ? (size_t)(next - at) : sizeof(zeros);
			if (gather(g, zeros, gap) < 0)
				goto out;
		}
		if (i < l->n) {
			if (gather(g, l->pieces[i].bytes, l->pieces[i].size) < 0)
				goto out;
			at += l->pieces[i].size;
		}
	}
	ret = g->n ? writev_all(fd, g->iov, g->n) : 0;
out:
	free(g);
	return ret;
}

/* @l replaces the object: a temporary file next to it, with its mode, renamed over it. */
static int replace_file(struct rmc_obj *obj, struct layout *l)
{
	char *tmp;
	int fd;

	if (asprintf(&tmp, "%s.rmc-XXXXXX", obj->path) < 0) {
		rmc_error(obj->path, "out of memory");
		return -1;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		rmc_error(obj->path, "cannot create a temporary file next to it: %s", strerror(errno));
		free(tmp);
		return -1;
	}
	if (fchmod(fd, obj->mode & 07777) < 0 || write_layout(fd, l) < 0) {
		rmc_error(obj->path, "cannot write %s: %s", tmp, strerror(errno));
		goto fail;
	}
	if (close(fd) < 0) {
		fd = -1;
		rmc_error(obj->path, "cannot write %s: %s", tmp, strerror(errno));
		goto fail;
	}
	fd = -1;
	if (rename(tmp, obj->path) < 0) {
		rmc_error(obj->path, "cannot replace it: %s", strerror(errno));
		goto fail;
	}
	free(tmp);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(tmp);
	return -1;
}

int rmc_obj_commit(struct rmc_obj *obj)
{
	struct layout l = { 0 };
	int ret = -1;

	if (!obj->changed || obj->dry_run)
		return 0;
	if (lay_out(obj, &l) == 0)
		ret = replace_file(obj, &l);
	free_layout(&l);
	return ret;
}

const char *rmc_obj_path(const struct rmc_obj *obj) { return obj->path; }
const GElf_Ehdr *rmc_obj_ehdr(const struct rmc_obj *obj) { return &obj->ehdr; }
bool rmc_obj_changed(const struct rmc_obj *obj) { return obj->changed; }
size_t rmc_shnum(const struct rmc_obj *obj) { return obj->shnum; }
void rmc_obj_set_arch(struct rmc_obj *obj, const struct rmc_arch *arch) { obj->arch = arch; }

const GElf_Shdr *rmc_shdr(const struct rmc_obj *obj, size_t ndx)
{
	return ndx > 0 && ndx < obj->shnum ? &obj->shdrs[ndx] : NULL;
}

/*
 * Section @ndx's data, asked of libelf once: its Elf_Data lives as long as
 * the section, while d_buf may be replaced (grow_section).
 */
static Elf_Data *section_data(const struct rmc_obj *obj, size_t ndx)
{
	struct sec_state *st = ndx < obj->shnum ? &obj->secs[ndx] : NULL;
	Elf_Scn *scn;

	if (!st)
		return NULL;
	if (!st->data && (scn = elf_getscn(obj->elf, ndx)))
		st->data = elf_getdata(scn, NULL);	/* a cache, not a change */
	return st->data;
}

/*
 * The string at @off of string table @strndx, or NULL.  A table that ends
 * in NUL (checked once) needs only a bound check per string; any other goes
 * through elf_strptr(), which checks each string.
 */
static const char *string_at(const struct rmc_obj *obj, size_t strndx, uint64_t off)
{
	struct sec_state *st = strndx < obj->shnum ? &obj->secs[strndx] : NULL;
	Elf_Data *d = st && obj->shdrs[strndx].sh_type == SHT_STRTAB ? section_data(obj, strndx) : NULL;

	if (!d)
		return NULL;
	if (!st->strings)
		st->strings = d->d_buf && d->d_size && ((const char *)d->d_buf)[d->d_size - 1] == '\0' ? 1 : -1;
	if (st->strings > 0)
		return off < d->d_size ? (const char *)d->d_buf + off : NULL;
	return elf_strptr(obj->elf, strndx, off);
}

const char *rmc_secname(const struct rmc_obj *obj, size_t ndx)
{
	const GElf_Shdr *sh = rmc_shdr(obj, ndx);
	const char *name = sh ? string_at(obj, obj->shstrndx, sh->sh_name) : NULL;

	return name ? name : "?";
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

static bool is_big_endian(const struct rmc_obj *obj)
{
	return obj->ehdr.e_ident[EI_DATA] == ELFDATA2MSB;
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
	if (obj->arch && obj->arch->decode_r_info) {
		obj->arch->decode_r_info(rela.r_info, is_big_endian(obj), &out->sym, &out->type);
	} else {
		out->sym = (uint32_t)GELF_R_SYM(rela.r_info);
		out->type = (uint32_t)GELF_R_TYPE(rela.r_info);
	}
	out->addend = rela.r_addend;
	return 0;
}

/*
 * gelf's r_info is always in the 64-bit layout; gelf narrows it for ELF32.
 * A backend may have a layout of its own (mips64).
 */
static GElf_Xword r_info(const struct rmc_obj *obj, uint32_t sym, uint32_t type)
{
	if (obj->arch && obj->arch->encode_r_info)
		return obj->arch->encode_r_info(sym, type, is_big_endian(obj));
	return GELF_R_INFO(sym, type);
}

static int put_reloc(const struct rmc_obj *obj, Elf_Data *d, bool rela, size_t i,
		     const struct rmc_reloc *r)
{
	GElf_Rela ra = { r->offset, r_info(obj, r->sym, r->type), r->addend };
	GElf_Rel rl = { r->offset, ra.r_info };

	return (rela ? gelf_update_rela(d, (int)i, &ra) : gelf_update_rel(d, (int)i, &rl)) ? 0 : -1;
}

int rmc_set_reloc(struct rmc_obj *obj, size_t relndx, size_t i, const struct rmc_reloc *r)
{
	Elf_Data *d = section_data(obj, relndx);

	if (!d || put_reloc(obj, d, is_rela(obj, relndx), i, r) < 0) {
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
	out->name = string_at(obj, obj->shdrs[symtab].sh_link, sym.st_name);
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
	if (d->d_buf)	/* an empty section may have none */
		memcpy(buf, d->d_buf, d->d_size < new_size ? d->d_size : new_size);
	d->d_buf = buf;
	d->d_size = new_size;
	sh->sh_size = new_size;	/* the same in memory and in the file for bytes */
	obj->secs[ndx].strings = 0;	/* check a string table again */
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
	/* doubling: adding n sections costs O(n) */
	if (obj->shnum + 1 > obj->shdrs_cap && reserve_sections(obj, 2 * (obj->shnum + 1)) < 0)
		return NULL;
	*ndx = elf_ndxscn(scn);
	obj->shnum = *ndx + 1;
	obj->secs[*ndx] = (struct sec_state){ .data = d };
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
		if (put_reloc(obj, d, rela, i, &rels[i]) < 0)
			goto fail;
	return 0;
fail:
	elf_fail(obj, "cannot add the __mcount_loc sections");
	return -1;
}

/* ---- editing for the site modes (ftpad.c): sections, names, symbols, groups ---- */

#define SHT_LLVM_ADDRSIG_TYPE 0x6fff4c03	/* not in glibc's elf.h */

GElf_Shdr *rmc_shdr_edit(struct rmc_obj *obj, size_t ndx)
{
	if (ndx == 0 || ndx >= obj->shnum)
		return NULL;
	obj->changed = true;	/* rmc_obj_commit() writes every cached header back */
	return &obj->shdrs[ndx];
}

void *rmc_resize_section(struct rmc_obj *obj, size_t ndx, size_t new_size)
{
	void *buf = ndx > 0 && ndx < obj->shnum ? grow_section(obj, ndx, new_size) : NULL;

	if (!buf)
		elf_fail(obj, "cannot resize a section");
	return buf;
}

int rmc_add_shstrs(struct rmc_obj *obj, const char *const *names, size_t n, uint64_t *offsets)
{
	size_t old_size = obj->shdrs[obj->shstrndx].sh_size, size = old_size;
	char *strs;

	for (size_t i = 0; i < n; i++)
		size += strlen(names[i]) + 1;
	strs = grow_section(obj, obj->shstrndx, size);	/* once: the table may be large */
	if (!strs) {
		elf_fail(obj, "cannot grow the section name table");
		return -1;
	}
	for (size_t i = 0, at = old_size; i < n; i++) {
		size_t len = strlen(names[i]) + 1;

		memcpy(strs + at, names[i], len);
		offsets[i] = at;
		at += len;
	}
	return 0;
}

size_t rmc_new_section(struct rmc_obj *obj, const GElf_Shdr *proto, const void *data, size_t size)
{
	Elf_Type dtype = ELF_T_BYTE;
	size_t fsize = 1, ndx = 0;
	Elf_Data *d;

	if (proto->sh_type == SHT_RELA || proto->sh_type == SHT_REL)
		dtype = proto->sh_type == SHT_RELA ? ELF_T_RELA : ELF_T_REL;
	else if (proto->sh_type == SHT_GROUP || proto->sh_type == SHT_SYMTAB_SHNDX)
		dtype = ELF_T_WORD;
	if (dtype != ELF_T_BYTE)
		fsize = gelf_fsize(obj->elf, dtype, 1, EV_CURRENT);
	/* @data is in memory form: for these types it has the size of the file form. */
	d = new_section(obj, proto, dtype, size / fsize, &ndx);
	if (!d) {
		elf_fail(obj, "cannot add a section");
		return 0;
	}
	if (size)
		memcpy(d->d_buf, data, size);
	return ndx;
}

int rmc_append_relocs(struct rmc_obj *obj, size_t relndx, const struct rmc_reloc *rels, size_t n)
{
	size_t old = rmc_nrelocs(obj, relndx);
	bool rela = is_rela(obj, relndx);
	size_t entsize = gelf_fsize(obj->elf, rela ? ELF_T_RELA : ELF_T_REL, 1, EV_CURRENT);
	Elf_Data *d;

	if (!grow_section(obj, relndx, (old + n) * entsize))
		goto fail;
	d = section_data(obj, relndx);
	for (size_t i = 0; i < n; i++)
		if (put_reloc(obj, d, rela, old + i, &rels[i]) < 0)
			goto fail;
	return 0;
fail:
	elf_fail(obj, "cannot add relocations");
	return -1;
}

int rmc_group_add(struct rmc_obj *obj, size_t group, const size_t *members, size_t n)
{
	size_t old = obj->shdrs[group].sh_size;
	unsigned char *buf = grow_section(obj, group, old + 4 * n);

	if (!buf) {
		elf_fail(obj, "cannot extend a section group");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {	/* ELF_T_WORD data: host order in memory */
		uint32_t w = (uint32_t)members[i];

		memcpy(buf + old + 4 * i, &w, 4);
	}
	return 0;
}

/* Read one ULEB128 from [*p, end); false if it runs off the end. */
static bool read_uleb(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		unsigned char b = *(*p)++;

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

static size_t put_uleb(unsigned char *p, uint64_t v)
{
	size_t n = 0;

	do {
		unsigned char b = v & 0x7f;

		v >>= 7;
		p[n++] = b | (v ? 0x80 : 0);
	} while (v);
	return n;
}

/*
 * clang's .llvm_addrsig lists symbol indexes as ULEB128s; lld's --icf=safe
 * reads it.  Renumber every index at or above @from by @by.
 */
static int shift_addrsig(struct rmc_obj *obj, size_t sec, size_t from, size_t by)
{
	Elf_Data *d = section_data(obj, sec);
	const unsigned char *p = d ? d->d_buf : NULL, *end = p ? p + d->d_size : NULL;
	unsigned char *out, *w;
	uint64_t v;

	if (!p)
		return 0;
	out = own_zalloc(obj, d->d_size * 2 + 16);	/* each index grows by at most a byte */
	if (!out)
		return -1;
	for (w = out; p < end;) {
		if (!read_uleb(&p, end, &v)) {
			rmc_error(obj->path, "%s: malformed ULEB128", rmc_secname(obj, sec));
			return -1;
		}
		w += put_uleb(w, v >= from ? v + by : v);
	}
	d->d_buf = out;
	d->d_size = (size_t)(w - out);
	obj->shdrs[sec].sh_size = d->d_size;
	elf_flagdata(d, ELF_C_SET, ELF_F_DIRTY);
	return 0;
}

/* Every reference to a global of @symtab (index >= @first_global) moves up by @by. */
static int shift_global_refs(struct rmc_obj *obj, size_t symtab, size_t first_global, size_t by)
{
	for (size_t s = 1; s < obj->shnum; s++) {
		GElf_Shdr *sh = &obj->shdrs[s];

		if (sh->sh_link != symtab)
			continue;
		if (sh->sh_type == SHT_GROUP && sh->sh_info >= first_global) {
			sh->sh_info += (GElf_Word)by;
		} else if (sh->sh_type == SHT_LLVM_ADDRSIG_TYPE) {
			if (shift_addrsig(obj, s, first_global, by) < 0)
				return -1;
		} else if (sh->sh_type == SHT_REL || sh->sh_type == SHT_RELA) {
			for (size_t i = 0, n = rmc_nrelocs(obj, s); i < n; i++) {
				struct rmc_reloc r;

				if (rmc_reloc(obj, s, i, &r) < 0)
					return -1;
				if (r.sym < first_global)
					continue;
				r.sym += (uint32_t)by;
				if (rmc_set_reloc(obj, s, i, &r) < 0)
					return -1;
			}
		}
	}
	return 0;
}

/* A new SHT_SYMTAB_SHNDX for @symtab, all zero (no symbol needed it so far). */
static size_t add_shndx_section(struct rmc_obj *obj, size_t symtab, size_t nsyms)
{
	static const char name[] = ".symtab_shndx";
	const char *names[] = { name };
	uint64_t off;
	GElf_Shdr sh = { .sh_type = SHT_SYMTAB_SHNDX, .sh_link = (GElf_Word)symtab,
			 .sh_addralign = 4, .sh_entsize = 4 };
	uint32_t *zeros = calloc(nsyms ? nsyms : 1, 4);
	size_t ndx = 0;

	if (zeros && rmc_add_shstrs(obj, names, 1, &off) == 0) {
		sh.sh_name = (GElf_Word)off;
		ndx = rmc_new_section(obj, &sh, zeros, nsyms * 4);
	}
	free(zeros);
	obj->xndx_symtab = 0;	/* the lookup cache is stale */
	return ndx;
}

int rmc_add_section_syms(struct rmc_obj *obj, size_t symtab, const size_t *secs, size_t n,
			 size_t *out)
{
	size_t nsyms = rmc_nsyms(obj, symtab), first_global = obj->shdrs[symtab].sh_info;
	size_t symsize = gelf_fsize(obj->elf, ELF_T_SYM, 1, EV_CURRENT);
	size_t xsec = shndx_section(obj, symtab);
	Elf_Data *d, *xdata = NULL;
	bool need_x = false;

	if (!n)
		return 0;
	if (first_global > nsyms)
		first_global = nsyms;
	for (size_t i = 0; i < n; i++)
		need_x |= secs[i] >= SHN_LORESERVE;
	if (need_x && !xsec && !(xsec = add_shndx_section(obj, symtab, nsyms)))
		return -1;
	/* References first, while the indexes still mean the old symbols. */
	if (shift_global_refs(obj, symtab, first_global, n) < 0 ||
	    !grow_section(obj, symtab, (nsyms + n) * symsize) ||
	    (xsec && !grow_section(obj, xsec, (nsyms + n) * sizeof(Elf32_Word))))
		goto fail;
	d = section_data(obj, symtab);
	xdata = xsec ? section_data(obj, xsec) : NULL;
	for (size_t i = nsyms; i-- > first_global;) {	/* the globals move up by n */
		GElf_Sym sym;
		Elf32_Word x = 0;

		if (!gelf_getsymshndx(d, xdata, (int)i, &sym, &x) ||
		    !gelf_update_symshndx(d, xdata, (int)(i + n), &sym, x))
			goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym = { .st_info = GELF_ST_INFO(STB_LOCAL, STT_SECTION) };
		Elf32_Word x = 0;

		if (secs[i] >= SHN_LORESERVE) {
			sym.st_shndx = SHN_XINDEX;
			x = (Elf32_Word)secs[i];
		} else {
			sym.st_shndx = (GElf_Half)secs[i];
		}
		if (!gelf_update_symshndx(d, xdata, (int)(first_global + i), &sym, x))
			goto fail;
		out[i] = first_global + i;
	}
	obj->shdrs[symtab].sh_info = (GElf_Word)(first_global + n);
	obj->changed = true;
	return 0;
fail:
	elf_fail(obj, "cannot add section symbols");
	return -1;
}
