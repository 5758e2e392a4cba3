/* SPDX-License-Identifier: MIT */
/*
 * module.c - finding each loaded module's site table, holding the modules
 * still while code is written, and mapping each module's stub page.
 *
 * Mechanism (docs/design.md "Site discovery"): dl_iterate_phdr lists the loaded
 * modules, whether libftpad is linked in, preloaded or linked statically,
 * and each module's file (/proc/self/exe for the program) gives its section
 * headers, hence the address of __ftpad_sites.  This needs nothing from the
 * compiler beyond the records and sees modules loaded before libftpad.  A
 * later dlopen shows up as a new dl_iterate_phdr entry (dlpi_adds), so every
 * API call rescans cheaply, as does libftpad.so's dlopen and dlclose
 * (dlhooks.c).  A module that is no longer listed (dlpi_subs changed) is
 * unlinked, and freed after a grace period; one listed at the address and
 * under the name of a known one may still be a new load (same_load()).
 *
 * Code is read and written only inside ftpad_modules_hold(): from within a
 * dl_iterate_phdr callback, which holds glibc's dl_load_write_lock, the
 * lock under which dlclose unlinks and unmaps a module (_dl_close_worker,
 * glibc 2.36).  So the list of modules is made current there, and no module
 * of it can be unmapped (nor a new one mapped at its address) until the
 * writer is out, whatever the hooks saw: a dlclose in another thread, in a
 * callback, or in a program linked with libftpad.a, which has no hooks.
 * Lock order: ftpad_lock, then dl_load_write_lock.  glibc takes its
 * dl_load_lock before its write lock and runs constructors and destructors
 * under the former only, so one that calls ftpad_register_ops() waits for
 * ftpad_lock without holding the write lock: no cycle.  Nothing inside the
 * hold may wait for a thread that may be in a callback (a callback may
 * call dlopen or dlclose, which wait for the write lock): grace periods
 * are waited for outside it (patch.c).
 *
 * Sites are checked byte by byte before anything is patched: the runtime
 * never writes to a pad that is not exactly what its record describes.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arch.h"
#include "internal.h"

static struct ftpad_module *modules; /* atomic list head */
static unsigned long long last_adds = ~0ull, last_subs = ~0ull;
static bool scanned; /* the tables were read once */
/* A module with sites was read since the last ftpad_update_sites(). */
static bool added;
/*
 * A thread is in one of our dl_iterate_phdr calls (a scan, a hold), so may
 * hold glibc's write lock.  A child forked then from a callback (ops.c)
 * may find that lock held for ever (glibc's fork resets dl_load_lock, not
 * dl_load_write_lock): it can neither list modules nor dlopen, and has
 * only its own thread.  Its list is the one the parent had (no module is
 * unloaded while the lock is held), so it writes without listing.
 */
static int listing; /* under ftpad_lock */
static bool dl_lock_lost;

struct ftpad_module *ftpad_modules(void)
{
	return __atomic_load_n(&modules, __ATOMIC_ACQUIRE);
}

struct ftpad_module *ftpad_module_of(uintptr_t addr)
{
	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next)
		if (m->lo <= addr && addr < m->hi)
			return m;
	return NULL;
}

int ftpad_module_prot(const struct ftpad_module *mod, uintptr_t addr)
{
	for (int i = 0; i < mod->nsegs; i++)
		if (mod->segs[i].lo <= addr && addr < mod->segs[i].hi)
			return mod->segs[i].prot;
	return -1;
}

uintptr_t ftpad_module_limit(const struct ftpad_module *mod, uintptr_t addr)
{
	for (int i = 0; i < mod->nsegs; i++)
		if (mod->segs[i].lo <= addr && addr < mod->segs[i].hi)
			return mod->segs[i].hi;
	return addr;
}

bool ftpad_modules_scanned(void)
{
	return scanned;
}

static bool in_exec_segment(const struct ftpad_module *mod, uintptr_t addr, size_t len)
{
	int prot = ftpad_module_prot(mod, addr);

	return prot >= 0 && (prot & PROT_EXEC) && ftpad_module_prot(mod, addr + len - 1) == prot;
}

