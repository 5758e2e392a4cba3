/* SPDX-License-Identifier: MIT */
/*
 * x86_64.c - the x86_64 pad: checking it, encoding the site's call, the
 * per-module stub page and the C side of the trampoline.
 *
 * Pad (DESIGN.md "Pad layouts"):
 *      [before NOPs][ops slot: 8 bytes, 8-aligned][endbr64?][0f 1f 44 00 00]...
 * The site becomes `call rel32` to a stub near the module; the stub loads
 * the site's kind into r11 and jumps to ftpad_trampoline in libftpad.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <cpuid.h>

#include "../arch.h"

/* The trampoline's register save area; trampoline_x86_64.S builds it. */
struct ftpad_regs {
	unsigned long rdi, rsi, rdx, rcx, r8, r9;
	unsigned long rax; /* the number of vector registers a varargs call uses */
	unsigned long r10; /* the static chain of nested functions */
	unsigned long sp;  /* rsp at the function's entry: it points at parent_ip */
	unsigned long ip;  /* where the trampoline returns: site + 5, or a redirect */
	unsigned char xmm[8][16];
};
_Static_assert(sizeof(struct ftpad_regs) == 208, "trampoline_x86_64.S FRAME");

/* Bits of a site's kind, handed to the dispatcher in r11 by its stub. */
enum {
	KIND_ENDBR = 1, /* endbr64 sits between the entry and the site */
	KIND_SLOT = 2,  /* the ops slot ends at the entry */
	KIND_COUNT = 4,
};

#define STUB_SIZE 16
#define STUB_LITERAL (KIND_COUNT * STUB_SIZE)

static const uint8_t nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
/* LLVM's 5-byte NOP, nopl 8(%rax,%rax,1): clang's patchable-function-entry
 * emits it and the clang pass has no way to choose another encoding
 * (docs/clang-pass.md).  Disabling a site writes nop5 back. */
static const uint8_t nop5_llvm[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x08 };
static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };

const uint8_t ftpad_arch_id = FTPAD_ARCH_X86_64;
/* rel32 counts from the end of the call; keep a page of margin. */
const uintptr_t ftpad_arch_reach = 0x7fff0000ul;
const size_t ftpad_arch_site_len = sizeof(nop5);
/* 0f 1f 84 00 00 00 00 00, the 8-byte NOP, read as a little-endian word. */
const uint64_t ftpad_arch_slot_empty = 0x00000000841f0full;
const size_t ftpad_arch_stubs_size = STUB_LITERAL + 8;

extern char ftpad_trampoline[] FTPAD_HIDDEN;
void ftpad_trampoline_entry(unsigned long ret, unsigned long parent_ip,
			    struct ftpad_regs *regs, unsigned long kind) FTPAD_HIDDEN;

int ftpad_arch_site_init(const struct ftpad_site_record *rec,
			 struct ftpad_site *site, const char **why)
{
	uintptr_t expect = site->entry;

	if (rec->site_len != sizeof(nop5)) {
		*why = "site_len is not 5";
		return -EINVAL;
	}
	site->kind = 0;
	if (rec->flags & FTPAD_SITE_ENDBR) {
		if (memcmp((void *)site->entry, endbr64, sizeof(endbr64))) {
			*why = "no endbr64 at the entry";
			return -EINVAL;
		}
		expect += sizeof(endbr64);
		site->kind |= KIND_ENDBR;
	}
	/* The dispatcher derives ip from the return address: it must be exact. */
	if (site->addr != expect) {
		*why = "the site does not follow the entry (or its endbr64)";
		return -EINVAL;
	}
	if (memcmp((void *)site->addr, nop5, sizeof(nop5)) &&
	    memcmp((void *)site->addr, nop5_llvm, sizeof(nop5_llvm))) {
		*why = "the site is not the 5-byte NOP 0f 1f 44 00 00";
		return -EINVAL;
	}
	if (site->slot) {
		if (site->slot % 8 || site->slot + 8 != site->entry) {
			*why = "the ops slot is not 8-aligned right before the entry";
			return -EINVAL;
		}
		if (*(const uint64_t *)site->slot != ftpad_arch_slot_empty) {
			*why = "the ops slot is not the 8-byte NOP";
			return -EINVAL;
		}
		site->kind |= KIND_SLOT;
	}
	return 0;
}

void ftpad_arch_site_nop(uint8_t *buf)
{
	memcpy(buf, nop5, sizeof(nop5));
}

int ftpad_arch_site_call(const struct ftpad_site *site, uintptr_t stubs, bool use_slot,
			 uint8_t *buf)
{
	unsigned int kind = use_slot ? site->kind : site->kind & ~KIND_SLOT;
	intptr_t rel = (intptr_t)(stubs + kind * STUB_SIZE) - (intptr_t)(site->addr + 5);
	int32_t rel32 = (int32_t)rel;

	if (rel != rel32)
		return -ERANGE;
	buf[0] = 0xe8;
	memcpy(buf + 1, &rel32, sizeof(rel32));
	return 0;
}

