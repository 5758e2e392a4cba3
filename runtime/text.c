/* SPDX-License-Identifier: MIT */
/*
 * text.c - writing to code (and other read-only mappings) in this process.
 *
 * docs/design.md "Patching at run time": first pwrite() to /proc/self/mem, which
 * the kernel performs with FOLL_FORCE without ever making the mapping
 * writable, so no other thread sees writable text and MDWE does not object.
 * Where that is refused (proc_mem.force_override=never or ptrace), fall back
 * to mprotect() of just the touched pages, made writable one contiguous run
 * at a time and put back to their original protection at once.  Where both
 * are refused, say so and fail; never leave text writable.
 *
 * FTPAD_TEXT_WRITE=procmem|mprotect in the environment forces one method
 * (for tests, and to work around a kernel that misbehaves with one).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

enum method { M_UNKNOWN, M_PROCMEM, M_MPROTECT };

static enum method method;  /* what worked last; under ftpad_lock */
/*
 * /proc/self/mem, kept open between writes, and checked before each one
 * (fd.c): the number may have been closed and given to a file of the
 * program's, and in a forked child it is the parent's memory.
 */
static struct ftpad_own_fd mem = { .fd = -1 };
static pid_t mem_pid;       /* whose memory mem.fd writes */
static bool mem_checked;    /* a write through mem.fd was read back */

static int open_mem(void)
{
	pid_t pid = getpid();
	bool ours = ftpad_own_fd_valid(&mem, mem.fd);
	int fd;

	if (ours && mem_pid == pid)
		return mem.fd;
	/* The parent's, in a forked child: ours to close.  A number that
	 * holds another file now is the program's: left alone. */
	if (ours)
		close(mem.fd);
	mem.fd = -1;
	fd = ftpad_own_fd_open(&mem, "/proc/self/mem", O_RDWR, 0, false);
	if (fd < 0)
		return fd;
	mem.fd = fd;
	mem_pid = pid;
	mem_checked = false;
	return fd;
}

static int pwrite_all(int fd, const void *buf, size_t len, uintptr_t addr)
{
	ssize_t r = pwrite(fd, buf, len, (off_t)addr);

	return r == (ssize_t)len ? 0 : r < 0 ? -errno : -EIO;
}

/*
 * len bytes of buf to addr through /proc/self/mem, its descriptor checked
 * first (open_mem()).  A signal handler that forks between the check and
 * the write leaves the child with a write into its parent's memory (the
 * bytes the parent is writing anyway, in the same step): the child then
 * writes its own.  The first write through a newly opened file is read
 * back and compared, so that a file that takes writes without making them
 * (the wrong process's memory, a kernel that goes its own way) fails
 * loudly; once one write was seen in memory, the rest are trusted: a
 * compare costs as much as the copy that assembled the run, on every round
 * of every batch.
 */
static int pwrite_code(const void *buf, size_t len, uintptr_t addr)
{
	int fd, err;

	do {
		fd = open_mem();
		if (fd < 0)
			return fd;
		err = pwrite_all(fd, buf, len, addr);
	} while (getpid() != mem_pid);
	if (err || mem_checked)
		return err;
	if (memcmp((const void *)addr, buf, len))
		return -EIO;
	mem_checked = true;
	return 0;
}

static uintptr_t page_size(void)
{
	static uintptr_t size;

	if (!size)
		size = (uintptr_t)sysconf(_SC_PAGESIZE);
	return size;
}

/* [*lo, *hi) widened to whole pages, as mprotect() takes them. */
static void whole_pages(uintptr_t *lo, uintptr_t *hi)
{
	uintptr_t page = page_size();

	*lo &= ~(page - 1);
	*hi = (*hi + page - 1) & ~(page - 1);
}

/* The pages [lo, hi) back to prot after a write; an error says so, as the
 * code is left writable. */
static int protect_back(uintptr_t lo, uintptr_t hi, int prot)
{
	int err;

	if (mprotect((void *)lo, hi - lo, prot) == 0)
		return 0;
	err = -errno;
	ftpad_warn("ftpad: error: cannot restore the protection of %#lx-%#lx: %s\n",
		   (unsigned long)lo, (unsigned long)hi, ftpad_strerror(err));
	return err;
}