/* The index of the first site of mod at or after addr (mod->nsites: none). */
static size_t first_site_from(const struct ftpad_module *mod, const struct ftpad_site *sites,
			      size_t n, uintptr_t addr)
{
	size_t lo = 0, hi = n;

	(void)mod;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ftpad_site_addr(&sites[mid]) < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct ftpad_site *ftpad_site_by_entry(uintptr_t entry)
{
	struct ftpad_module *mod = ftpad_module_of(entry);
	size_t i;

	if (!mod)
		return NULL;
	/* Sites are sorted by address; the first one at or after an entry is
	 * its function's entry site, if it has one: the bytes between an
	 * entry and its site (endbr64, mov x9, x30) hold no other site. */
	i = first_site_from(mod, mod->sites, mod->nsites, entry);
	return i < mod->nsites && mod->sites[i].entry == entry &&
	       !ftpad_site_is_exit(&mod->sites[i]) ? &mod->sites[i] : NULL;
}

struct ftpad_site *ftpad_site_by_addr(uintptr_t addr)
{
	struct ftpad_module *mod = ftpad_module_of(addr);
	size_t i;

	if (!mod)
		return NULL;
	i = first_site_from(mod, mod->sites, mod->nsites, addr);
	return i < mod->nsites && ftpad_site_addr(&mod->sites[i]) == addr ? &mod->sites[i] : NULL;
}

static int cmp_site(const void *a, const void *b)
{
	uintptr_t x = ftpad_site_addr(a), y = ftpad_site_addr(b);

	return x < y ? -1 : x > y;
}

static void set_segments(struct ftpad_module *mod, const struct dl_phdr_info *info)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

	mod->base = info->dlpi_addr;
	mod->lo = UINTPTR_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		struct ftpad_segment *seg;

		if (ph->p_type != PT_LOAD || mod->nsegs == FTPAD_MAX_SEGMENTS)
			continue;
		seg = &mod->segs[mod->nsegs++];
		seg->lo = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
		seg->hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + page - 1) & ~(page - 1);
		seg->prot = (ph->p_flags & PF_R ? PROT_READ : 0) |
			    (ph->p_flags & PF_W ? PROT_WRITE : 0) |
			    (ph->p_flags & PF_X ? PROT_EXEC : 0);
		if (seg->lo < mod->lo)
			mod->lo = seg->lo;
		if (seg->hi > mod->hi)
			mod->hi = seg->hi;
	}
}

/* Whether the ELF file image map (of size bytes) has the program headers
 * the loader used for the module of info (it copies them verbatim). */
static bool phdrs_match(const void *map, size_t size, const struct dl_phdr_info *info)
{
	const ElfW(Ehdr) *eh = map;

	return eh->e_phnum == info->dlpi_phnum &&
	       eh->e_phoff + eh->e_phnum * sizeof(ElfW(Phdr)) <= size &&
	       !memcmp((const char *)map + eh->e_phoff, info->dlpi_phdr,
		       eh->e_phnum * sizeof(ElfW(Phdr)));
}

/*
 * Map the module's file and check it is the one loaded: its program headers
 * must be the ones the loader used (they are copied into memory verbatim).
 */
static int map_file(struct ftpad_module *mod, const char *path, const struct dl_phdr_info *info)
{
	const ElfW(Ehdr) *eh;
	struct stat st;
	void *map;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size < sizeof(*eh)) {
		close(fd);
		return -EINVAL;
	}
	map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -errno;
	eh = map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
	    eh->e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
	    eh->e_shentsize != sizeof(ElfW(Shdr)) || !phdrs_match(map, st.st_size, info) ||
	    eh->e_shoff + eh->e_shnum * sizeof(ElfW(Shdr)) > (size_t)st.st_size ||
	    eh->e_shstrndx >= eh->e_shnum) {
		munmap(map, st.st_size);
		return -ENOEXEC;
	}
	mod->map = map;
	mod->map_size = st.st_size;
	return 0;
}

