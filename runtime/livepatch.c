/* SPDX-License-Identifier: MIT */
/*
 * livepatch.c - replacing functions of this process with those of a patch
 * (docs/livepatch.md): `ftpad patch PID PATCH.so` through attach's
 * control thread, or ftpad_patch_apply() from the program itself.
 *
 * A patch is a shared object with FTPAD_REPLACE records (ftpad_patch.h).
 * Applying it: dlopen, every name resolved in the symbol tables of the
 * padded modules (static symbols too), every FTPAD_SYMBOL slot filled;
 * refused before anything is switched when a name is missing, a replaced
 * function has no entry pad, or a tracer's ops uses its pad.  Then each
 * function switches on its own: its 5-byte NOP becomes `jmp new` (or
 * `jmp stub`, a stub within reach that jumps anywhere) by the int3
 * protocol, so calls cost one jump and nothing else.  A live-patched pad
 * is the patch's: tracers leave it alone (patch.c), and patching a traced
 * function is refused.  Patches stack: a second patch of a function jumps
 * over the first, and reverting it brings the first back.  Reverting the
 * last puts the NOP back byte for byte.
 *
 * The switch of each function is atomic, not the patch's as a whole; the
 * tool makes it consistent by stopping the threads around the switch and
 * checking their stacks (cli/patch.c).  All state is under ftpad_lock;
 * apply and revert are also serialised by patch_lock, which is held
 * around the dlopen and dlclose that ftpad_lock must not be held across.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arch.h"
#include "ftpad_patch.h"
#include "internal.h"
#include "livepatch.h"

/* One replaced function of a patch. */
struct lp_func {
	const struct ftpad_module *mod;
	struct ftpad_site *site;
	const char *name;  /* in the patch's records */
	uintptr_t old;     /* the target's function (its entry) */
	size_t old_size;
	uintptr_t new_fn;  /* the patch's */
	uintptr_t target;  /* what the site jumps to for it: new_fn, or a stub */
	uintptr_t below;   /* what the site jumped to before it (0: its NOP) */
	uintptr_t below_fn; /* ... the function that was */
	void *pin;          /* its module held loaded while patched (NULL: the program) */
};

struct lp_patch {
	struct lp_patch *next; /* applied ones, newest first */
	char path[PATH_MAX];
	dev_t dev;
	ino_t ino;
	void *handle;
	uintptr_t lo, hi;      /* its code, for the stack check */
	size_t nfuncs;
	struct lp_func funcs[];
};

static pthread_mutex_t patch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lp_patch *applied; /* under ftpad_lock */

/* Stubs for a patch out of a site's direct reach (ftpad_arch_jump_stub():
 * an indirect jump and the address, 16 bytes), in pages mapped within
 * reach of the module.  A
 * page is unmapped once none of its stubs is in use (live); its slots
 * are not reused before, so a stub never changes while a pad may lead to it. */
#define STUB_SIZE FTPAD_JUMP_STUB_SIZE
struct stub_page {
	struct stub_page *next;
	const struct ftpad_module *mod;
	uintptr_t page, used;
	size_t live;
};
static struct stub_page *stub_pages;

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* ---- reading the patch's sections ---- */

/* The run-time address and size of section name of the object at path
 * loaded with bias base, or 0. */
static uintptr_t section_of(const char *path, uintptr_t base, const char *name, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uintptr_t found = 0;
	void *map;

	*size = 0;
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(ElfW(Ehdr))) {
		close(fd);
		return 0;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return 0;
	const ElfW(Ehdr) *eh = map;
	size_t len = (size_t)st.st_size;

	if (eh->e_shoff && eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) <= len &&
	    eh->e_shstrndx < eh->e_shnum) {
		const ElfW(Shdr) *sh = (const void *)((const char *)map + eh->e_shoff);
		const ElfW(Shdr) *strs = &sh[eh->e_shstrndx];

		for (int i = 0; i < eh->e_shnum && strs->sh_offset + strs->sh_size <= len; i++) {
			if (sh[i].sh_name >= strs->sh_size ||
			    strncmp((const char *)map + strs->sh_offset + sh[i].sh_name, name,
				    strs->sh_size - sh[i].sh_name))
				continue;
			found = base + sh[i].sh_addr;
			*size = sh[i].sh_size;
			break;
		}
	}
	munmap(map, len);
	return found;
}