/*
 * The protection a page has, not the one its ELF segment asks for: the
 * program or a library may have changed its own text (a JIT making pages
 * RWX, a PROT_NONE guard), and what mprotect makes writable goes back to
 * what it was.  /proc/self/maps is read once per batch write (and only
 * when mprotect writes: /proc/self/mem leaves protections alone), into
 * maps[], sorted as the kernel lists it.  The pages made writable, with
 * their protection before, are kept in opened[] until they are put back,
 * so the protection restored does not depend on a later reading.  Without
 * /proc, the segment's protection is all there is: it is restored (an
 * info line says so).  A thread of the program that changes a page's
 * protection while a batch writes that page loses its change, as it
 * would to any mprotect of the page.
 */
struct mapping {
	uintptr_t lo, hi;
	int prot;
};

struct mappings {
	struct mapping *at;
	size_t n, cap;
};

static struct mappings maps, opened; /* under ftpad_lock */
static bool maps_read;

/* Room for one more in m; false without memory. */
static bool make_room(struct mappings *m)
{
	struct mapping *at;
	size_t cap = m->cap ? 2 * m->cap : 256;

	if (m->n < m->cap)
		return true;
	at = ftpad_alloc(cap * sizeof(*at));
	if (!at)
		return false;
	if (m->at) {
		memcpy(at, m->at, m->n * sizeof(*at));
		ftpad_free(m->at);
	}
	m->at = at;
	m->cap = cap;
	return true;
}

/* One line of /proc/self/maps ("lo-hi rwxp ..."), head only, into maps. */
static int add_mapping_line(const char *line)
{
	struct mapping *m;
	char *p;
	uintptr_t lo = strtoul(line, &p, 16), hi;

	if (*p != '-')
		return 0;
	hi = strtoul(p + 1, &p, 16);
	if (*p != ' ' || strlen(p) < 4)
		return 0;
	if (!make_room(&maps))
		return -ENOMEM;
	m = &maps.at[maps.n++];
	*m = (struct mapping){ lo, hi, (p[1] == 'r' ? PROT_READ : 0) |
					   (p[2] == 'w' ? PROT_WRITE : 0) |
					   (p[3] == 'x' ? PROT_EXEC : 0) };
	return 0;
}

/* maps[] from /proc/self/maps (no stdio: it allocates). */
static int read_maps(void)
{
	char buf[4096], line[64];
	size_t len = 0;
	ssize_t n;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	maps.n = 0;
	while (!err && ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))) {
		for (ssize_t i = 0; i < n && !err; i++) {
			if (buf[i] != '\n') {
				if (len < sizeof(line) - 1)
					line[len++] = buf[i];
				continue;
			}
			line[len] = 0;
			len = 0;
			err = add_mapping_line(line);
		}
	}
	if (!err && n < 0)
		err = -errno;
	close(fd);
	return err;
}

/* A new batch write: read the protections again when next needed (not
 * while pages are open, whose protection before is in opened[] anyway). */
static void maps_stale(void)
{
	if (!opened.n)
		maps_read = false;
}

/* The protection of the page at addr, and in *end where it stops being
 * that; fallback (the segment's) when it cannot be read. */
static int prot_at(uintptr_t addr, uintptr_t *end, int fallback)
{
	static bool told;
	size_t lo = 0, hi;
	int err;

	if (!maps_read) {
		err = read_maps();
		maps_read = true;
		if (err) {
			maps.n = 0;
			if (!told)
				ftpad_info("ftpad: /proc/self/maps: %s; code written by mprotect gets "
					   "its ELF segment's protection back\n", strerror(-err));
			told = true;
		}
	}
	hi = maps.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (maps.at[mid].hi <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < maps.n && maps.at[lo].lo <= addr) {
		*end = maps.at[lo].hi;
		return maps.at[lo].prot;
	}
	/* Not listed: unmapped (mprotect will say so), or mapped since. */
	*end = lo < maps.n ? maps.at[lo].lo : UINTPTR_MAX;
	return fallback;
}