static void warn_site(const struct ftpad_module *mod, const struct ftpad_site *s,
		      const char *why)
{
	if (s->name)
		ftpad_warn("%s: warning: ftpad: %s: %s; not patched\n", mod->path, s->name, why);
	else
		ftpad_warn("%s: warning: ftpad: site at %#lx: %s; not patched\n", mod->path,
			   (unsigned long)(ftpad_site_addr(s) - mod->base), why);
}

/*
 * Whether [addr, addr + len) is code, as in_exec_segment(), first against
 * the code segment of the site before (*last): records come in address
 * order, so the segments are looked up once each, not six times a site.
 */
static bool in_code(const struct ftpad_module *mod, const struct ftpad_segment **last,
		    uintptr_t addr, size_t len)
{
	if (*last && addr >= (*last)->lo && addr < (*last)->hi && len <= (*last)->hi - addr)
		return true;
	if (!in_exec_segment(mod, addr, len))
		return false;
	for (int i = 0; i < mod->nsegs; i++)
		if (mod->segs[i].lo <= addr && addr < mod->segs[i].hi)
			*last = &mod->segs[i];
	return true;
}

/* What is wrong with the record's addresses, or NULL. */
static const char *check_addresses(const struct ftpad_module *mod,
				   const struct ftpad_segment **seg,
				   const struct ftpad_site_record *rec, struct ftpad_site *s)
{
	uintptr_t addr = ftpad_site_field_addr(&rec->site), slot = ftpad_site_field_addr(&rec->ops);

	bool exit = ftpad_site_is_exit(s);

	if (rec->arch != ftpad_arch_id)
		return "it was made for another architecture";
	if (!exit && (addr < s->entry || addr - s->entry > 64))
		return "the site does not follow the entry";
	if (exit && (intptr_t)(int32_t)(addr - s->entry) != (intptr_t)(addr - s->entry))
		return "the exit site is more than 2 GiB from its entry";
	s->site_off = (int32_t)(addr - s->entry);
	if (slot && slot + 8 != s->entry)
		return "the ops slot does not end at the entry";
	if (!in_code(mod, seg, s->entry, 1) || !in_code(mod, seg, addr, ftpad_arch_site_len) ||
	    (slot && !in_code(mod, seg, slot, 8)))
		return "its addresses are outside the module's code";
	/* The slot is the function's, written by its entry site only. */
	s->state |= slot && !exit ? FTPAD_S_SLOT : 0;
	return NULL;
}

/* Turn one record into a site; returns 0 if it is patchable. */
static int add_site(struct ftpad_module *mod, const struct ftpad_segment **seg,
		    const struct ftpad_site_record *rec, struct ftpad_site *s)
{
	const char *why = NULL;

	memset(s, 0, sizeof(*s));
	s->entry = ftpad_site_field_addr(&rec->entry);
	s->flags = rec->flags;
	s->type = rec->kind;
	if (rec->version == FTPAD_SITE_VERSION_ENTRY && rec->kind != FTPAD_SITE_KIND_ENTRY)
		why = "a version 1 record has a kind";
	else if (rec->kind > FTPAD_SITE_KIND_TAIL_EXIT)
		why = "its kind is unknown";
	if (!why && rec->name) {
		uintptr_t name = ftpad_site_field_addr(&rec->name);

		if (name >= mod->lo && name < mod->hi)
			s->name = (const char *)name;
		else
			why = "its name is outside the module";
	}
	/* Made as the user's counts asked, and skipped: docs/format.md. */
	if (!why && (rec->flags & FTPAD_SITE_NO_SITE))
		why = "its pad is smaller than a site, as its counts asked (docs/format.md "
		      "\"Pads without a site\")";
	if (!why)
		why = check_addresses(mod, seg, rec, s);
	if (!why && ftpad_arch_site_init(rec, s, &why) == 0)
		return 0;
	warn_site(mod, s, why);
	return -EINVAL;
}