/* The patch's code: the extent of its executable segments. */
static int patch_extent(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lp_patch *p = arg;

	(void)size;
	if (info->dlpi_addr != ((struct link_map *)p->handle)->l_addr)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (!p->lo || lo < p->lo)
			p->lo = lo;
		if (lo + ph->p_memsz > p->hi)
			p->hi = lo + ph->p_memsz;
	}
	return 1;
}

/* ---- resolving names in the target ---- */

static bool is_definition(const ElfW(Sym) *sym)
{
	unsigned type = ELF64_ST_TYPE(sym->st_info);

	return sym->st_shndx != SHN_UNDEF && type != STT_FILE && type != STT_SECTION &&
	       type != STT_TLS;
}

/* A name the patch needs (a replaced function, an FTPAD_SYMBOL), and
 * where it resolved: in the first module that defines it, a global
 * definition first, else a local one; ambiguous when several locals at
 * different addresses carry it there. */
struct wanted {
	const char *name;
	uintptr_t addr;
	size_t size;
	const struct ftpad_module *mod;
	bool global, ambiguous;
};

static int by_name(const void *a, const void *b)
{
	return strcmp((*(struct wanted *const *)a)->name, (*(struct wanted *const *)b)->name);
}

/* The first of order[0..n) (sorted by name) called name, or n. */
static size_t first_named(struct wanted *const *order, size_t n, const char *name)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(order[mid]->name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Module m defines name at addr: what it gives each wanted of that name
 * that no earlier module resolved. */
static void offer(struct wanted *const *order, size_t n, const struct ftpad_module *m,
		  const char *name, uintptr_t addr, size_t size, bool global)
{
	for (size_t i = first_named(order, n, name); i < n && !strcmp(order[i]->name, name); i++) {
		struct wanted *w = order[i];

		if ((w->mod && w->mod != m) || w->global)
			continue;
		if (global || !w->addr) {
			*w = (struct wanted){ w->name, addr, size, m, global, false };
		} else if (w->addr != addr) {
			w->ambiguous = true;
		}
	}
}

/* Every definition in module m's symbol table (.symtab, else .dynsym)
 * offered to the wanted names. */
static void module_offer(const struct ftpad_module *m, struct wanted *const *order, size_t n)
{
	const ElfW(Shdr) *symtab = m->map ? ftpad_module_section(m, NULL, SHT_SYMTAB) : NULL;
	const ElfW(Ehdr) *eh = m->map;

	if (m->map && !symtab)
		symtab = ftpad_module_section(m, NULL, SHT_DYNSYM);
	if (!symtab || symtab->sh_link >= eh->e_shnum)
		return;
	const ElfW(Shdr) *strtab = (const ElfW(Shdr) *)((const char *)m->map + eh->e_shoff) +
				   symtab->sh_link;
	const ElfW(Sym) *sym = (const void *)((const char *)m->map + symtab->sh_offset);
	const char *strs = (const char *)m->map + strtab->sh_offset;
	size_t nsyms = symtab->sh_size / sizeof(*sym);

	if (symtab->sh_offset + symtab->sh_size > m->map_size ||
	    strtab->sh_offset + strtab->sh_size > m->map_size)
		return;
	for (size_t i = 0; i < nsyms; i++) {
		/* Names ended within the table only. */
		if (!is_definition(&sym[i]) || sym[i].st_name >= strtab->sh_size ||
		    !memchr(strs + sym[i].st_name, 0, strtab->sh_size - sym[i].st_name))
			continue;
		offer(order, n, m, strs + sym[i].st_name, m->base + sym[i].st_value,
		      sym[i].st_size, ELF64_ST_BIND(sym[i].st_info) != STB_LOCAL);
	}
}

/* Every wanted name looked up at once in the padded modules other than
 * the patch's own code: one pass over each symbol table, a binary search
 * per symbol, where a lookup per name would read every table per name
 * (a patch of 1,000 functions).  0, or -ENOMEM. */
static int lookup_all(const struct lp_patch *p, struct wanted *w, size_t n)
{
	struct wanted **order = ftpad_alloc(n * sizeof(*order) + 1);

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = &w[i];
	qsort(order, n, sizeof(*order), by_name);
	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next)
		if (!(m->lo < p->hi && p->lo < m->hi))
			module_offer(m, order, n);
	ftpad_free(order);
	return 0;
}