/* The pages opened[from..) that lie in [lo, hi) back to what they were;
 * the first error. */
static int close_pages(uintptr_t lo, uintptr_t hi, size_t from)
{
	int err = 0, e;

	for (size_t i = from; i < opened.n;) {
		struct mapping *m = &opened.at[i];

		if (m->lo < lo || m->hi > hi) {
			i++;
			continue;
		}
		e = protect_back(m->lo, m->hi, m->prot);
		err = err ? err : e;
		*m = opened.at[--opened.n];
	}
	return err;
}

/* The pages [lo, hi) writable, each piece from the protection it has
 * (prot, the segment's, if that cannot be read); noted in opened[]. */
static int open_pages(uintptr_t lo, uintptr_t hi, int prot)
{
	size_t first = opened.n;
	uintptr_t end;

	for (uintptr_t at = lo; at < hi; at = end) {
		int now = prot_at(at, &end, prot);

		end = end < hi ? end : hi;
		if (now & PROT_WRITE)
			continue;
		if (!make_room(&opened)) {
			close_pages(lo, hi, first);
			return -ENOMEM;
		}
		if (mprotect((void *)at, end - at, now | PROT_WRITE) < 0) {
			int err = -errno;

			close_pages(lo, hi, first);
			return err;
		}
		opened.at[opened.n++] = (struct mapping){ at, end, now };
	}
	return 0;
}

static enum method forced_method(void)
{
	const char *env = getenv("FTPAD_TEXT_WRITE");

	if (env && !strcmp(env, "procmem"))
		return M_PROCMEM;
	if (env && !strcmp(env, "mprotect"))
		return M_MPROTECT;
	return M_UNKNOWN;
}

/*
 * Code goes out in runs (struct ftpad_text_writer, internal.h): spans of
 * code to write (a site's bytes, a poke) in increasing order, within one
 * mapping, each less than a page after the one before (so that no page
 * without a span is touched).  A run is assembled in run_buf, the code
 * between its spans copied from memory and written back unchanged, and
 * written whole: through /proc/self/mem one pwrite, whose cost is the
 * syscall and the kernel's walk of each page, not the bytes; through
 * mprotect one mprotect pair around a copy.  State is static, so that
 * writing code needs no malloc (the very early tracer writes before
 * constructors, aarch64 while the other threads are stopped); it is used
 * under ftpad_lock, or by the early tracer before anything else runs.
 */
#define RUN_BYTES (128 * 1024)
/* A run's code is copied into run_buf ahead of its spans, a block at a time. */
#define COPY_AHEAD 4096

static uint8_t run_buf[RUN_BYTES];

/* The run [lo, hi), assembled in run_buf, through /proc/self/mem
 * (pwrite_code()). */
static int commit_procmem(uintptr_t lo, uintptr_t hi)
{
	return pwrite_code(run_buf, hi - lo, lo);
}

/*
 * Write code the way that worked last: /proc/self/mem first, and mprotect
 * when that is refused (a write is idempotent, so a failed one is simply
 * made again).  Both refused: say why, and fail.  via_procmem and
 * via_mprotect make the same write (ctx) each way.
 */
static int write_either_way(enum method forced, int (*via_procmem)(const void *ctx),
			    int (*via_mprotect)(const void *ctx), const void *ctx)
{
	int err_mem = 0, err = 0;

	if (forced != M_MPROTECT && method != M_MPROTECT) {
		err_mem = via_procmem(ctx);
		if (!err_mem) {
			method = M_PROCMEM;
			return 0;
		}
		if (forced == M_PROCMEM)
			err = err_mem;
	}
	if (!err) {
		err = via_mprotect(ctx);
		if (!err) {
			if (method != M_MPROTECT && err_mem)
				ftpad_info("ftpad: /proc/self/mem: %s; using mprotect\n",
					   strerror(-err_mem));
			method = M_MPROTECT;
			return 0;
		}
	}
	ftpad_warn("ftpad: error: cannot write code: /proc/self/mem: %s; mprotect: %s\n",
		   err_mem ? strerror(-err_mem) : "not tried",
		   forced == M_PROCMEM ? "not tried" : strerror(-err));
	return err == -EPERM || err == -EACCES || err == -EIO ? err : -EPERM;
}