/*
 * Stub k, at page + 16 * k:   mov $k, %r11d ; jmp *literal(%rip) ; int3...
 * and at page + 64 the absolute address of ftpad_trampoline.  r11 is free
 * at a function's entry (the psABI makes it call-clobbered and unused for
 * arguments), so the stub can hand the kind over in it.
 */
void ftpad_arch_stubs_fill(uint8_t *buf, uintptr_t page)
{
	uintptr_t target = (uintptr_t)ftpad_trampoline;

	(void)page; /* the stubs are position independent */
	memset(buf, 0xcc, ftpad_arch_stubs_size);
	for (int k = 0; k < KIND_COUNT; k++) {
		uint8_t *p = buf + k * STUB_SIZE;
		int32_t rel = STUB_LITERAL - (k * STUB_SIZE + 12);

		p[0] = 0x41, p[1] = 0xbb, p[2] = k, p[3] = p[4] = p[5] = 0;
		p[6] = 0xff, p[7] = 0x25;
		memcpy(p + 8, &rel, sizeof(rel));
	}
	memcpy(buf + STUB_LITERAL, &target, sizeof(target));
}

/* Where the n-th integer argument is saved: a register slot or the stack. */
static unsigned long *argument_slot(struct ftpad_regs *regs, unsigned int n)
{
	unsigned long *const in_regs[] = {
		&regs->rdi, &regs->rsi, &regs->rdx, &regs->rcx, &regs->r8, &regs->r9,
	};

	if (n < 6)
		return in_regs[n];
	/* The 7th argument sits just above the return address. */
	return &((unsigned long *)regs->sp)[1 + n - 6];
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
	/* The trampoline's ret goes there, with rsp pointing at parent_ip as
	 * at the entry: ip runs as if the caller had called it. */
	regs->ip = ip;
}

/*
 * The int3 protocol (DESIGN.md "Patching at run time", after Linux's
 * text_poke_bp_batch): int3 on every site's first byte, sync; the other
 * four bytes, sync; the first byte, sync.  A thread reaching a site in the
 * middle traps, and on_sigtrap() emulates the new instruction.  Each sync
 * is membarrier SYNC_CORE for the other threads plus CPUID on this one.
 */
static struct sigaction chained; /* the SIGTRAP action installed before ours */
static bool trap_installed;       /* under ftpad_lock */

static void serialize_this_core(void)
{
	unsigned int a, b, c, d;

	__cpuid(0, a, b, c, d);
	(void)a, (void)b, (void)c, (void)d;
}

static int sync_all_cores(void)
{
	int err = ftpad_text_sync_cores();

	serialize_this_core();
	return err;
}

/* Someone else's trap: hand it to the action installed before ours. */
static void chain_sigtrap(int sig, siginfo_t *info, void *ctx)
{
	sigset_t mask = chained.sa_mask;

	/* Ours ran with every signal blocked; theirs gets its own mask. */
	if (!(chained.sa_flags & SA_NODEFER))
		sigaddset(&mask, SIGTRAP);
	pthread_sigmask(SIG_SETMASK, &mask, NULL);
	if (chained.sa_flags & SA_SIGINFO) {
		chained.sa_sigaction(sig, info, ctx);
	} else if (chained.sa_handler == SIG_DFL) {
		/* Pending until we return, then the default action (a core). */
		sigaction(SIGTRAP, &chained, NULL);
		raise(SIGTRAP);
	} else if (chained.sa_handler != SIG_IGN) {
		chained.sa_handler(sig);
	}
}

/*
 * A site caught mid-patch: rip is just past our int3.  Emulate the
 * instruction being written (a call into the stub, or the NOP), or, when
 * the patch finished before this handler ran, execute the site again.
 */
static bool emulate_site(greg_t *gr)
{
	uintptr_t at = (uintptr_t)gr[REG_RIP] - 1;
	struct ftpad_site *s = ftpad_site_by_addr(at);
	struct ftpad_module *m = s ? ftpad_module_of(at) : NULL;
	int8_t dir;
	uint8_t call[8];
	int32_t rel32;

	if (!s || !m)
		return false;
	dir = __atomic_load_n(&s->patching, __ATOMIC_ACQUIRE);
	if (dir > 0 && m->stubs && !ftpad_arch_site_call(s, m->stubs, true, call)) {
		memcpy(&rel32, call + 1, sizeof(rel32));
		/* The signal frame lies below the red zone: rsp - 8 is free. */
		gr[REG_RSP] -= 8;
		*(unsigned long *)gr[REG_RSP] = at + sizeof(nop5);
		gr[REG_RIP] = (greg_t)(at + sizeof(nop5) + rel32);
		return true;
	}
	if (dir < 0) {
		gr[REG_RIP] = (greg_t)(at + sizeof(nop5));
		return true;
	}
	if (*(volatile const uint8_t *)at != 0xcc) {
		gr[REG_RIP] = (greg_t)at;
		return true;
	}
	return false;
}