/* ---- stubs ---- */

/* A stub slot within reach of module m for fn, or 0; its bytes into
 * *poke, for the caller to write with the others. */
static uintptr_t stub_reserve(const struct ftpad_module *m, uintptr_t fn, struct ftpad_poke *poke)
{
	uintptr_t size = (uintptr_t)getpagesize();
	struct stub_page *sp;

	for (sp = stub_pages; sp; sp = sp->next)
		if (sp->mod == m && sp->used + STUB_SIZE <= size)
			break;
	if (!sp) {
		sp = ftpad_alloc(sizeof(*sp));
		if (!sp)
			return 0;
		sp->mod = m;
		sp->page = ftpad_map_near(m, size);
		if (!sp->page) {
			ftpad_free(sp);
			return 0;
		}
		sp->next = stub_pages;
		stub_pages = sp;
	}
	*poke = (struct ftpad_poke){ .addr = sp->page + sp->used, .limit = sp->page + size,
				     .prot = PROT_READ | PROT_EXEC, .len = STUB_SIZE };
	ftpad_arch_jump_stub(poke->bytes, fn);
	sp->used += STUB_SIZE;
	sp->live++;
	return poke->addr;
}

/* The stubs p's functions need, reserved and written in one go (nothing
 * leads to them yet: the bytes between them may be rewritten as they
 * are, so that a page's stubs are one write).  Each function's target: its
 * replacement, or its stub.  A failure leaves the stubs reserved so far
 * to ftpad_patch_finish(), which releases them. */
static int make_stubs(struct lp_patch *p, char *err, size_t errlen)
{
	struct ftpad_poke *pokes = ftpad_alloc(p->nfuncs * sizeof(*pokes) + 1);
	size_t n = 0;
	int e = 0;

	if (!pokes)
		return fail(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < p->nfuncs && !e; i++) {
		struct lp_func *f = &p->funcs[i];
		uint8_t insn[16];

		if (!ftpad_arch_jump_insn(f->site, f->new_fn, insn)) {
			f->target = f->new_fn;
			continue;
		}
		f->target = stub_reserve(f->mod, f->new_fn, &pokes[n]);
		if (!f->target)
			e = fail(err, errlen, -ERANGE, "no stub within reach of %s", f->name);
		n++;
	}
	if (!e && n && (e = ftpad_text_poke(pokes, n, true)))
		fail(err, errlen, e, "cannot write the stubs: %s", ftpad_strerror(e));
	ftpad_free(pokes);
	return e;
}

/* p's stubs are no longer in use: no pad leads to them, and no thread is
 * in them (the stack check said so).  Their pages go once empty; under
 * ftpad_lock. */
static void release_stubs(struct lp_patch *p)
{
	for (size_t i = 0; i < p->nfuncs; i++) {
		uintptr_t stub = p->funcs[i].target;

		if (!stub || stub == p->funcs[i].new_fn)
			continue;
		for (struct stub_page **sp = &stub_pages; *sp; sp = &(*sp)->next) {
			struct stub_page *page = *sp;

			if (stub < page->page || stub >= page->page + page->used)
				continue;
			if (!--page->live) {
				*sp = page->next;
				munmap((void *)page->page, (size_t)getpagesize());
				ftpad_free(page);
			}
			break;
		}
	}
}

/* The modules of p's functions held loaded while it is applied, so that
 * no site it wrote goes away under it: dlopen with RTLD_NOLOAD only
 * counts a reference (outside ftpad_lock: libftpad's dlopen hook takes it). */
static void pin_modules(struct lp_patch *p)
{
	for (size_t i = 0; i < p->nfuncs; i++) {
		bool pinned = false;

		/* Once per module: the first of its functions holds it. */
		for (size_t j = 0; j < i && !pinned; j++)
			pinned = p->funcs[j].mod == p->funcs[i].mod;
		if (!pinned && strchr(p->funcs[i].mod->path, '/'))
			p->funcs[i].pin = dlopen(p->funcs[i].mod->path, RTLD_LAZY | RTLD_NOLOAD);
	}
}