/*
 * Tie each exit site of the n sorted ones to its function's entry site (the
 * same entry): an exit site whose entry site was rejected is dropped, an
 * entry site left without exit sites is marked entries only
 * (FTPAD_T_NOEXIT), unless its compiler found it never returns
 * (FTPAD_SITE_NO_RETURN).  Each exit gets its stub's index.  Returns the sites
 * kept, still sorted.  O(n log n): one search per exit site.
 */
static size_t tie_exits(struct ftpad_module *mod, size_t n)
{
	struct ftpad_site *sites = mod->sites;
	size_t kept = 0;

	for (size_t i = 0; i < n; i++)
		if (!ftpad_site_is_exit(&sites[i]) && !(sites[i].flags & FTPAD_SITE_NO_RETURN))
			sites[i].type |= FTPAD_T_NOEXIT;
	for (size_t i = 0; i < n; i++) {
		struct ftpad_site *s = &sites[i];
		size_t e;

		if (!ftpad_site_is_exit(s))
			continue;
		e = first_site_from(mod, sites, n, s->entry);
		if (e < n && sites[e].entry == s->entry && !ftpad_site_is_exit(&sites[e]))
			sites[e].type &= ~FTPAD_T_NOEXIT;
		else
			s->type = 0xff; /* dropped below */
	}
	for (size_t i = 0; i < n; i++) {
		if (sites[i].type == 0xff) {
			ftpad_debug("ftpad: %s: the exit site at %#lx has no entry site; ignored\n",
				    mod->path, (unsigned long)ftpad_site_addr(&sites[i]));
			continue;
		}
		if (ftpad_site_is_exit(&sites[i]))
			sites[i].exit_index = (uint32_t)mod->nexits++;
		sites[kept++] = sites[i];
	}
	return kept;
}

/* Read the module's records; a table of an unknown version is rejected whole. */
static int read_sites(struct ftpad_module *mod)
{
	const ElfW(Shdr) *sh = ftpad_module_section(mod, FTPAD_SITES_SECTION, 0);
	const struct ftpad_site_record *rec;
	const struct ftpad_segment *seg = NULL;
	size_t n, kept = 0;
	bool sorted = true;

	if (!sh)
		return 0;
	n = sh->sh_size / sizeof(*rec);
	rec = (const void *)(mod->base + sh->sh_addr);
	if (!(sh->sh_flags & SHF_ALLOC) || sh->sh_size % sizeof(*rec) ||
	    ftpad_module_prot(mod, (uintptr_t)rec) < 0 ||
	    ftpad_module_prot(mod, (uintptr_t)(rec + n) - 1) < 0) {
		ftpad_warn("%s: warning: ftpad: malformed %s section; ignored\n", mod->path,
			   FTPAD_SITES_SECTION);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if (rec[i].version > FTPAD_SITE_VERSION) {
			ftpad_warn("%s: warning: ftpad: site record version %u is newer than "
				   "this runtime (%u); table ignored\n", mod->path,
				   rec[i].version, FTPAD_SITE_VERSION);
			return -EINVAL;
		}
	}
	mod->sites = ftpad_alloc((n ? n : 1) * sizeof(*mod->sites));
	if (!mod->sites)
		return -ENOMEM;
	/* One pass over the sites, which for a large module are far more than
	 * the caches hold: whether they are in order and all named is noted
	 * on the way. */
	for (size_t i = 0; i < n; i++) {
		struct ftpad_site *s = &mod->sites[kept];

		if (!rec[i].version || add_site(mod, &seg, &rec[i], s))
			continue;
		sorted &= !kept || ftpad_site_addr(&s[-1]) < ftpad_site_addr(s);
		mod->unnamed |= !s->name;
		kept++;
	}
	/* The linker keeps the records in address order: usually no sort
	 * (a function's cold part, with exits of its own, breaks it). */
	if (!sorted)
		ftpad_sort(mod->sites, kept, sizeof(*mod->sites), cmp_site);
	mod->nsites = tie_exits(mod, kept);
	return 0;
}