static void on_sigtrap(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	bool entered, emulated;
	int saved_errno = errno;

	/* int3 reports SI_KERNEL; raise() and kill() do not come from a site. */
	if (info->si_code == SI_KERNEL) {
		/* Keeps an unloaded module's sites from being freed meanwhile. */
		entered = ftpad_enter();
		emulated = emulate_site(uc->uc_mcontext.gregs);
		if (entered)
			ftpad_exit();
		if (emulated) {
			__atomic_fetch_add(&ftpad_traps, 1, __ATOMIC_RELAXED);
			errno = saved_errno;
			return;
		}
	}
	errno = saved_errno;
	chain_sigtrap(sig, info, ctx);
}

static int install_sigtrap(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigtrap,
				.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK };

	if (trap_installed)
		return 0;
	/*
	 * Nothing may interrupt our handler: a signal handler that ran into a
	 * site mid-patch there would trap with SIGTRAP blocked, and the kernel
	 * kills a thread whose int3 trap is blocked.
	 */
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGTRAP, &sa, &chained) < 0)
		return -errno;
	trap_installed = true;
	return 0;
}

/* One step of the protocol: len bytes from offset off of each new insn. */
static int write_step(struct ftpad_poke *step, const struct ftpad_poke *pokes, size_t n,
		      size_t off, size_t len, const uint8_t *override)
{
	int err;

	for (size_t i = 0; i < n; i++) {
		step[i].addr = pokes[i].addr + off;
		step[i].prot = pokes[i].prot;
		step[i].len = len;
		memcpy(step[i].bytes, override ? override : pokes[i].bytes + off, len);
		/* The protocol makes each step safe byte by byte: int3 guards
		 * the tail, the first byte is one byte. */
		step[i].mergeable = true;
	}
	err = ftpad_text_poke(step, n);
	return err ? err : sync_all_cores();
}

int ftpad_arch_sites_write(struct ftpad_poke *pokes, size_t n)
{
	static const uint8_t int3 = 0xcc;
	struct ftpad_poke *step;
	int err;

	if (!n)
		return 0;
	err = install_sigtrap();
	if (err)
		return err;
	step = malloc(n * sizeof(*step));
	if (!step)
		return -ENOMEM;
	err = write_step(step, pokes, n, 0, 1, &int3);
	if (!err)
		err = write_step(step, pokes, n, 1, sizeof(nop5) - 1, NULL);
	if (!err)
		err = write_step(step, pokes, n, 0, 1, NULL);
	free(step);
	return err;
}

/*
 * Whether the site is, as this thread reads it now, `call` to a stub that
 * reads the ops slot (patch.c "Slots are written by copies").  The int3
 * protocol writes the opcode byte last, so an e8 there means the rel32
 * behind it is whole; stubs sit at fixed offsets in their page.
 */
static bool calls_slot_stub(uintptr_t site)
{
	const volatile uint8_t *p = (const volatile uint8_t *)site;
	uint32_t rel32;
	uintptr_t target;

	if (p[0] != 0xe8)
		return false;
	rel32 = p[1] | p[2] << 8 | p[3] << 16 | (uint32_t)p[4] << 24;
	target = site + sizeof(nop5) + (uintptr_t)(intptr_t)(int32_t)rel32;
	return ((target & 0xfff) / STUB_SIZE) & KIND_SLOT;
}

/*
 * Called by ftpad_trampoline: ret is the address after the site's call,
 * kind what the stub put in r11.  Finding ip and ops is O(1) for sites with
 * a slot; slot-less sites take a binary search over their module.
 */
void ftpad_trampoline_entry(unsigned long ret, unsigned long parent_ip,
			    struct ftpad_regs *regs, unsigned long kind)
{
	uintptr_t site = ret - sizeof(nop5);
	uintptr_t ip = site - (kind & KIND_ENDBR ? sizeof(endbr64) : 0);
	struct ftpad_ops *ops;

	/* First, so that nothing below can recurse, and ops is held safely. */
	if (!ftpad_enter())
		return;
	ops = ftpad_site_ops(site, kind & KIND_SLOT && calls_slot_stub(site) ? ip - 8 : 0);
	if (ops)
		ftpad_dispatch_entered(ip, parent_ip, ops, regs);
	ftpad_exit();
}
