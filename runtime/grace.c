/* SPDX-License-Identifier: MIT */
/*
 * grace.c - knowing when no thread can still hold a pointer it read while
 * dispatching, so that ops and replaced arrays can be given back; and the
 * per-thread state of dispatching (its depth, the busy count of
 * libftpad's own calls, the recursion guard, errno's address).
 *
 * The scheme is the membarrier flavour of user-space RCU.  Each thread that
 * dispatches owns a slot, claimed on its first dispatch without malloc (so
 * it works in signal handlers and before constructors) and given back when
 * it exits.  The slot's word w counts the dispatches the thread is in
 * (depth) and, in its high bits, a generation bumped by every outermost
 * one.  The thread changes w with single read-modify-write instructions
 * and no fence; the writer pays instead: after unpublishing a pointer it
 * runs membarrier (a full barrier on every running thread), then waits for
 * every slot it saw inside a dispatch until its depth is 0 or its
 * generation moved on.  A thread that read the old pointer had entered
 * before, and the membarrier makes that visible; a thread that enters
 * later reads the new pointer.
 *
 * Slots live in chunks: a static first one, then chunks mmapped as more
 * threads come (mmap is async-signal-safe), chained and never freed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

struct chunk {
	struct chunk *next;                /* atomic: the list is only pushed onto */
	struct ftpad_thread_slot *slots;
	unsigned int n;
	unsigned int used;                 /* atomic: slots below were claimed once */
};

#define FIRST_SLOTS 256
#define CHUNK_BYTES (64 * 1024)

static struct ftpad_thread_slot first_slots[FIRST_SLOTS]; /* .bss: no page until used */
static struct chunk first_chunk = { .slots = first_slots, .n = FIRST_SLOTS };
static struct chunk *chunks = &first_chunk; /* atomic head */
static pthread_key_t exit_key;
static int exit_key_state; /* atomic: 0 none, 1 being made, 2 made */

__thread struct ftpad_thread_slot *ftpad_slot __attribute__((tls_model("initial-exec")));

static void release_slot(void *arg)
{
	struct ftpad_thread_slot *slot = arg;

	ftpad_slot = NULL;
	__atomic_store_n(&slot->w, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&slot->owned, 0, __ATOMIC_RELEASE);
}

/* The key whose destructor frees a thread's slot.  pthread_once is not
 * async-signal-safe, so a compare-and-swap decides who makes it; a thread
 * that loses the race this once simply keeps its slot when it exits. */
static void note_thread_exit(struct ftpad_thread_slot *slot)
{
	int state = __atomic_load_n(&exit_key_state, __ATOMIC_ACQUIRE);

	if (state == 0 && __atomic_compare_exchange_n(&exit_key_state, &state, 1, false,
						      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		if (pthread_key_create(&exit_key, release_slot) == 0)
			__atomic_store_n(&exit_key_state, 2, __ATOMIC_RELEASE);
		state = __atomic_load_n(&exit_key_state, __ATOMIC_ACQUIRE);
	}
	if (state == 2)
		pthread_setspecific(exit_key, slot);
}

static void note_used(struct chunk *c, unsigned int n)
{
	unsigned int old = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);

	while (old < n && !__atomic_compare_exchange_n(&c->used, &old, n, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
}

static struct ftpad_thread_slot *claim_in(struct chunk *c)
{
	for (unsigned int i = 0; i < c->n; i++) {
		int free_ = 0;

		if (__atomic_load_n(&c->slots[i].owned, __ATOMIC_RELAXED))
			continue;
		if (__atomic_compare_exchange_n(&c->slots[i].owned, &free_, 1, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			note_used(c, i + 1);
			return &c->slots[i];
		}
	}
	return NULL;
}

/* A new chunk, pushed on the list; NULL when mmap fails. */
static struct chunk *grow(void)
{
	void *mem = mmap(NULL, CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	struct chunk *c, *head;

	if (mem == MAP_FAILED)
		return NULL;
	/* The slots first (64-aligned), the header in the last slot's room. */
	c = (struct chunk *)((char *)mem + CHUNK_BYTES - sizeof(struct ftpad_thread_slot));
	c->slots = mem;
	c->n = CHUNK_BYTES / sizeof(struct ftpad_thread_slot) - 1;
	c->used = 0;
	head = __atomic_load_n(&chunks, __ATOMIC_ACQUIRE);
	do
		c->next = head;
	while (!__atomic_compare_exchange_n(&chunks, &head, c, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_ACQUIRE));
	return c;
}

struct ftpad_thread_slot *ftpad_claim_slot(void)
{
	struct ftpad_thread_slot *slot = NULL;
	int saved_errno = errno;

	for (struct chunk *c = __atomic_load_n(&chunks, __ATOMIC_ACQUIRE); c && !slot; c = c->next)
		slot = claim_in(c);
	while (!slot) {
		struct chunk *c = grow();

		if (!c) {
			errno = saved_errno;
			return NULL;
		}
		slot = claim_in(c);
	}
	slot->w = 0;
	slot->guard = 0;
	slot->errno_ptr = &errno;
	ftpad_slot = slot;
	note_thread_exit(slot);
	errno = saved_errno;
	return slot;
}

/* Wait until the slot leaves the dispatch it was in when its word was w,
 * yielding at most tries times; whether it did. */
static bool wait_slot(const struct ftpad_thread_slot *slot, unsigned long tries)
{
	unsigned long w = __atomic_load_n(&slot->w, __ATOMIC_ACQUIRE), now;

	if (!(w & FTPAD_DEPTH_MASK))
		return true;
	for (;;) {
		now = __atomic_load_n(&slot->w, __ATOMIC_ACQUIRE);
		if (!(now & FTPAD_DEPTH_MASK) || (now ^ w) >= FTPAD_GEN_ONE)
			return true;
		if (!tries--)
			return false;
		sched_yield();
	}
}

static bool grace(unsigned long tries)
{
	/* Make every running thread's slot stores visible before reading them. */
	ftpad_text_sync_cores();
	for (struct chunk *c = __atomic_load_n(&chunks, __ATOMIC_ACQUIRE); c; c = c->next) {
		unsigned int n = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);

		for (unsigned int i = 0; i < n; i++)
			if (&c->slots[i] != ftpad_slot && !wait_slot(&c->slots[i], tries))
				return false;
	}
	return true;
}

void ftpad_grace_wait(void)
{
	grace(~0ul);
}

bool ftpad_grace_try(void)
{
	/* Enough for dispatches that are running; not for a callback that
	 * blocks, nor for a thread preempted in one. */
	return grace(4);
}

/* The child of fork has one thread: the others' slots mean nothing there. */
void ftpad_grace_fork_child(void)
{
	for (struct chunk *c = chunks; c; c = c->next)
		for (unsigned int i = 0; i < c->used; i++)
			if (&c->slots[i] != ftpad_slot)
				c->slots[i].owned = 0, c->slots[i].w = 0;
}

int ftpad_recursion_trylock(void)
{
	struct ftpad_thread_slot *t = ftpad_slot ? ftpad_slot : ftpad_claim_slot();

	if (!t)
		return -ENOMEM;
	if (t->guard)
		return -EBUSY;
	/* Plain increments: a signal handler between load and store leaves
	 * the guard as it found it. */
	t->guard++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return 0;
}

void ftpad_recursion_unlock(void)
{
	struct ftpad_thread_slot *t = ftpad_slot;

	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (t && t->guard)
		t->guard--;
}
