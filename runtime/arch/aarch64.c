/* SPDX-License-Identifier: MIT */
/*
 * aarch64.c - the aarch64 user pad: checking it, encoding the site's BL,
 * the per-module stub page and the C side of the trampoline.
 *
 * Pad (docs/gcc-plugin.md, DESIGN.md "Pad layouts"):
 *      [before NOPs][ops slot: 2 NOPs, 8-aligned] entry: [bti c?]
 *      mov x9, x30 ; nop (the site) ; [rest of after]
 * The compiler already saved the return address in x9, so enabling a site
 * changes one instruction, NOP to `bl stub`, and disabling changes it back:
 * a single aligned 4-byte word, which the architecture lets other threads
 * run while it changes (ARM ARM B2.2.5, "concurrent modification and
 * execution": NOP, B, BL are in the permitted list).  The stub, near the
 * module, loads the site's kind into x16 and jumps to ftpad_trampoline.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../arch.h"

/*
 * The trampoline's register save area; trampoline_aarch64.S builds it.
 * x18 is saved although the platform ABI reserves it: GCC passes the static
 * chain of nested functions in it and uses it as a scratch register in C
 * callbacks, so it must come back unchanged.
 */
struct ftpad_regs {
	unsigned long x[9];     /* x0-x7 arguments, x8 the indirect result address */
	unsigned long x18;      /* the static chain of GCC's nested functions */
	unsigned long sp;       /* sp at the function's entry: stack arguments */
	unsigned long parent;   /* x9 = x30 at the entry: the caller's return address */
	unsigned long ip;       /* where the trampoline returns: site + 4, or a redirect */
	unsigned long pad;
	unsigned char q[8][16]; /* q0-q7: float and vector arguments */
};
_Static_assert(sizeof(struct ftpad_regs) == 240, "trampoline_aarch64.S FRAME");

/* Bits of a site's kind, handed to the dispatcher in x16 by its stub. */
enum {
	KIND_BTI = 1,  /* bti c sits between the entry and mov x9, x30 */
	KIND_SLOT = 2, /* the ops slot ends at the entry */
	KIND_COUNT = 4,
};

#define INSN_NOP 0xd503201fu
#define INSN_BTI_C 0xd503245fu
#define INSN_MOV_X9_X30 0xaa1e03e9u /* orr x9, xzr, x30 */
#define INSN_BL 0x94000000u
#define INSN_LDR_X17_LIT 0x58000011u /* ldr x17, <imm19 * 4 from here> */
#define INSN_MOVZ_X16 0xd2800010u    /* movz x16, #<imm16> */
#define INSN_BR_X17 0xd61f0220u
#define INSN_BRK 0xd4200000u

#define STUB_SIZE 16
#define STUB_LITERAL (KIND_COUNT * STUB_SIZE)

const uint8_t ftpad_arch_id = FTPAD_ARCH_AARCH64;
/* BL reaches +-128 MiB from itself; keep a stub page of margin. */
const uintptr_t ftpad_arch_reach = 0x8000000ul - 0x10000ul;
const size_t ftpad_arch_site_len = 4;
/* The two NOPs the compiler put in the slot, read as a little-endian word. */
const uint64_t ftpad_arch_slot_empty = (uint64_t)INSN_NOP << 32 | INSN_NOP;
const size_t ftpad_arch_stubs_size = STUB_LITERAL + 8;

extern char ftpad_trampoline[] FTPAD_HIDDEN;
void ftpad_trampoline_entry(unsigned long ret, unsigned long parent_ip,
			    struct ftpad_regs *regs, unsigned long kind) FTPAD_HIDDEN;

static uint32_t insn_at(uintptr_t addr)
{
	uint32_t v;

	memcpy(&v, (const void *)addr, sizeof(v));
	return v;
}

static void put_insn(uint8_t *buf, uint32_t insn)
{
	memcpy(buf, &insn, sizeof(insn));
}

int ftpad_arch_site_init(const struct ftpad_site_record *rec,
			 struct ftpad_site *site, const char **why)
{
	uintptr_t mov = site->entry;

