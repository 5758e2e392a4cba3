/* SPDX-License-Identifier: MIT */
/*
 * lock.c - ftpad_lock, the lock every update of modules, ops and text
 * takes: taken, tried and given back, who holds it, and what becomes of
 * it around fork.
 *
 * A thread is busy (its slot's busy count, grace.c) from before it takes
 * the lock until it has given it back: its own calls, in signal handlers
 * too, reach no callback meanwhile, as it may be half way through a
 * change, and a handler on it that forks knows it must not wait for the
 * lock (ftpad_lock_fork_prepare()).
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "internal.h"

static pthread_mutex_t ftpad_lock = PTHREAD_MUTEX_INITIALIZER;

/* The slot of the thread that holds ftpad_lock, for ftpad_lock_fork_prepare(). */
static struct ftpad_thread_slot *lock_holder;

static void busy(long delta)
{
	struct ftpad_thread_slot *t = ftpad_slot ? ftpad_slot : ftpad_claim_slot();

	if (t)
		__atomic_fetch_add(&t->w, delta * (long)FTPAD_BUSY_ONE, __ATOMIC_RELAXED);
}

/* Whether a signal handler interrupted this thread between a take and its give. */
static bool busy_here(void)
{
	return ftpad_slot && (__atomic_load_n(&ftpad_slot->w, __ATOMIC_RELAXED) & FTPAD_BUSY_MASK);
}

static void note_holder(void)
{
	__atomic_store_n(&lock_holder, ftpad_slot, __ATOMIC_RELAXED);
}

int ftpad_lock_take_until(const struct timespec *until)
{
	int err;

	busy(1);
	err = until ? pthread_mutex_clocklock(&ftpad_lock, CLOCK_MONOTONIC, until)
		    : pthread_mutex_lock(&ftpad_lock);
	if (err) {
		busy(-1);
		return -err;
	}
	note_holder();
	return 0;
}

void ftpad_lock_take(void)
{
	ftpad_lock_take_until(NULL);
}

bool ftpad_lock_try(void)
{
	busy(1);
	if (pthread_mutex_trylock(&ftpad_lock)) {
		busy(-1);
		return false;
	}
	note_holder();
	return true;
}

void ftpad_lock_give(void)
{
	__atomic_store_n(&lock_holder, NULL, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ftpad_lock);
	busy(-1);
}

/*
 * Around fork the lock is taken, so that the child never starts with it
 * held by a thread it does not have, nor with a batch half written.  From
 * inside a callback, only if it is free: its holder may be waiting for
 * this very callback to end.  Likewise from a signal handler that
 * interrupted this thread while busy: it may hold the lock itself.  If it
 * was not free, its holder was in the middle of a change; the child, the
 * only thread left, makes the lock new, and its caller reads the state of
 * every site back from the code (fork.c).  If that holder is the forking
 * thread, the child goes on with its change once the handler returns,
 * lock held.
 */
static bool fork_locked, fork_holds;

bool ftpad_lock_fork_prepare(void)
{
	bool may_block = !ftpad_in_dispatch() && !busy_here();

	fork_locked = may_block ? !pthread_mutex_lock(&ftpad_lock)
				: !pthread_mutex_trylock(&ftpad_lock);
	fork_holds = !fork_locked && ftpad_slot &&
		     __atomic_load_n(&lock_holder, __ATOMIC_RELAXED) == ftpad_slot;
	return may_block;
}

void ftpad_lock_fork_parent(void)
{
	if (fork_locked)
		pthread_mutex_unlock(&ftpad_lock);
}

bool ftpad_lock_fork_child(void)
{
	if (fork_locked) {
		pthread_mutex_unlock(&ftpad_lock);
		return false;
	}
	if (fork_holds)
		return false;
	pthread_mutex_init(&ftpad_lock, NULL);
	return true;
}
