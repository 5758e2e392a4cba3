/* SPDX-License-Identifier: MIT */
/*
 * quiesce.h - stopping every other thread of the process while code that
 * the architecture does not let change under a running thread is written
 * (aarch64: the `mov x9, x30` of a NOP NOP pad), the user-space
 * counterpart of Linux's stop_machine().  See quiesce.c.
 */
#ifndef FTPAD_QUIESCE_H
#define FTPAD_QUIESCE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* The real-time signal that stops the threads (docs/runtime.md). */
#define FTPAD_STOP_SIGNAL (SIGRTMAX - 4)

/* How long a thread may take to stop, or to be seen asleep again after
 * the write, before the operation is given up. */
#define FTPAD_STOP_TIMEOUT_MS 2000

/*
 * Called in each thread that was stopped in libftpad's signal handler,
 * after the write, with the thread's interrupted context (a ucontext_t):
 * it may change the context so that the thread resumes as if it had run
 * the new code.  pcs are the sorted addresses given to
 * ftpad_threads_stop().  Returns whether it changed anything.  Runs in a
 * signal handler: async-signal-safe code only.
 */
typedef bool (*ftpad_fixup_fn)(void *ucontext, const uintptr_t *pcs, size_t n);

/* Why the threads could not be stopped, for the caller's message. */
struct ftpad_stop_failure {
	int tid;       /* a thread that did not stop */
	bool blocks;   /* /proc/self/task/<tid>/status says it blocks the signal */
	bool at_pc;    /* it sleeps in the kernel at one of the pcs */
	bool too_many; /* threads were created faster than they could be stopped */
	int refused;   /* stopping is not allowed (FTPAD_STOP_THREADS unset) and
			* this many threads run */
};

/*
 * A thread other than this one whose mask blocks sig, as
 * /proc/self/task/<tid>/status shows it now, and that ignore (if not
 * NULL) does not excuse: its tid, with its name in name[size]; 0 when
 * there is none, -errno when the tasks cannot be listed.  Under
 * ftpad_lock.
 */
pid_t ftpad_thread_blocking(int sig, bool (*ignore)(pid_t tid), char *name,
			    size_t size) FTPAD_HIDDEN;

/*
 * Whether the program allows libftpad to stop its threads with a signal:
 * FTPAD_STOP_THREADS=1 in the environment.  Off by default, because the
 * signal is visible to the program (a call that SA_RESTART does not
 * restart returns EINTR once) and a library should not send its host's
 * threads signals unasked (docs/runtime.md).
 */
bool ftpad_threads_may_stop(void) FTPAD_HIDDEN;

/*
 * 0 when the caller may go on to ftpad_threads_stop(): no other thread
 * runs, or stopping them is allowed; else -EAGAIN with why->refused (the
 * thread count), before anything was set up or written.
 */
int ftpad_threads_check(struct ftpad_stop_failure *why) FTPAD_HIDDEN;

/*
 * Stop every other thread: each one either waits in libftpad's handler of
 * FTPAD_STOP_SIGNAL, or was seen, through /proc/self/task/<tid>/syscall,
 * asleep in the kernel with its user pc not in pcs (sorted, n of them).
 * Returns 0 with the threads stopped (at once when no other thread
 * runs), or -EAGAIN with *why filled when other threads run and stopping
 * them is not allowed (ftpad_threads_may_stop(); why->refused), or when
 * some thread did not stop within FTPAD_STOP_TIMEOUT_MS (nothing is left
 * stopped then).  Under ftpad_lock; logs nothing, allocates before it
 * stops anything.  Until ftpad_threads_release() the caller must take no
 * lock another thread may hold (no stdio, no malloc).
 */
int ftpad_threads_stop(const uintptr_t *pcs, size_t n, ftpad_fixup_fn fix,
		       struct ftpad_stop_failure *why) FTPAD_HIDDEN;

/*
 * After the write: every thread that was only seen asleep must be seen
 * asleep again away from the pcs (or stopped in the handler, or gone): a
 * thread that blocks the signal may have woken and run meanwhile.
 * Returns 0, or -EAGAIN with *why filled when one was not seen so within
 * FTPAD_STOP_TIMEOUT_MS.  The threads stay stopped either way.
 */
int ftpad_threads_confirm(struct ftpad_stop_failure *why) FTPAD_HIDDEN;

/*
 * Let every stopped thread go on; each one first runs the fix-up on its
 * context.  Returns how many contexts the fix-up changed.
 */
unsigned long ftpad_threads_release(void) FTPAD_HIDDEN;

#endif /* FTPAD_QUIESCE_H */