static void unpin_modules(struct lp_patch *p)
{
	for (size_t i = 0; i < p->nfuncs; i++)
		if (p->funcs[i].pin)
			dlclose(p->funcs[i].pin);
}

/* ---- the switch ---- */

/* The newest patch after p (towards the head) that replaces site s, the
 * one whose ->below is p's: NULL when p's is the one the site jumps to. */
static struct lp_func *above(const struct lp_patch *p, const struct ftpad_site *s)
{
	struct lp_func *found = NULL;

	for (struct lp_patch *q = applied; q && q != p; q = q->next)
		for (size_t i = 0; i < q->nfuncs; i++)
			if (q->funcs[i].site == s)
				found = &q->funcs[i];
	return found;
}

static int by_address(const void *a, const void *b)
{
	uintptr_t x = ftpad_site_addr(((const struct ftpad_site_jump *)a)->site);
	uintptr_t y = ftpad_site_addr(((const struct ftpad_site_jump *)b)->site);

	return x < y ? -1 : x > y;
}

/* The pads of p that are p's to write, each to p's function (forward)
 * or back to what was below p; into jumps (room for p->nfuncs), their
 * count.  Once p is applied, a pad with a later patch on top is left to
 * that one. */
static size_t plan_switch(const struct lp_patch *p, bool forward, bool is_applied,
			  struct ftpad_site_jump *jumps)
{
	size_t n = 0;

	for (size_t i = 0; i < p->nfuncs; i++) {
		const struct lp_func *f = &p->funcs[i];

		if (is_applied && above(p, f->site))
			continue;
		jumps[n++] = (struct ftpad_site_jump){ f->mod, f->site,
						      forward ? f->target : f->below };
	}
	/* In address order: neighbouring pads are written together. */
	qsort(jumps, n, sizeof(*jumps), by_address);
	return n;
}

/* Every pad of jumps switched at once, the sites' states following. */
static int switch_sites(const struct ftpad_site_jump *jumps, size_t n)
{
	int err = ftpad_arch_sites_jump(jumps, n);

	for (size_t i = 0; !err && i < n; i++) {
		struct ftpad_site *s = (struct ftpad_site *)jumps[i].site;

		if (jumps[i].target)
			s->state |= FTPAD_S_JUMP;
		else
			s->state &= ~FTPAD_S_JUMP;
	}
	return err;
}

/* p's pads forward or back, all in one batch (the threads the tool holds
 * stopped wait for one switch); on a failure all put back as they were,
 * and the failure returned. */
static int switch_patch(const struct lp_patch *p, bool forward, bool is_applied, char *err,
			size_t errlen)
{
	struct ftpad_site_jump *jumps = ftpad_alloc(p->nfuncs * sizeof(*jumps));
	int e;

	if (!jumps)
		return fail(err, errlen, -ENOMEM, "out of memory");
	e = switch_sites(jumps, plan_switch(p, forward, is_applied, jumps));
	if (e) {
		fail(err, errlen, e, "cannot switch the functions: %s", ftpad_strerror(e));
		switch_sites(jumps, plan_switch(p, !forward, is_applied, jumps));
	}
	ftpad_free(jumps);
	return e;
}

struct commit {
	struct lp_patch *p;
	bool revert;
	int (*await)(void *arg);
	void *arg;
	bool switched; /* a failed apply had switched some */
	char *err;
	size_t errlen;
};

/* A tracer may have taken a pad since the patch was resolved. */
static int still_free(struct commit *c)
{
	for (size_t i = 0; i < c->p->nfuncs; i++) {
		const struct lp_func *f = &c->p->funcs[i];

		if ((f->site->state & FTPAD_S_ENABLED) || f->site->patching)
			return fail(c->err, c->errlen, -EBUSY,
				    "function %s is traced: its pad is a tracer's until it stops",
				    f->name);
	}
	return 0;
}

static int apply_held(void *arg)
{
	struct commit *c = arg;
	struct lp_patch *p = c->p;
	int err = still_free(c);

	if (err)
		return err;
	/* The stubs before the threads are stopped: no pad leads to them
	 * yet, and a failure releases them (ftpad_patch_finish()). */
	err = make_stubs(p, c->err, c->errlen);
	if (!err && c->await)
		err = c->await(c->arg);
	if (err)
		return err;
	err = switch_patch(p, true, false, c->err, c->errlen);
	if (err) {
		/* Back as it was; a thread may have entered a replacement
		 * meanwhile: the patch then stays loaded. */
		c->switched = true;
		return err;
	}
	p->next = applied;
	applied = p;
	return 0;
}

