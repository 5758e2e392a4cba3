/* SPDX-License-Identifier: MIT */
/*
 * sighooks.c - in libftpad.so only: sigaction and signal, interposed while
 * the recorder runs (record_session.c), install a wrapper around the program's
 * handler, so that a SIGNAL event (site: the signal number) precedes the
 * handler's calls and a SIGRETURN event follows them when it returns.  The
 * handler gets its real arguments (the wrapper always asks for SA_SIGINFO
 * and passes (sig, info, context) on only when the program asked for it);
 * the other flags (SA_NODEFER, SA_RESTART...) and the mask are the
 * program's, and a query returns the program's handler and flags.
 * SA_RESETHAND is done by the wrapper, not the kernel: the kernel would
 * put back the real default, without the recorder's end (a crash handler
 * that logs and raises again would lose the whole trace), and a query
 * would show the wrapper's SA_SIGINFO; the wrapper puts back what stands
 * for the default before the handler runs, as the kernel does.
 * glibc's signal() reaches sigaction without the PLT, so both are
 * interposed; libftpad.map gives them glibc's version.
 *
 * A signal left at its default action that would end the process has the
 * recorder's handler instead, which ends the trace first (record_session.c
 * end_by_signal()): a query shows SIG_DFL for it, and setting SIG_DFL
 * sets it.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>

#include "ftpad_trace.h"
#include "internal.h"

/* glibc's own entry point, exported for exactly this. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* The program's handler and flags per signal, while the wrapper stands in. */
static struct {
	void *handler; /* atomic */
	int flags;     /* atomic */
} wrapped[NSIG];

/*
 * libc's sigaction, called directly: not found with dlsym(RTLD_NEXT),
 * which takes the loader's lock, while libftpad installs its own SIGTRAP
 * handler with its lock held, and dlclose() holds the loader's lock while
 * it waits for libftpad's: a deadlock that test_dlclose_races_register hit.
 */
static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return __sigaction(sig, act, old);
}

/* SA_RESETHAND's reset, done by the wrapper: the default, which is the
 * recorder's end for a signal that ends the process. */
static void reset_to_default(int sig)
{
	const struct sigaction *dfl = ftpad_record_default_action(sig);
	struct sigaction plain = { .sa_handler = SIG_DFL };

	if (!dfl) {
		sigemptyset(&plain.sa_mask);
		dfl = &plain;
	}
	real_sigaction(sig, dfl, NULL);
}

static void wrapper(int sig, siginfo_t *info, void *context)
{
	void *h = __atomic_load_n(&wrapped[sig].handler, __ATOMIC_ACQUIRE);
	int flags = __atomic_load_n(&wrapped[sig].flags, __ATOMIC_RELAXED);
	/* Above every frame the handler makes, below the interrupted ones:
	 * the stack pointer the wrapper was entered with (its CFA).  Not its
	 * frame address: on aarch64 that is where its frame record sits, at
	 * its frame's bottom, so the handler is entered with that very stack
	 * pointer, and a reader takes an entry at the mark's sp as a frame
	 * that left the mark's. */
	uintptr_t sp = (uintptr_t)__builtin_dwarf_cfa();

	if (flags & SA_RESETHAND)
		reset_to_default(sig);
	ftpad_record_signal(FTPAD_EVENT_SIGNAL, sig, sp);
	if (flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))h)(sig, info, context);
	else
		((void (*)(int))h)(sig);
	ftpad_record_signal(FTPAD_EVENT_SIGRETURN, sig, sp);
}

static bool is_handler(const struct sigaction *act)
{
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

FTPAD_API int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction mine;
	void *prev_handler = NULL;
	int prev_flags = 0, err;

	if (sig > 0 && sig < NSIG) {
		prev_handler = __atomic_load_n(&wrapped[sig].handler, __ATOMIC_ACQUIRE);
		prev_flags = wrapped[sig].flags;
	}
	if (act && sig > 0 && sig < NSIG && is_handler(act) && ftpad_record_active()) {
		mine = *act;
		mine.sa_sigaction = wrapper;
		mine.sa_flags = (act->sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
		__atomic_store_n(&wrapped[sig].flags, act->sa_flags, __ATOMIC_RELAXED);
		__atomic_store_n(&wrapped[sig].handler, (void *)act->sa_sigaction,
				 __ATOMIC_RELEASE);
		act = &mine;
	} else if (act && act->sa_handler == SIG_DFL && ftpad_record_default_action(sig)) {
		act = ftpad_record_default_action(sig); /* the default, trace ended first */
	}
	err = real_sigaction(sig, act, old);
	if (!err && old && old->sa_sigaction == wrapper) {
		old->sa_sigaction = (void (*)(int, siginfo_t *, void *))prev_handler;
		old->sa_flags = prev_flags;
	} else if (!err && old && ftpad_record_is_default_action(old)) {
		old->sa_handler = SIG_DFL;
		old->sa_flags = 0;
		sigemptyset(&old->sa_mask);
	}
	return err;
}

FTPAD_API sighandler_t signal(int sig, sighandler_t handler)
{
	struct sigaction act, old;

	/* glibc's signal(): BSD semantics. */
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = SA_RESTART;
	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, sig > 0 && sig < NSIG ? sig : 1);
	if (sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}