/* Sites without a name in their record take the symbol at their entry. */
static void name_sites(struct ftpad_module *mod)
{
	for (size_t i = 0; mod->unnamed && i < mod->nsites; i++) {
		const struct ftpad_sym *sym;

		if (mod->sites[i].name)
			continue;
		ftpad_module_load_symbols(mod);
		sym = ftpad_module_symbol(mod, mod->sites[i].entry);
		if (sym && sym->addr == mod->sites[i].entry)
			mod->sites[i].name = sym->name;
	}
}

/*
 * libftpad.so itself is never traced, even if someone padded it: its own
 * functions run in the middle of patching.  (Linked statically, it is part
 * of the program, whose sites must of course be found.)
 */
static bool is_self(const struct ftpad_module *mod, bool first)
{
	uintptr_t self = (uintptr_t)&is_self;

	return !first && mod->lo <= self && self < mod->hi;
}

/* The program's name for messages, in buf: without /proc, the path it
 * was started by. */
static const char *program_path(char *buf, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", buf, size - 1);
	const char *execfn = (const char *)getauxval(AT_EXECFN);

	if (n <= 0)
		return execfn ? execfn : "[program]";
	buf[n] = 0;
	return buf;
}

/*
 * The program's file: /proc/self/exe (still right if the file was
 * replaced), else, without /proc, the path it was started by (AT_EXECFN;
 * relative to the directory it was started in).  map_file() rejects a
 * file whose program headers are not the loaded ones.  Neither: a
 * warning, as the program's own sites are then not patched.
 */
static void map_program(struct ftpad_module *mod, const struct dl_phdr_info *info)
{
	const char *execfn = (const char *)getauxval(AT_EXECFN);
	int err = map_file(mod, "/proc/self/exe", info), err2 = -ENOENT;

	if (!err)
		return;
	if (execfn && !(err2 = map_file(mod, execfn, info))) {
		ftpad_info("ftpad: /proc/self/exe: %s; the program read from '%s'\n",
			   strerror(-err), execfn);
		return;
	}
	ftpad_warn("%s: warning: ftpad: cannot read the program's file (/proc/self/exe: %s; "
		   "AT_EXECFN '%s': %s): its own sites are not patched\n", mod->path,
		   strerror(-err), execfn ? execfn : "", strerror(-err2));
}

/* The module loaded at lo from the file called name, if we have it. */
static struct ftpad_module *known(uintptr_t lo, const char *name, bool first)
{
	for (struct ftpad_module *m = ftpad_modules(); m; m = m->next)
		if (m->lo == lo && (first || !strcmp(m->path, *name ? name : "[anonymous]")))
			return m;
	return NULL;
}

/* Whether the bytes of site s still show what libftpad wrote there, by its
 * state (true if it wrote nothing or is half way through a write). */
static bool site_as_written(const struct ftpad_site *s)
{
	uintptr_t prep;
	uint8_t insn[8];

	if (__atomic_load_n(&s->patching, __ATOMIC_RELAXED))
		return true;
	if (s->state & FTPAD_S_ENABLED)
		return ftpad_arch_site_calls(ftpad_site_addr(s));
	if (s->state & FTPAD_S_SLOTTED)
		return *(const uintptr_t *)ftpad_site_slot(s) == (uintptr_t)s;
	if (s->state & FTPAD_S_PREPARED) {
		ftpad_arch_site_prep(s, &prep, insn);
		return !prep || !memcmp((const void *)prep, insn, ftpad_arch_site_len);
	}
	return true;
}

static bool site_written(const struct ftpad_site *s)
{
	return !__atomic_load_n(&s->patching, __ATOMIC_RELAXED) &&
	       (s->state & (FTPAD_S_ENABLED | FTPAD_S_SLOTTED | FTPAD_S_PREPARED));
}

