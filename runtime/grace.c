/* SPDX-License-Identifier: MIT */
/*
 * grace.c - knowing when no thread can still hold a pointer it read while
 * dispatching, so that ops and replaced arrays can be given back.
 *
 * The scheme is the membarrier flavour of user-space RCU.  Each thread that
 * dispatches owns a slot in a static table, claimed on its first dispatch
 * (no malloc, so it works in signal handlers) and given back when it exits.
 * The slot's sequence number is odd while the thread is between
 * ftpad_enter() and ftpad_exit(), that is, from before it reads a site's ops
 * until after its callbacks return.  The thread updates it with plain stores
 * and a compiler barrier only; the writer pays instead: after unpublishing a
 * pointer it runs membarrier (a full barrier on every running thread), then
 * waits until every slot it saw odd has changed.  A thread that read the
 * old pointer had made its slot odd before, and the membarrier makes that
 * store visible; a thread that enters later reads the new pointer.
 *
 * Threads beyond the table's size share one counter (atomic increments);
 * the writer waits for it to reach zero, which may take longer under load.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <unistd.h>

#include "internal.h"

#define SLOTS 1024 /* slot 0 is the shared counter of the overflow threads */

static struct ftpad_thread_slot slots[SLOTS]; /* in .bss: no page until used */
static unsigned int used = 1;        /* atomic: slots below this were claimed once */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

__thread struct ftpad_thread_slot *ftpad_slot __attribute__((tls_model("initial-exec")));
__thread int ftpad_recursion __attribute__((tls_model("initial-exec")));

static void release_slot(void *arg)
{
	struct ftpad_thread_slot *slot = arg;

	ftpad_slot = NULL;
	if (slot != &slots[0])
		__atomic_store_n(&slot->owned, 0, __ATOMIC_RELEASE);
}

static void make_exit_key(void)
{
	pthread_key_create(&exit_key, release_slot);
}

/* Raise used to at least n: the writer scans slots below it. */
static void note_used(unsigned int n)
{
	unsigned int old = __atomic_load_n(&used, __ATOMIC_ACQUIRE);

	while (old < n && !__atomic_compare_exchange_n(&used, &old, n, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
}

struct ftpad_thread_slot *ftpad_claim_slot(void)
{
	struct ftpad_thread_slot *slot = &slots[0];

	pthread_once(&exit_key_once, make_exit_key);
	for (unsigned int i = 1; i < SLOTS; i++) {
		int free_ = 0;

		if (__atomic_compare_exchange_n(&slots[i].owned, &free_, 1, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			note_used(i + 1);
			slot = &slots[i];
			slot->errno_ptr = &errno;
			break;
		}
	}
	ftpad_slot = slot;
	pthread_setspecific(exit_key, slot);
	return slot;
}

/* Wait until the slot leaves the dispatch it was in when seen as seq. */
static void wait_slot(const struct ftpad_thread_slot *slot)
{
	unsigned long seq = __atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE);

	if (slot == &slots[0]) {
		while (__atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE))
			sched_yield();
		return;
	}
	if (!(seq & 1))
		return;
	while (__atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) == seq)
		sched_yield();
}

void ftpad_grace_wait(void)
{
	unsigned int n;

	/* Make every running thread's slot stores visible before reading them. */
	ftpad_text_sync_cores();
	n = __atomic_load_n(&used, __ATOMIC_ACQUIRE);
	for (unsigned int i = 0; i < n; i++)
		if (&slots[i] != ftpad_slot)
			wait_slot(&slots[i]);
}

/* The child of fork has one thread: the others' slots mean nothing there. */
static void forget_other_threads(void)
{
	/* Threads of the parent counted in the shared slot are gone too. */
	for (unsigned int i = 0; i < SLOTS; i++)
		if (&slots[i] != ftpad_slot)
			slots[i].owned = 0, slots[i].seq = 0;
}

__attribute__((constructor(101))) static void grace_init(void)
{
	/* Before anything can be enabled, so before any dispatch. */
	slots[0].shared = 1;
	pthread_atfork(NULL, NULL, forget_other_threads);
}