/* len bytes of src to the writable code at at.  A run of one aligned slot
 * or instruction (a write that may not be merged) in one store, so that a
 * racing reader sees the old value or the new one. */
static void copy_code(uintptr_t at, const uint8_t *src, size_t len)
{
	if (len == 8 && at % 8 == 0) {
		uint64_t v;

		memcpy(&v, src, 8);
		__atomic_store_n((uint64_t *)at, v, __ATOMIC_RELEASE);
	} else if (len == 4 && at % 4 == 0) {
		uint32_t v;

		memcpy(&v, src, 4);
		__atomic_store_n((uint32_t *)at, v, __ATOMIC_RELEASE);
	} else {
		memcpy((void *)at, src, len);
	}
	/* Code written by a plain store must reach the instruction side: cache
	 * maintenance on aarch64, nothing on x86.  /proc/self/mem writes get
	 * it from the kernel. */
	__builtin___clear_cache((char *)at, (char *)at + len);
}

struct ftpad_text_run ftpad_text_writer_init(struct ftpad_text_writer *w, bool direct,
					     void (*written)(void *ctx), void *ctx)
{
	*w = (struct ftpad_text_writer){ .direct = direct, .pagem1 = page_size() - 1,
					 .written = written, .ctx = ctx };
	maps_stale();
	if (!direct)
		return (struct ftpad_text_run){ 0 };
	/* One run that takes every span, at its own address. */
	w->pagem1 = UINTPTR_MAX;
	return (struct ftpad_text_run){ .copied = UINTPTR_MAX };
}

bool ftpad_text_direct(void)
{
	enum method forced = forced_method();

	return forced == M_MPROTECT || (forced == M_UNKNOWN && method == M_MPROTECT);
}

bool ftpad_text_may_unprotect(void)
{
	return forced_method() != M_PROCMEM;
}

int ftpad_text_unprotect(uintptr_t lo, uintptr_t hi, int prot, bool writable)
{
	int err = 0;

	whole_pages(&lo, &hi);
	if (!writable) {
		err = close_pages(lo, hi, 0);
	} else {
		maps_stale();
		err = open_pages(lo, hi, prot);
	}
	if (err && writable) {
		ftpad_warn("ftpad: error: cannot write code: /proc/self/mem: not tried; mprotect: %s\n",
			   strerror(-err));
	}
	return !err || err == -EACCES ? err : -EPERM;
}

/* The run by mprotect of its pages and a copy (the same bytes as through
 * /proc/self/mem, so just as safe), then the protection back. */
static int commit_mprotect(uintptr_t lo, uintptr_t hi, int prot)
{
	uintptr_t plo = lo, phi = hi;
	size_t first = opened.n;
	int err;

	whole_pages(&plo, &phi);
	err = open_pages(plo, phi, prot);
	if (err)
		return err;
	copy_code(lo, run_buf, hi - lo);
	return close_pages(plo, phi, first);
}

/* The writer's run [lo, hi) from run_buf. */
struct commit_args {
	uintptr_t lo, hi;
	int prot;
};

static int commit_via_procmem(const void *ctx)
{
	const struct commit_args *a = ctx;

	return commit_procmem(a->lo, a->hi);
}

static int commit_via_mprotect(const void *ctx)
{
	const struct commit_args *a = ctx;

	return commit_mprotect(a->lo, a->hi, a->prot);
}

/* The run, by the method that worked last (write_either_way()). */
static int commit(uintptr_t lo, uintptr_t hi, int prot)
{
	struct commit_args a = { lo, hi, prot };

	return write_either_way(forced_method(), commit_via_procmem, commit_via_mprotect, &a);
}

int ftpad_text_flush(struct ftpad_text_writer *w, struct ftpad_text_run r)
{
	if (r.hi && !w->err) {
		if (!w->direct)
			w->err = commit(w->lo, r.hi, w->prot);
		if (!w->err && w->written)
			w->written(w->ctx);
	}
	return w->err;
}