/*
 * Whether the known module m, listed again at the same address and under
 * the same name, is still the load whose tables we have.  A dlclose and a
 * dlopen between two scans (libftpad.a has no hooks; a dlclose in a
 * callback does not rescan) leave exactly that, and dlpi_subs is all glibc
 * tells (no public per-load generation).  A new load has lost everything
 * libftpad wrote: so the first site our state says was written fully
 * (a call, its slot, a prep) tells which, from memory, which no dlclose
 * can unmap during the scan.  With no such site, the old tables equal new
 * ones if the file is the same (the program headers in memory are those of
 * the file we mapped, as map_file() checks), and are kept: re-reading a
 * large module at every dlclose elsewhere would cost for nothing.  Sites
 * left half written are rewritten whole by the next update either way.
 */
static bool same_load(const struct ftpad_module *m, const struct dl_phdr_info *info)
{
	for (size_t i = 0; i < m->nsites; i++)
		if (site_written(&m->sites[i]))
			return site_as_written(&m->sites[i]);
	return m->map ? phdrs_match(m->map, m->map_size, info) : !m->nsites;
}

/* A module unloaded a grace period ago, and everything of it. */
static void free_module(struct ftpad_retired *r)
{
	struct ftpad_module *m = (struct ftpad_module *)r;
	if (m->stubs)
		munmap((void *)m->stubs, m->stubs_size);
	if (m->map)
		munmap((void *)m->map, m->map_size);
	ftpad_free(m->syms);
	ftpad_free(m->sites);
	ftpad_free(m);
}

/*
 * Unlink module *pp: dlclose removed it.  Its code is gone, so nothing is
 * written there; threads may still be reading the structure (dispatch,
 * lookups), so it is freed after a grace period (grace.c's
 * ftpad_reclaim()).
 */
static void forget(struct ftpad_module **pp, const char *why)
{
	struct ftpad_module *m = *pp;

	ftpad_debug("ftpad: %s: %s, %zu sites forgotten\n", m->path, why, m->nsites);
	/* m->next stays, for readers standing on m right now. */
	__atomic_store_n(pp, m->next, __ATOMIC_RELEASE);
	ftpad_retire(&m->retired, free_module);
}

static void forget_module(struct ftpad_module *m, const char *why)
{
	struct ftpad_module **pp = &modules;

	while (*pp != m)
		pp = &(*pp)->next;
	forget(pp, why);
}

struct scan {
	int index;
	int err;
	unsigned long long subs; /* dlpi_subs now */
};

static int add_module(struct dl_phdr_info *info, const struct scan *scan)
{
	struct ftpad_module probe = { 0 }, *mod, *old;
	const char *name = info->dlpi_name, *path;
	bool first = scan->index == 0;
	char exe[4096];
	int err = 0;

	set_segments(&probe, info);
	old = probe.nsegs ? known(probe.lo, name, first) : NULL;
	/* The program is never unloaded. */
	if (old && !first && old->verified_subs != scan->subs) {
		if (!same_load(old, info)) {
			forget_module(old, "unloaded and loaded again");
			old = NULL;
		} else {
			old->verified_subs = scan->subs;
		}
	}
	if (!probe.nsegs || old) {
		if (old)
			old->seen = true;
		return 0;
	}
	/* The program has no name; vdso-like modules have no file. */
	path = first && !*name ? program_path(exe, sizeof(exe)) : *name ? name : "[anonymous]";
	/* The module and its path in one block. */
	mod = ftpad_alloc(sizeof(*mod) + strlen(path) + 1);
	if (!mod)
		return -ENOMEM;
	*mod = probe;
	mod->path = (char *)(mod + 1);
	strcpy(mod->path, path);
	mod->seen = true;
	mod->verified_subs = scan->subs;
	if (first && !*name)
		map_program(mod, info);
	else if (strchr(name, '/'))
		map_file(mod, name, info);
	if (mod->map && !is_self(mod, first))
		err = read_sites(mod);
	name_sites(mod);
	if (ftpad_symbols_eager())
		ftpad_module_load_symbols(mod);
	if (mod->nsites)
		ftpad_debug("ftpad: %s: %zu sites\n", mod->path, mod->nsites);
	added |= mod->nsites > 0;
	mod->next = modules;
	__atomic_store_n(&modules, mod, __ATOMIC_RELEASE);
	return err == -ENOMEM ? err : 0;
}