static int revert_held(void *arg)
{
	struct commit *c = arg;
	struct lp_patch *p = c->p;
	int e = c->await ? c->await(c->arg) : 0;

	/* The pads this patch is on top of go back to what was below it;
	 * on a failure, they all go forward again. */
	if (!e)
		e = switch_patch(p, false, true, c->err, c->errlen);
	if (e)
		return e;
	/* A later patch of a function stays on top, over what was below. */
	for (size_t i = 0; i < p->nfuncs; i++) {
		struct lp_func *up = above(p, p->funcs[i].site);

		if (up) {
			up->below = p->funcs[i].below;
			up->below_fn = p->funcs[i].below_fn;
		}
	}
	for (struct lp_patch **pp = &applied; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	return 0;
}

/* ---- preparing ---- */

static struct lp_patch *find_applied(dev_t dev, ino_t ino)
{
	for (struct lp_patch *p = applied; p; p = p->next)
		if (p->dev == dev && p->ino == ino)
			return p;
	return NULL;
}

/* What site s jumps to now, or NULL: its NOP. */
static const struct lp_func *current(const struct ftpad_site *s)
{
	for (struct lp_patch *p = applied; p; p = p->next)
		for (size_t i = 0; i < p->nfuncs; i++)
			if (p->funcs[i].site == s)
				return &p->funcs[i];
	return NULL;
}

/* path resolved into real[PATH_MAX] and *st, patch_lock taken, and the
 * applied patch of that file in *p, which must be applied (applied) or
 * not; 0, or the error with nothing taken. */
static int lock_and_find(const char *path, bool applied, char *real, struct stat *st,
			 struct lp_patch **p, char *err, size_t errlen)
{
	if (!realpath(path, real) || stat(real, st))
		return fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
	pthread_mutex_lock(&patch_lock);
	ftpad_lock_take();
	*p = find_applied(st->st_dev, st->st_ino);
	ftpad_lock_give();
	if (!*p == !applied)
		return 0;
	pthread_mutex_unlock(&patch_lock);
	if (applied)
		return fail(err, errlen, -ENOENT, "patch %s is not applied", real);
	return fail(err, errlen, -EEXIST, "patch %s is already applied", real);
}

/* p's function i, the replacement rec of the function found at w. */
static int resolve_func(struct lp_patch *p, size_t i, const struct ftpad_patch_replace *rec,
			const struct wanted *w, char *err, size_t errlen)
{
	struct lp_func *f = &p->funcs[i];
	const struct lp_func *now;

	f->name = rec->name;
	f->new_fn = (uintptr_t)rec->func;
	f->target = 0;
	f->old = w->addr;
	f->old_size = w->size;
	f->mod = w->mod;
	if (!f->old)
		return fail(err, errlen, -ENOENT, "no symbol %s in the process", f->name);
	if (w->ambiguous)
		return fail(err, errlen, -ENOTUNIQ, "several static functions are called %s",
			    f->name);
	f->site = ftpad_site_by_entry(f->old);
	if (!f->site || f->site->entry != f->old || ftpad_site_is_exit(f->site))
		return fail(err, errlen, -ENOTSUP, "function %s has no pad", f->name);
	if ((f->site->state & FTPAD_S_ENABLED) || f->site->patching)
		return fail(err, errlen, -EBUSY,
			    "function %s is traced: its pad is a tracer's until it stops", f->name);
	for (size_t j = 0; j < i; j++)
		if (p->funcs[j].site == f->site)
			return fail(err, errlen, -EINVAL, "%s is replaced twice", f->name);
	now = current(f->site);
	f->below = now ? now->target : 0;
	f->below_fn = now ? now->new_fn : 0;
	return 0;
}

/* Fill p's functions and the patch's symbol slots; under ftpad_lock.
 * Refusals change nothing. */
static int resolve(struct lp_patch *p, const struct ftpad_patch_replace *rec,
		   struct ftpad_patch_symbol *syms, size_t nsyms, char *err, size_t errlen)
{
	struct wanted *w;
	int e = ftpad_modules_refresh();

	if (e)
		return fail(err, errlen, e, "cannot read the modules: %s", ftpad_strerror(e));
	w = ftpad_alloc((p->nfuncs + nsyms) * sizeof(*w) + 1);
	if (!w)
		return fail(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < p->nfuncs; i++)
		w[i] = (struct wanted){ .name = rec[i].name };
	for (size_t i = 0; i < nsyms; i++)
		w[p->nfuncs + i] = (struct wanted){ .name = syms[i].name };
	e = lookup_all(p, w, p->nfuncs + nsyms);
	if (e)
		e = fail(err, errlen, e, "out of memory");
	for (size_t i = 0; !e && i < p->nfuncs; i++)
		e = resolve_func(p, i, &rec[i], &w[i], err, errlen);
	for (size_t i = 0; !e && i < nsyms; i++) {
		const struct wanted *s = &w[p->nfuncs + i];

		if (!s->addr)
			e = fail(err, errlen, -ENOENT, "no symbol %s in the process", s->name);
		else if (s->ambiguous)
			e = fail(err, errlen, -ENOTUNIQ, "several static symbols are called %s",
				 s->name);
		else
			syms[i].addr = (void *)s->addr;
	}
	ftpad_free(w);
	return e;
}

int ftpad_patch_prepare(const char *path, struct ftpad_patch_prep *prep, char *err, size_t errlen)
{
	char real[PATH_MAX];
	struct stat st;
	void *handle;
	struct link_map *lm;
	size_t rsize, ssize;
	uintptr_t recs, syms;
	struct lp_patch *p;
	int e;

	memset(prep, 0, sizeof(*prep));
	e = lock_and_find(path, false, real, &st, &p, err, errlen);
	if (e)
		return e;
	handle = dlopen(real, RTLD_NOW | RTLD_LOCAL);
	if (!handle) {
		pthread_mutex_unlock(&patch_lock);
		return fail(err, errlen, -ENOEXEC, "dlopen: %s", dlerror());
	}
	lm = handle;
	recs = section_of(real, lm->l_addr, FTPAD_PATCH_SECTION, &rsize);
	syms = section_of(real, lm->l_addr, FTPAD_PATCH_SYM_SECTION, &ssize);
	if (!recs || !rsize) {
		e = fail(err, errlen, -EINVAL, "%s replaces nothing (no FTPAD_REPLACE)", real);
		goto out;
	}
	p = ftpad_alloc(sizeof(*p) + rsize / sizeof(struct ftpad_patch_replace) *
					     sizeof(struct lp_func));
	if (!p) {
		e = -ENOMEM;
		goto out;
	}
	snprintf(p->path, sizeof(p->path), "%s", real);
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	p->handle = handle;
	p->nfuncs = rsize / sizeof(struct ftpad_patch_replace);
	dl_iterate_phdr(patch_extent, p);
	ftpad_lock_take();
	e = resolve(p, (const void *)recs, (void *)syms, ssize / sizeof(struct ftpad_patch_symbol),
		    err, errlen);
	ftpad_lock_give();
	if (e)
		goto out;
	pin_modules(p);
	prep->patch = p;
	return 0; /* patch_lock held until the commit */
out:
	ftpad_free(p);
	dlclose(handle);
	pthread_mutex_unlock(&patch_lock);
	return e;
}

int ftpad_patch_prepare_revert(const char *path, struct ftpad_patch_prep *prep, char *err,
			       size_t errlen)
{
	char real[PATH_MAX];
	struct stat st;
	struct lp_patch *p;
	int e;

	memset(prep, 0, sizeof(*prep));
	e = lock_and_find(path, true, real, &st, &p, err, errlen);
	if (e)
		return e;
	prep->patch = p;
	prep->revert = true;
	return 0;
}

size_t ftpad_patch_ranges(const struct ftpad_patch_prep *prep, struct ftpad_patch_range *out,
			  size_t max)
{
	const struct lp_patch *p = prep->patch;
	size_t n = 0;

	if (prep->revert) {
		/* It goes away: no thread may be anywhere in its code, nor in
		 * a stub on its way there. */
		if (max)
			out[n++] = (struct ftpad_patch_range){ p->lo, p->hi, p->path };
		for (size_t i = 0; i < p->nfuncs && n < max; i++)
			if (p->funcs[i].target != p->funcs[i].new_fn)
				out[n++] = (struct ftpad_patch_range){ p->funcs[i].target,
								       p->funcs[i].target + STUB_SIZE,
								       p->funcs[i].name };
		return n;
	}
	for (size_t i = 0; i < p->nfuncs && n < max; i++) {
		const struct lp_func *f = &p->funcs[i];
		const struct ftpad_sym *below = f->below_fn ? ftpad_symbol_of(f->below_fn) : NULL;

		out[n++] = (struct ftpad_patch_range){ f->old, f->old + (f->old_size ? f->old_size : 1),
						       f->name };
		/* The previous patch's function, which is what runs now, and
		 * its stub. */
		if (below && n < max)
			out[n++] = (struct ftpad_patch_range){ below->addr, below->addr + below->size,
							       f->name };
		if (f->below && f->below != f->below_fn && n < max)
			out[n++] = (struct ftpad_patch_range){ f->below, f->below + STUB_SIZE, f->name };
	}
	return n;
}

int ftpad_patch_commit(struct ftpad_patch_prep *prep, int (*await)(void *arg), void *arg,
		       char *err, size_t errlen)
{
	/* await runs with every lock a switch needs held, so that the
	 * threads the tool then stops cannot hold one. */
	struct commit c = { .p = prep->patch, .revert = prep->revert, .await = await, .arg = arg,
			    .err = err, .errlen = errlen };
	int e;

	ftpad_lock_take();
	e = ftpad_modules_hold(prep->revert ? revert_held : apply_held, &c);
	ftpad_lock_give();
	prep->result = e;
	prep->switched = c.switched;
	return e;
}

void ftpad_patch_finish(struct ftpad_patch_prep *prep, bool unload)
{
	struct lp_patch *p = prep->patch;

	if (prep->revert && !prep->result) {
		/* No call starts in the patch any more; the tool checked that
		 * no thread was in it when it switched (unload). */
		if (unload) {
			ftpad_lock_take();
			release_stubs(p);
			ftpad_lock_give();
			dlclose(p->handle);
		}
		unpin_modules(p);
		ftpad_free(p);
	} else if (!prep->revert && prep->result && !prep->switched) {
		/* No pad led to its stubs. */
		ftpad_lock_take();
		release_stubs(p);
		ftpad_lock_give();
		unpin_modules(p);
		dlclose(p->handle);
		ftpad_free(p);
	}
	pthread_mutex_unlock(&patch_lock);
}

size_t ftpad_patch_list(char *buf, size_t size)
{
	size_t used = 0;

	if (size)
		buf[0] = 0;
	ftpad_lock_take();
	for (struct lp_patch *p = applied; p; p = p->next) {
		used += (size_t)snprintf(buf + (used < size ? used : size), used < size ? size - used : 0,
					 "%s", p->path);
		for (size_t i = 0; i < p->nfuncs; i++)
			used += (size_t)snprintf(buf + (used < size ? used : size),
						 used < size ? size - used : 0, "%c%s",
						 i ? ',' : ' ', p->funcs[i].name);
		used += (size_t)snprintf(buf + (used < size ? used : size),
					 used < size ? size - used : 0, "\n");
	}
	ftpad_lock_give();
	return used;
}

/* ---- the calls of ftpad.h ---- */

/* Prepared (e: the preparation's result), switched without the stack
 * check: a reverted patch stays loaded, since a thread may still be in it. */
static int switch_unchecked(struct ftpad_patch_prep *prep, int e, char *err, size_t errlen)
{
	if (e)
		return e;
	e = ftpad_patch_commit(prep, NULL, NULL, err, errlen);
	ftpad_patch_finish(prep, false);
	return e;
}

int ftpad_patch_apply(const char *path, char *err, size_t errlen)
{
	struct ftpad_patch_prep prep;

	return switch_unchecked(&prep, ftpad_patch_prepare(path, &prep, err, errlen), err, errlen);
}

int ftpad_patch_revert(const char *path, char *err, size_t errlen)
{
	struct ftpad_patch_prep prep;

	return switch_unchecked(&prep, ftpad_patch_prepare_revert(path, &prep, err, errlen), err,
				errlen);
}
