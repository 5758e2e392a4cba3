/* SPDX-License-Identifier: MIT */
/*
 * ftpad attach's aarch64 hooks (cli/attach.h): registers through
 * PTRACE_GETREGSET NT_PRSTATUS (struct user_pt_regs), FP/SIMD through
 * NT_PRFPREG, and the kernel's syscall-restart rule as arm64 applies it
 * (arch/arm64/kernel/signal.c, do_signal).
 *
 * The stub (attach_stub_aarch64.S) cannot branch back to the thread's pc
 * with all 31 registers restored: a branch needs a register.  It ends in
 * rt_sigreturn instead, on a signal frame (struct rt_sigframe) that this
 * file builds in the block: the kernel restores x0-x30, sp, pc, pstate and
 * the FP/SIMD registers from it, all at once.
 */
#define _GNU_SOURCE
#include <asm/sigcontext.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/uio.h>

#include "attach.h"

#define INSN_SVC_0	0xd4000001u
/* The regsets' numbers (elf.h may lack the SME ones) and their header
 * (asm/ptrace.h's user_sve_header and user_za_header, which clash with
 * glibc's sys/ptrace.h). */
#define REGSET_SVE	0x405
#define REGSET_SSVE	0x40b
#define REGSET_ZA	0x40c
#define SVE_PT_REGS_SVE	1	/* the payload is SVE registers: live */
#define ZA_PT_ZA_OFFSET	16	/* a header alone: ZA is off */
#define PSR_BTYPE_MASK	0x00000c00ull
#define PSR_SS_BIT	0x00200000ull

/* The kernel's signal frame (arch/arm64/kernel/signal.c): glibc's
 * ucontext_t has the kernel's layout (its sigset_t is the kernel's 8
 * bytes and the 120 unused ones after them). */
struct frame {
	siginfo_t info;
	ucontext_t uc;
};

_Static_assert(sizeof(siginfo_t) == 128, "the kernel's siginfo");
_Static_assert(offsetof(struct frame, uc.uc_stack) == AB_A64_UC_STACK, "attach_block.h");
_Static_assert(offsetof(struct frame, uc.uc_sigmask) == AB_A64_UC_SIGMASK, "attach_block.h");
_Static_assert(offsetof(struct frame, uc.uc_mcontext) == 304, "the kernel's rt_sigframe");
_Static_assert(offsetof(struct frame, uc.uc_mcontext.__reserved) % 16 == 0,
	       "records are 16-byte aligned");

const int attach_elf_machine = EM_AARCH64;
const long attach_futex_syscall = SYS_futex;
const unsigned attach_red_zone = 0; /* AAPCS64: none; the block stays 64-byte aligned */

/* The 4 bytes at pc: an svc is the call the thread makes (again) there. */
static long call_at(pid_t tid, uint64_t pc, uint64_t x8)
{
	long word;

	errno = 0;
	word = ptrace(PTRACE_PEEKTEXT, tid, (void *)(pc & ~7ull), NULL);
	if (errno)
		return -1;
	return (uint32_t)((uint64_t)word >> (pc & 4 ? 32 : 0)) == INSN_SVC_0 ? (long)x8 : -1;
}

struct vector_header {
	uint32_t size, max_size;
	uint16_t vl, max_vl, flags, reserved;
};

/* The header of one of the vector regsets; zeroes where the CPU or the
 * kernel has none. */
static struct vector_header vector_header(pid_t tid, long regset)
{
	struct vector_header h = { 0 };
	struct iovec iov = { &h, sizeof(h) };

	if (ptrace(PTRACE_GETREGSET, tid, (void *)regset, &iov))
		memset(&h, 0, sizeof(h));
	return h;
}

/* State that the frame's FP/SIMD record would not give back: SVE
 * registers wider than 128 bits while live (a system call discards them:
 * not live for a thread in one), streaming mode (which rt_sigreturn
 * would end, and in which the stub's calls could not run) and ZA. */
static bool vector_state(pid_t tid, long syscall)
{
	return (syscall < 0 && vector_header(tid, REGSET_SVE).flags & SVE_PT_REGS_SVE) ||
	       vector_header(tid, REGSET_SSVE).flags & SVE_PT_REGS_SVE ||
	       vector_header(tid, REGSET_ZA).size > ZA_PT_ZA_OFFSET;
}

int attach_get_regs(pid_t tid, attach_regs *regs)
{
	struct iovec iov = { &regs->r, sizeof(regs->r) };

	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &iov))
		return -1;
	/* arm64 rewinds an interrupted restartable call before the ptrace
	 * stop (do_signal: "so that a debugger will see the already changed
	 * PC"): pc is back on the svc, x0 is orig_x0 again, x8 the call, and
	 * the syscall number is already forgotten (NT_ARM_SYSTEM_CALL reads
	 * -1).  The svc at pc is what says the thread is in a call. */
	regs->syscall = call_at(tid, regs->r.pc, regs->r.regs[8]);
	regs->vector_state = vector_state(tid, regs->syscall);
	return 0;
}