struct ftpad_text_run ftpad_text_span(struct ftpad_text_writer *w, struct ftpad_text_run r,
				      uintptr_t lo, uintptr_t hi, uintptr_t limit, int prot)
{
	uintptr_t to;

	if (w->direct) {
		/* Any span, at its own address (modules need not be in order). */
		r.hi = hi;
		return r;
	}
	if (!(lo >= r.hi && lo - r.hi <= w->pagem1 && hi <= w->end)) {
		/* A new run, once the last one is written. */
		ftpad_text_flush(w, r);
		w->lo = lo;
		w->end = limit - lo > RUN_BYTES ? lo + RUN_BYTES : limit;
		w->prot = prot;
		r.copied = lo;
		r.delta = (intptr_t)run_buf - (intptr_t)lo;
	}
	/* The code up to the span's end, and a block more. */
	to = r.copied + COPY_AHEAD > hi ? r.copied + COPY_AHEAD : hi;
	to = to < w->end ? to : w->end;
	memcpy((void *)(r.copied + r.delta), (const void *)r.copied, to - r.copied);
	r.copied = to;
	r.hi = hi;
	return r;
}

int ftpad_text_write(const void *items, size_t n, size_t stride, ftpad_part_fn part_of, int part,
		     bool mergeable)
{
	struct ftpad_text_writer w;
	struct ftpad_text_run r = ftpad_text_writer_init(&w, false, NULL, NULL);
	const char *item = items;

	for (size_t i = 0; i < n && !w.err; i++, item += stride) {
		struct ftpad_poke p;

		part_of(item, part, &p);
		if (!p.len)
			continue;
		/* Unmergeable: a run that ends with the poke, so that none
		 * continues it, and no code around it is copied. */
		r = ftpad_text_span(&w, r, p.addr, p.addr + p.len,
				    mergeable ? p.limit : p.addr + p.len, p.prot);
		memcpy((void *)(p.addr + r.delta), p.bytes, p.len);
	}
	return ftpad_text_flush(&w, r);
}

static void poke_part(const void *item, int part, struct ftpad_poke *out)
{
	(void)part;
	*out = *(const struct ftpad_poke *)item;
}

int ftpad_text_poke(const struct ftpad_poke *pokes, size_t n, bool mergeable)
{
	return ftpad_text_write(pokes, n, sizeof(*pokes), poke_part, 0, mergeable);
}

static int membarrier(int cmd)
{
	return syscall(SYS_membarrier, cmd, 0, 0) < 0 ? -errno : 0;
}

/*
 * Without membarrier SYNC_CORE (Linux < 4.16, or a seccomp filter), take
 * write permission away from a page every thread may have in its TLB: the
 * kernel then shoots the TLB down with an IPI on every CPU that runs this
 * process, and the return from that interrupt (IRET, an exception return)
 * is context synchronizing.  Weaker, as it only reaches CPUs in the mm's
 * cpumask, but that is exactly the set running our threads.
 */
static int sync_by_tlb_shootdown(void)
{
	static volatile char *page;
	long size = sysconf(_SC_PAGESIZE);

	if (!page) {
		void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return -errno;
		page = p;
	}
	if (mprotect((void *)page, size, PROT_READ | PROT_WRITE) < 0)
		return -errno;
	page[0] = 1;
	return mprotect((void *)page, size, PROT_READ) < 0 ? -errno : 0;
}

int ftpad_text_sync_cores(void)
{
	/* Registered once, under ftpad_lock: 1 works, -1 unavailable. */
	static int state;
	pid_t pid = getpid();
	static pid_t registered_pid;

	/* Registration is per mm, and a forked child has a new one. */
	if (state == 0 || registered_pid != pid) {
		int err = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE);

		state = err ? -1 : 1;
		registered_pid = pid;
		if (err)
			ftpad_info("ftpad: membarrier SYNC_CORE: %s; syncing cores by TLB shootdown\n",
				   strerror(-err));
	}
	if (state > 0 && !membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE))
		return 0;
	return sync_by_tlb_shootdown();
}
