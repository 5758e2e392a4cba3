/* SPDX-License-Identifier: MIT */
/*
 * text.c - writing to code (and other read-only mappings) in this process.
 *
 * DESIGN.md "Patching at run time": first pwrite() to /proc/self/mem, which
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
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

enum method { M_UNKNOWN, M_PROCMEM, M_MPROTECT };

static enum method method;  /* what worked last; under ftpad_lock */
static int mem_fd = -1;
static pid_t mem_pid;       /* a forked child must not write its parent */

static int open_mem(void)
{
	if (mem_fd >= 0 && mem_pid == getpid())
		return mem_fd;
	if (mem_fd >= 0)
		close(mem_fd);
	mem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	mem_pid = getpid();
	return mem_fd < 0 ? -errno : mem_fd;
}

static int cmp_poke(const void *a, const void *b)
{
	const struct ftpad_poke *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int pwrite_all(int fd, const void *buf, size_t len, uintptr_t addr)
{
	ssize_t r = pwrite(fd, buf, len, (off_t)addr);

	return r == (ssize_t)len ? 0 : r < 0 ? -errno : -EIO;
}

/*
 * How many pokes from p on can go out in one write: mergeable ones within
 * one page (so the bytes between them are surely mapped), at most max.
 */
static size_t run_length(const struct ftpad_poke *p, size_t n, uintptr_t page)
{
	size_t k = 1;

	if (!p[0].mergeable)
		return 1;
	while (k < n && p[k].mergeable &&
	       (p[k].addr & ~(page - 1)) == (p[0].addr & ~(page - 1)) &&
	       ((p[k].addr + p[k].len - 1) & ~(page - 1)) == (p[0].addr & ~(page - 1)))
		k++;
	return k;
}

/*
 * One pwrite per run of mergeable pokes in a page: the syscall, not the
 * bytes, is what costs (100,000 sites took 100,000s of writes).  The bytes
 * between the pokes are copied from memory and written back unchanged.
 */
static int poke_procmem(struct ftpad_poke *p, size_t n)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	int fd = open_mem();
	uint8_t *buf;

	if (fd < 0)
		return fd;
	buf = malloc(page);
	if (!buf)
		return -ENOMEM;
	qsort(p, n, sizeof(*p), cmp_poke);
	for (size_t i = 0; i < n;) {
		size_t k = run_length(p + i, n - i, page);
		uintptr_t lo = p[i].addr, hi = p[i + k - 1].addr + p[i + k - 1].len;
		int err;

		memcpy(buf, (const void *)lo, hi - lo);
		for (size_t j = i; j < i + k; j++)
			memcpy(buf + (p[j].addr - lo), p[j].bytes, p[j].len);
		err = k == 1 ? pwrite_all(fd, p[i].bytes, p[i].len, p[i].addr)
			     : pwrite_all(fd, buf, hi - lo, lo);
		if (err) {
			free(buf);
			return err;
		}
		i += k;
	}
	free(buf);
	return 0;
}

static void store(const struct ftpad_poke *p)
{
	/* A slot is rewritten in one store, so a racing reader sees old or new. */
	if (p->len == 8 && p->addr % 8 == 0) {
		uint64_t v;

		memcpy(&v, p->bytes, 8);
		__atomic_store_n((uint64_t *)p->addr, v, __ATOMIC_RELEASE);
	} else {
		memcpy((void *)p->addr, p->bytes, p->len);
	}
	/* Code written by a plain store must reach the instruction side: cache
	 * maintenance on aarch64, nothing on x86.  /proc/self/mem writes get
	 * it from the kernel. */
	__builtin___clear_cache((char *)p->addr, (char *)p->addr + p->len);
}

/* Pokes sorted by address; each run of pages with one protection at once. */
static int poke_mprotect(struct ftpad_poke *p, size_t n)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

	qsort(p, n, sizeof(*p), cmp_poke);
	for (size_t i = 0; i < n;) {
		uintptr_t lo = p[i].addr & ~(page - 1);
		uintptr_t hi = (p[i].addr + p[i].len + page - 1) & ~(page - 1);
		size_t j = i + 1;

		while (j < n && p[j].prot == p[i].prot && (p[j].addr & ~(page - 1)) <= hi) {
			uintptr_t end = (p[j].addr + p[j].len + page - 1) & ~(page - 1);

			hi = end > hi ? end : hi;
			j++;
		}
		if (mprotect((void *)lo, hi - lo, p[i].prot | PROT_WRITE) < 0)
			return -errno;
		for (; i < j; i++)
			store(&p[i]);
		if (mprotect((void *)lo, hi - lo, p[j - 1].prot) < 0) {
			int err = -errno;

			ftpad_warn("ftpad: error: cannot restore the protection of %#lx-%#lx: %s\n",
				   (unsigned long)lo, (unsigned long)hi, ftpad_strerror(err));
			return err;
		}
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

static int verify(const struct ftpad_poke *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp((void *)p[i].addr, p[i].bytes, p[i].len))
			return -EIO;
	return 0;
}

/*
 * Write every poke, the whole batch by one method.  The writes are
 * idempotent, so a batch that fails half way through /proc/self/mem is
 * simply done again with mprotect.
 */
int ftpad_text_poke(struct ftpad_poke *pokes, size_t n)
{
	enum method forced = forced_method();
	int err = 0, err_mem = 0;

	if (!n)
		return 0;
	if (forced != M_MPROTECT && method != M_MPROTECT) {
		err_mem = poke_procmem(pokes, n);
		if (!err_mem) {
			method = M_PROCMEM;
			return verify(pokes, n);
		}
		if (forced == M_PROCMEM)
			err = err_mem;
	}
	if (!err) {
		err = poke_mprotect(pokes, n);
		if (!err) {
			if (method != M_MPROTECT && err_mem)
				ftpad_info("ftpad: /proc/self/mem: %s; using mprotect\n",
					   ftpad_strerror(err_mem));
			method = M_MPROTECT;
			return verify(pokes, n);
		}
	}
	ftpad_warn("ftpad: error: cannot write code: /proc/self/mem: %s; mprotect: %s\n",
		   err_mem ? strerror(-err_mem) : "not tried",
		   forced == M_PROCMEM ? "not tried" : strerror(-err));
	return err == -EPERM || err == -EACCES ? err : -EPERM;
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