	if (rec->site_len != 4) {
		*why = "site_len is not 4";
		return -EINVAL;
	}
	/* Kernel ABI pads (NOP NOP) need the MOV written first: not supported. */
	if ((rec->flags & FTPAD_SITE_KERNEL) || !(rec->flags & FTPAD_SITE_MOV_X9)) {
		*why = "not the user layout with mov x9, x30 (kernel-ABI pads are not supported)";
		return -EINVAL;
	}
	site->kind = 0;
	if (rec->flags & FTPAD_SITE_BTI) {
		if (insn_at(site->entry) != INSN_BTI_C) {
			*why = "no bti c at the entry";
			return -EINVAL;
		}
		mov += 4;
		site->kind |= KIND_BTI;
	}
	/* The dispatcher derives ip from the return address: it must be exact. */
	if (site->addr != mov + 4 || insn_at(mov) != INSN_MOV_X9_X30) {
		*why = "the site does not follow mov x9, x30 right after the entry (or its bti c)";
		return -EINVAL;
	}
	if (site->addr % 4 || insn_at(site->addr) != INSN_NOP) {
		*why = "the site is not an aligned NOP";
		return -EINVAL;
	}
	if (site->slot) {
		if (site->slot % 8 || site->slot + 8 != site->entry) {
			*why = "the ops slot is not 8-aligned right before the entry";
			return -EINVAL;
		}
		if (*(const uint64_t *)site->slot != ftpad_arch_slot_empty) {
			*why = "the ops slot is not two NOPs";
			return -EINVAL;
		}
		site->kind |= KIND_SLOT;
	}
	return 0;
}

void ftpad_arch_site_nop(uint8_t *buf)
{
	put_insn(buf, INSN_NOP);
}

int ftpad_arch_site_call(const struct ftpad_site *site, uintptr_t stubs, bool use_slot,
			 uint8_t *buf)
{
	unsigned int kind = use_slot ? site->kind : site->kind & ~KIND_SLOT;
	intptr_t rel = (intptr_t)(stubs + kind * STUB_SIZE) - (intptr_t)site->addr;

	/* imm26 counts words: +-2^25 of them. */
	if (rel < -(1l << 27) || rel >= (1l << 27))
		return -ERANGE;
	put_insn(buf, INSN_BL | ((uint32_t)(rel >> 2) & 0x3ffffffu));
	return 0;
}

/*
 * Stub k, at page + 16 * k:   ldr x17, literal ; movz x16, #k ; br x17 ; brk
 * and at page + 64 the absolute address of ftpad_trampoline, which may be
 * anywhere in the address space.  x16 and x17 (IP0, IP1) are free at a
 * function's entry: the AAPCS64 lets any veneer between caller and callee
 * clobber them.  A BR through x16 or x17 is also what `bti c` or `bti jc`
 * accepts, should libftpad's pages be guarded.
 */
void ftpad_arch_stubs_fill(uint8_t *buf, uintptr_t page)
{
	uintptr_t target = (uintptr_t)ftpad_trampoline;

	(void)page; /* the stubs are position independent */
	for (size_t off = 0; off < STUB_LITERAL; off += 4)
		put_insn(buf + off, INSN_BRK);
	for (int k = 0; k < KIND_COUNT; k++) {
		uint8_t *p = buf + k * STUB_SIZE;
		uint32_t imm19 = (STUB_LITERAL - k * STUB_SIZE) / 4;

		put_insn(p, INSN_LDR_X17_LIT | imm19 << 5);
		put_insn(p + 4, INSN_MOVZ_X16 | (uint32_t)k << 5);
		put_insn(p + 8, INSN_BR_X17);
	}
	memcpy(buf + STUB_LITERAL, &target, sizeof(target));
}

/*
 * Does code written through /proc/self/mem run as written?  On Linux it
 * does: the kernel does the cache maintenance.  Under qemu-user it does
 * not: the write bypasses qemu, whose already translated code goes on
 * running the old instructions (measured: a site enabled that way is never
 * called).  So ask once: run a probe function, rewrite it through
 * /proc/self/mem, run it again.  Under ftpad_lock.
 */
static bool procmem_reaches_code(void)
{
	static int known; /* 1 yes, -1 no */
	const uint32_t one[2] = { 0x52800020u /* mov w0, #1 */, 0xd65f03c0u /* ret */ };
	const uint32_t two = 0x52800040u; /* mov w0, #2 */
	long size = sysconf(_SC_PAGESIZE);
	int (*probe)(void);
	void *page;
	int fd;

	if (known)
		return known > 0;
	known = 1; /* and when the probe cannot run, /proc/self/mem is not used either */
	page = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return true;
	memcpy(page, one, sizeof(one));
	__builtin___clear_cache((char *)page, (char *)page + sizeof(one));
	fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (fd >= 0 && mprotect(page, size, PROT_READ | PROT_EXEC) == 0) {
		probe = (int (*)(void))page;
		if (probe() == 1 && pwrite(fd, &two, sizeof(two), (off_t)(uintptr_t)page) == 4 &&
		    probe() == 1) {
			known = -1;
			ftpad_info("ftpad: code written through /proc/self/mem does not run "
				   "(qemu-user?); re-protecting the pages written\n");
		}
	}
	if (fd >= 0)
		close(fd);
	munmap(page, size);
	return known > 0;
}

