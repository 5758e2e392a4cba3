/* SPDX-License-Identifier: MIT */
/*
 * maskhooks.c - in libftpad.so only: pthread_sigmask and sigprocmask,
 * interposed so that no thread comes to block the signal the patch
 * protocol traps with (SIGTRAP on x86_64) while a batch that traps is
 * written: the kernel kills a thread that runs into a trap it blocks, and
 * the patching thread can only read each thread's mask before the batch.
 * A change that may block it waits until such a batch is written
 * (arch.h ftpad_arch_mask_wait()).  glibc's own changes (a thread being
 * created or ending) do not come here, and run no padded code.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arch.h"

static long sigprocmask_syscall(int how, const sigset_t *set, sigset_t *old)
{
	return syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}

/*
 * A change that may block the trap signal: every signal blocked first,
 * so that no handler runs (and no padded code) while it waits for a batch
 * that traps to be written (arch.h ftpad_arch_mask_wait()), then the mask
 * asked for.  Returns 0 or an errno value.
 */
static int change_mask_held(int how, const sigset_t *set, sigset_t *old)
{
	sigset_t all, prev, final;

	sigfillset(&all);
	if (sigprocmask_syscall(SIG_BLOCK, &all, &prev) < 0)
		return errno;
	ftpad_arch_mask_wait();
	if (how == SIG_BLOCK)
		sigorset(&final, &prev, set);
	else
		final = *set;
	if (sigprocmask_syscall(SIG_SETMASK, &final, NULL) < 0)
		return errno;
	if (old)
		*old = prev;
	return 0;
}

/*
 * What glibc's pthread_sigmask does: never block its internal signals
 * (SIGCANCEL and SIGSETXID, 32 and 33, which sigdelset() refuses), one
 * rt_sigprocmask; a change that may block the trap signal goes through
 * change_mask_held().  Returns 0 or an errno value, errno untouched.
 */
static int change_mask(int how, const sigset_t *set, sigset_t *old)
{
	int saved = errno, err = 0;
	sigset_t mine;

	if (set && (how == SIG_BLOCK || how == SIG_SETMASK)) {
		mine = *set;
		mine.__val[0] &= ~(3ul << 31);
		set = &mine;
		if (ftpad_arch_mask_may_trap(set)) {
			err = change_mask_held(how, set, old);
			errno = saved;
			return err;
		}
	}
	if (sigprocmask_syscall(how, set, old) < 0)
		err = errno;
	errno = saved;
	return err;
}

FTPAD_API int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return change_mask(how, set, old);
}

FTPAD_API int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	int err = change_mask(how, set, old);

	if (!err)
		return 0;
	errno = err;
	return -1;
}