static int scan_one(struct dl_phdr_info *info, size_t size, void *data)
{
	struct scan *scan = data;

	/* Nothing loaded or unloaded since the last scan: stop at once. */
	if (scan->index == 0 && size > offsetof(struct dl_phdr_info, dlpi_subs)) {
		if (info->dlpi_adds == last_adds && info->dlpi_subs == last_subs)
			return 1;
		last_adds = info->dlpi_adds;
		last_subs = info->dlpi_subs;
		scan->subs = info->dlpi_subs;
	}
	scan->err = add_module(info, scan);
	scan->index++;
	return scan->err;
}

/* Unlink the modules the scan did not see: dlclose removed them. */
static void forget_unloaded(void)
{
	struct ftpad_module **pp = &modules;

	while (*pp) {
		struct ftpad_module *m = *pp;

		if (m->seen) {
			m->seen = false;
			pp = &m->next;
			continue;
		}
		forget(pp, "unloaded");
	}
}

static void list_modules(int (*fn)(struct dl_phdr_info *, size_t, void *), void *data)
{
	listing++;
	dl_iterate_phdr(fn, data);
	listing--;
}

int ftpad_modules_refresh(void)
{
	/* dlpi_subs is there since glibc 2.4. */
	struct scan scan = { 0, 0, 0 };

	if (dl_lock_lost)
		return 0;
	list_modules(scan_one, &scan);
	scanned = true;
	if (scan.err) {
		last_adds = ~0ull; /* retry next time */
		for (struct ftpad_module *m = ftpad_modules(); m; m = m->next)
			m->seen = false;
	} else if (scan.index) {
		forget_unloaded();
	}
	return scan.err;
}

bool ftpad_modules_try_refresh(void)
{
	/* Only tried: a lookup runs in callbacks, whose end the holder may
	 * be waiting for, and inside libftpad's own calls. */
	if (!ftpad_lock_try())
		return false;
	ftpad_modules_refresh();
	ftpad_lock_give();
	return true;
}

bool ftpad_modules_take_added(void)
{
	bool was = added;

	added = false;
	return was;
}

/*
 * listing keeps its value: a lister interrupted by the handler that forked
 * goes on in the child and counts itself down, and dl_lock_lost, once set,
 * is never cleared, so a count left by a thread the child lacks is moot.
 */
void ftpad_modules_fork_child(void)
{
	dl_lock_lost |= listing > 0;
}

struct hold {
	int (*fn)(void *arg);
	void *arg;
	int err;
	bool ran;
};

/*
 * The scan's own dl_iterate_phdr nests: glibc's write lock is recursive,
 * owned by this thread's id.  A handler that forked between the scan's
 * dl_lock_lost test and that lock would leave the child waiting for an
 * owner it does not have, so no asynchronous signal comes in between.
 * Synchronous ones stay open: blocking them kills the process.
 */