/*
 * What makes qemu-user drop its translations of a page: the page becoming
 * writable.  Cycle the protection of every page written (only where the
 * probe above failed, so never on a real kernel).
 */
static int reprotect(const struct ftpad_poke *pokes, size_t n)
{
	uintptr_t size = (uintptr_t)sysconf(_SC_PAGESIZE);

	for (size_t i = 0; i < n; i++) {
		void *page = (void *)(pokes[i].addr & ~(size - 1));

		if (mprotect(page, size, pokes[i].prot | PROT_WRITE) < 0 ||
		    mprotect(page, size, pokes[i].prot) < 0)
			return -errno;
	}
	return 0;
}

/*
 * One aligned word per site, NOP <-> BL: both are in the architecture's
 * list of instructions another thread may run while they change, so no
 * trap protocol is needed: a thread runs the old or the new one.  Code
 * written by plain stores (the mprotect way) reaches the instruction side
 * through text.c's cache maintenance; /proc/self/mem writes get it from
 * the kernel, except under qemu-user.
 */
int ftpad_arch_sites_write(struct ftpad_poke *pokes, size_t n)
{
	int err = ftpad_text_poke(pokes, n);

	if (!err && n && !procmem_reaches_code())
		err = reprotect(pokes, n);
	/* A context synchronization on every thread: from here on, none runs
	 * an instruction it fetched before the write. */
	if (!err && n)
		err = ftpad_text_sync_cores();
	return err;
}

/* Where the n-th integer argument is saved: a register slot or the stack. */
static unsigned long *argument_slot(struct ftpad_regs *regs, unsigned int n)
{
	if (n < 8)
		return &regs->x[n];
	/* The 9th integer argument is the first one on the stack. */
	return &((unsigned long *)regs->sp)[n - 8];
}

unsigned long ftpad_arch_regs_argument(const struct ftpad_regs *regs, unsigned int n)
{
	return *argument_slot((struct ftpad_regs *)regs, n);
}

void ftpad_arch_regs_set_argument(struct ftpad_regs *regs, unsigned int n, unsigned long val)
{
	/* The trampoline reloads the registers from regs before returning. */
	*argument_slot(regs, n) = val;
}

unsigned long ftpad_arch_regs_stack_pointer(const struct ftpad_regs *regs)
{
	return regs->sp;
}

void ftpad_arch_regs_set_ip(struct ftpad_regs *regs, unsigned long ip)
{
	/* The trampoline returns there with x30 = parent_ip and sp as at the
	 * entry: ip runs as if the caller had called it. */
	regs->ip = ip;
}

/*
 * Whether the site is, as this thread reads it now, a BL to a stub that
 * reads the ops slot (patch.c "Slots are written by copies").  Stubs sit at
 * fixed offsets in their page.
 */
static bool calls_slot_stub(uintptr_t site)
{
	uint32_t insn = __atomic_load_n((const uint32_t *)site, __ATOMIC_RELAXED);
	int64_t words = (int64_t)((uint64_t)(insn & 0x3ffffffu) << 38) >> 38;
	uintptr_t target = site + (uintptr_t)(words * 4);

	if ((insn & 0xfc000000u) != INSN_BL)
		return false;
	return ((target & 0xfff) / STUB_SIZE) & KIND_SLOT;
}

/*
 * Called by ftpad_trampoline: ret is x30 after the site's BL (site + 4),
 * parent_ip the caller's return address from x9, kind what the stub put in
 * x16.  Finding ip and ops is O(1) for sites with a slot; slot-less sites
 * take a binary search over their module.
 */
void ftpad_trampoline_entry(unsigned long ret, unsigned long parent_ip,
			    struct ftpad_regs *regs, unsigned long kind)
{
	uintptr_t site = ret - 4;
	uintptr_t ip = site - 4 - (kind & KIND_BTI ? 4 : 0);
	struct ftpad_ops *ops;

	/* First, so that nothing below can recurse, and ops is held safely. */
	if (!ftpad_enter())
		return;
	ops = ftpad_site_ops(site, kind & KIND_SLOT && calls_slot_stub(site) ? ip - 8 : 0);
	if (ops)
		ftpad_dispatch(ip, parent_ip, ops, regs);
	ftpad_exit();
}