int attach_set_regs(pid_t tid, const attach_regs *regs)
{
	struct iovec iov = { (void *)&regs->r, sizeof(regs->r) };
	int no_call = -1;
	struct iovec nr = { &no_call, sizeof(no_call) };

	if (ptrace(PTRACE_SETREGSET, tid, (void *)NT_PRSTATUS, &iov))
		return -1;
	/* No syscall restart on the way out (do_signal forgot it already for
	 * a stop in a call; this also covers a stop at a syscall boundary):
	 * the frame has the call, and the stub makes it again. */
	ptrace(PTRACE_SETREGSET, tid, (void *)NT_ARM_SYSTEM_CALL, &nr);
	return 0;
}

uint64_t attach_pc(const attach_regs *regs)
{
	return regs->r.pc;
}

uint64_t attach_sp(const attach_regs *regs)
{
	return regs->r.sp;
}

long attach_syscall(const attach_regs *regs)
{
	return regs->syscall;
}

/* arm64 hides -ERESTART_RESTARTBLOCK from the debugger (x0 is orig_x0 by
 * the stop), so the calls that can return it count as such: the sleeps,
 * and futex (its timed waits). */
bool attach_restart_block(const attach_regs *regs)
{
	return regs->syscall == SYS_nanosleep || regs->syscall == SYS_clock_nanosleep ||
	       regs->syscall == SYS_futex;
}

bool attach_can_restore(const attach_regs *regs)
{
	return !regs->vector_state;
}

uint64_t attach_saved_regs(const attach_regs *regs, uint64_t out[AB_REGS_SIZE / 8],
			   void *xstate)
{
	struct frame *f = xstate;

	/* The kernel's rule is applied already (attach_get_regs): pc on the
	 * svc, x0 the first argument, x8 the call.  A call that would have
	 * gone on through restart_syscall is made again from the start
	 * instead: the stub's rt_sigreturn resets the restart record anyway,
	 * and x8 is the only call the registers still name.  A relative
	 * sleep (nanosleep) then sleeps its whole time again; an absolute
	 * one, and every other call, is made exactly as the kernel would. */
	memset(out, 0, AB_REGS_SIZE); /* unused: the frame has them */
	memcpy(f->uc.uc_mcontext.regs, regs->r.regs, sizeof(f->uc.uc_mcontext.regs));
	f->uc.uc_mcontext.sp = regs->r.sp;
	f->uc.uc_mcontext.pc = regs->r.pc;
	f->uc.uc_mcontext.pstate = regs->r.pstate;
	return regs->r.pc;
}

void attach_stub_regs(const attach_regs *regs, uint64_t stub, uint64_t block, attach_regs *out)
{
	*out = *regs; /* tpidr_el0 (TLS) is not in this set: it stays */
	out->r.pc = stub;
	out->r.sp = block;
	out->r.regs[19] = block; /* callee-saved: the block across the stub's calls */
	/* Entered by SETREGSET, not by a branch: no BTI landing pad is
	 * checked for the stub's first instruction once BTYPE is 0 (it starts
	 * with `bti c` anyway).  No single step. */
	out->r.pstate &= ~(PSR_BTYPE_MASK | PSR_SS_BIT);
	out->syscall = -1;
}

/* The signal frame rt_sigreturn restores the thread from: its FP/SIMD
 * registers now (a record the kernel requires), the terminator, and room
 * for attach_saved_regs' registers.  The signal mask and the alternate
 * stack are the stub's to fill, as they are when it returns.  No SVE or
 * SME record: a thread with such state is never chosen
 * (attach_can_restore). */
ssize_t attach_get_xstate(pid_t tid, void *buf, size_t size, uint64_t *features)
{
	struct frame *f = buf;
	struct user_fpsimd_struct fp; /* NT_PRFPREG */
	struct iovec iov = { &fp, sizeof(fp) };
	struct fpsimd_context rec = { .head = { FPSIMD_MAGIC, sizeof(rec) } };

	_Static_assert(sizeof(rec.vregs) == sizeof(fp.vregs), "NT_PRFPREG's layout");
	if (size < sizeof(*f)) {
		errno = EINVAL;
		return -1;
	}
	memset(buf, 0, size);
	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRFPREG, &iov))
		return -1;
	memcpy(rec.vregs, fp.vregs, sizeof(rec.vregs));
	rec.fpsr = fp.fpsr;
	rec.fpcr = fp.fpcr;
	/* The terminator after it is the zeroes memset left. */
	memcpy(f->uc.uc_mcontext.__reserved, &rec, sizeof(rec));
	*features = 0; /* nothing to choose: the kernel restores the records */
	return (ssize_t)((sizeof(*f) + 15) & ~(size_t)15);
}

size_t attach_xstate_max(void)
{
	return (sizeof(struct frame) + 63) & ~(size_t)63;
}
