/* SPDX-License-Identifier: MIT */
/*
 * thread.c - the runtime's own threads (record_writer.c's writer,
 * attach.c's control thread): their signal mask, and their start.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>

#include "internal.h"
#include "quiesce.h"

/*
 * The program's signals are not the runtime's threads' (the writer's, the
 * attach control thread's); but the patch protocol needs SIGTRAP (x86_64
 * int3) and the stop signal (aarch64 MOVs) to reach every thread, or it
 * refuses sites it cannot write without them (exit sites may cross a cache
 * line), and faults stay faults.
 */
void ftpad_runtime_thread_mask(sigset_t *mask)
{
	const int open_signals[] = { SIGTRAP, FTPAD_STOP_SIGNAL, SIGSEGV, SIGBUS, SIGILL, SIGFPE };

	sigfillset(mask);
	for (size_t i = 0; i < sizeof(open_signals) / sizeof(open_signals[0]); i++)
		sigdelset(mask, open_signals[i]);
}

int ftpad_runtime_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg,
			       bool detached)
{
	pthread_attr_t attr;
	sigset_t mask;
	int err;

	ftpad_runtime_thread_mask(&mask);
	err = pthread_attr_init(&attr);
	if (err)
		return -err;
	if (detached)
		err = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (!err)
		err = pthread_attr_setsigmask_np(&attr, &mask);
	if (!err)
		err = pthread_create(thread, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return -err;
}
