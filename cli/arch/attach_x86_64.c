/* SPDX-License-Identifier: MIT */
/*
 * ftpad attach's x86_64 hooks (cli/attach.h): registers through
 * PTRACE_GETREGS, the extended state through NT_X86_XSTATE (the kernel's
 * standard XSAVE format, which XRSTOR reads back), and the kernel's
 * syscall-restart rule (arch/x86/kernel/signal.c).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "attach.h"

/* The kernel's internal errors for an interrupted call (linux/errno.h). */
#define ERESTARTSYS		512
#define ERESTARTNOINTR		513
#define ERESTARTNOHAND		514
#define ERESTART_RESTARTBLOCK	516

#define XSAVE_XSTATE_BV		512
#define XFEATURE_XTILEDATA	(1ull << 18)
#define FLAG_TF			0x100
#define FLAG_DF			0x400

const int attach_elf_machine = EM_X86_64;
const long attach_futex_syscall = SYS_futex;
const unsigned attach_red_zone = 128;

int attach_get_regs(pid_t tid, attach_regs *regs)
{
	return ptrace(PTRACE_GETREGS, tid, NULL, regs) ? -1 : 0;
}

int attach_set_regs(pid_t tid, const attach_regs *regs)
{
	return ptrace(PTRACE_SETREGS, tid, NULL, regs) ? -1 : 0;
}

uint64_t attach_pc(const attach_regs *regs)
{
	return regs->rip;
}

uint64_t attach_sp(const attach_regs *regs)
{
	return regs->rsp;
}

long attach_syscall(const attach_regs *regs)
{
	return (long)regs->orig_rax;
}

bool attach_restart_block(const attach_regs *regs)
{
	return (long)regs->orig_rax >= 0 && (long)regs->rax == -ERESTART_RESTARTBLOCK;
}

bool attach_can_restore(const attach_regs *regs)
{
	(void)regs;
	return true; /* XRSTOR puts back every part XCR0 enables */
}

uint64_t attach_saved_regs(const attach_regs *regs, uint64_t out[AB_REGS_SIZE / 8],
			   void *xstate)
{
	uint64_t rax = regs->rax, rip = regs->rip;

	(void)xstate; /* XRSTOR reads it as the kernel gave it */

	/* What the kernel would do on the way out with no handler to run:
	 * the stub's registers carry orig_rax = -1, so it does nothing, and
	 * the stub returns to the call instead (syscall is 2 bytes). */
	if ((long)regs->orig_rax >= 0) {
		switch ((long)regs->rax) {
		case -ERESTARTSYS:
		case -ERESTARTNOINTR:
		case -ERESTARTNOHAND:
			rax = regs->orig_rax;
			rip -= 2;
			break;
		case -ERESTART_RESTARTBLOCK:
			rax = SYS_restart_syscall;
			rip -= 2;
			break;
		}
	}
	memset(out, 0, AB_REGS_SIZE);
	out[AB_RAX / 8] = rax;
	out[AB_RBX / 8] = regs->rbx;
	out[AB_RCX / 8] = regs->rcx;
	out[AB_RDX / 8] = regs->rdx;
	out[AB_RSI / 8] = regs->rsi;
	out[AB_RDI / 8] = regs->rdi;
	out[AB_RBP / 8] = regs->rbp;
	out[AB_RSP / 8] = regs->rsp;
	out[AB_R8 / 8] = regs->r8;
	out[AB_R9 / 8] = regs->r9;
	out[AB_R10 / 8] = regs->r10;
	out[AB_R11 / 8] = regs->r11;
	out[AB_R12 / 8] = regs->r12;
	out[AB_R13 / 8] = regs->r13;
	out[AB_R14 / 8] = regs->r14;
	out[AB_R15 / 8] = regs->r15;
	out[AB_RFLAGS / 8] = regs->eflags;
	out[AB_RIP / 8] = rip;
	return rip;
}

void attach_stub_regs(const attach_regs *regs, uint64_t stub, uint64_t block,
		      attach_regs *out)
{
	*out = *regs; /* segment registers, fs_base (TLS) and gs_base stay */
	out->rip = stub;
	out->rsp = block;
	out->rbx = block;
	out->rax = 0;
	out->orig_rax = -1; /* no syscall restart on the way out: the block has it */
	out->eflags &= ~(uint64_t)(FLAG_TF | FLAG_DF); /* the ABI's DF = 0 for calls */
}

static uint64_t xcr0(void)
{
	uint32_t lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (uint64_t)hi << 32 | lo;
}

ssize_t attach_get_xstate(pid_t tid, void *buf, size_t size, uint64_t *features)
{
	struct iovec iov = { buf, size };
	uint64_t bv;

	memset(buf, 0, size);
	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov))
		return -1;
	if (iov.iov_len < XSAVE_XSTATE_BV + 64) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&bv, (char *)buf + XSAVE_XSTATE_BV, sizeof(bv));
	/* Every part XCR0 enables (the same machine: ours is the process's),
	 * those not in XSTATE_BV being in their initial state, which XRSTOR
	 * gives them.  Not the sw_reserved bytes' xfeatures: the kernel fills
	 * those in signal frames, not in this regset (6.18 leaves them 0).
	 * AMX tile data only if used: XRSTOR of it faults while the kernel
	 * keeps it disarmed (XFD) for a process that never used it. */
	*features = (xcr0() & ~XFEATURE_XTILEDATA) | (bv & XFEATURE_XTILEDATA);
	return (ssize_t)iov.iov_len;
}

size_t attach_xstate_max(void)
{
	return 16384; /* more than AVX-512 with AMX's 11008 bytes */
}
