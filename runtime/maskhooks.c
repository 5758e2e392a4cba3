/* SPDX-License-Identifier: MIT */
/*
 * maskhooks.c - in libftpad.so only: pthread_sigmask and sigprocmask,
 * interposed so that no thread comes to block the signal the patch
 * protocol traps with (SIGTRAP on x86_64) while a batch that traps is
 * written: the kernel kills a thread that runs into a trap it blocks, and
 * the patching thread can only read each thread's mask before the batch.
 * A change that may block it waits until such a batch is written
 * (arch.h ftpad_arch_mask_enter()).  glibc's own changes (a thread being
 * created or ending) do not come here, and run no padded code.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arch.h"

/*
 * What glibc's pthread_sigmask does: never block its internal signals
 * (SIGCANCEL and SIGSETXID, 32 and 33, which sigdelset() refuses), one
 * rt_sigprocmask; around it, the arch's hold when the new mask may block
 * the trap signal.  Returns 0 or an errno value, errno untouched.
 */
static int change_mask(int how, const sigset_t *set, sigset_t *old)
{
	int saved = errno, err = 0;
	bool held = false;
	sigset_t mine;

	if (set && (how == SIG_BLOCK || how == SIG_SETMASK)) {
		mine = *set;
		mine.__val[0] &= ~(3ul << 31);
		set = &mine;
		held = ftpad_arch_mask_enter(set);
	}
	if (syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8) < 0)
		err = errno;
	if (held)
		ftpad_arch_mask_exit();
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