static int refresh_nested(void)
{
	static const int synchronous[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP };
	sigset_t async, old;
	int err;

	sigfillset(&async);
	for (size_t i = 0; i < sizeof(synchronous) / sizeof(synchronous[0]); i++)
		sigdelset(&async, synchronous[i]);
	pthread_sigmask(SIG_BLOCK, &async, &old);
	err = ftpad_modules_refresh();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

static int hold_one(struct dl_phdr_info *info, size_t size, void *data)
{
	struct hold *h = data;

	(void)info, (void)size;
	h->err = refresh_nested();
	if (!h->err)
		h->err = h->fn(h->arg);
	h->ran = true;
	return 1;
}

int ftpad_modules_hold(int (*fn)(void *arg), void *arg)
{
	struct hold h = { fn, arg, 0, false };

	if (dl_lock_lost)
		return fn(arg);
	list_modules(hold_one, &h);
	return h.ran ? h.err : -ENOENT;
}

/*
 * Stub pages: each module's trampoline stubs, on a page within branch
 * reach of all of its code (arch.h ftpad_arch_reach).
 */
/* A page for the stubs within reach of every byte of the module, or 0. */
static uintptr_t map_near(const struct ftpad_module *mod, size_t size)
{
	const uintptr_t step = 0x10000, floor = 0x100000;
	uintptr_t min = mod->hi > ftpad_arch_reach ? mod->hi - ftpad_arch_reach : floor;
	uintptr_t max = mod->lo + ftpad_arch_reach - size;
	uintptr_t down = mod->lo & ~(step - 1), up = (mod->hi + step - 1) & ~(step - 1);

	/* Below first: above an executable lies its brk heap. */
	for (int i = 0; i < 8192; i++) {
		uintptr_t try[2] = { down - (i + 1) * step, up + i * step };

		for (int j = 0; j < 2; j++) {
			void *p;

			if ((j == 0 && (down < (i + 1) * step + floor || try[0] < min)) ||
			    (j == 1 && try[1] > max))
				continue;
			p = mmap((void *)try[j], size, PROT_READ | PROT_EXEC,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (p == (void *)try[j])
				return try[j];
			/* A kernel without MAP_FIXED_NOREPLACE took it as a hint. */
			if (p != MAP_FAILED)
				munmap(p, size);
		}
	}
	return 0;
}

uintptr_t ftpad_map_near(const struct ftpad_module *mod, size_t size)
{
	return map_near(mod, size);
}

/* The stubs of mod mapped at page: the arch's shared ones, then one per
 * exit site where the arch needs that (aarch64). */
static void fill_stubs(const struct ftpad_module *mod, uint8_t *buf, uintptr_t page)
{
	ftpad_arch_stubs_fill(buf, page);
	if (!ftpad_arch_exit_stub_size)
		return;
	for (size_t i = 0; i < mod->nsites; i++) {
		const struct ftpad_site *s = &mod->sites[i];
		size_t off = ftpad_arch_stubs_size + s->exit_index * ftpad_arch_exit_stub_size;

		if (ftpad_site_is_exit(s))
			ftpad_arch_exit_stub_fill(buf + off, page + off, s);
	}
}

int ftpad_module_stubs(struct ftpad_module *mod)
{
	size_t page_size = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = ftpad_arch_stubs_size + mod->nexits * ftpad_arch_exit_stub_size;
	size_t size = (len + page_size - 1) & ~(page_size - 1);
	struct ftpad_poke *pokes;
	uint8_t *buf;
	uintptr_t page;
	int err = -ENOMEM;

	if (mod->stubs)
		return 0;
	page = map_near(mod, size);
	if (!page) {
		ftpad_warn("%s: error: ftpad: no free page within branch range of %#lx-%#lx\n",
			   mod->path, (unsigned long)mod->lo, (unsigned long)mod->hi);
		return -ERANGE;
	}
	buf = ftpad_alloc(len);
	pokes = ftpad_alloc(len / 8 * sizeof(*pokes));
	if (buf && pokes) {
		fill_stubs(mod, buf, page);
		for (size_t i = 0; i < len / 8; i++) {
			pokes[i].addr = page + 8 * i;
			pokes[i].limit = page + size;
			pokes[i].prot = PROT_READ | PROT_EXEC;
			pokes[i].len = 8;
			memcpy(pokes[i].bytes, buf + 8 * i, 8);
		}
		/* Nothing runs there yet: one write. */
		err = ftpad_text_poke(pokes, len / 8, true);
	}
	ftpad_free(buf);
	ftpad_free(pokes);
	if (err) {
		munmap((void *)page, size);
		return err;
	}
	mod->stubs_size = size;
	mod->stubs = page;
	return 0;
}

void ftpad_poke_place(struct ftpad_poke *p, struct ftpad_seg_cache *c,
		      const struct ftpad_module *mod, uintptr_t addr)
{
	if (c->mod != mod || addr < c->lo || addr >= c->hi) {
		c->mod = mod;
		c->lo = addr;
		c->hi = ftpad_module_limit(mod, addr);
		c->prot = ftpad_module_prot(mod, addr);
	}
	p->addr = addr;
	p->prot = c->prot;
	p->limit = c->hi;
}
