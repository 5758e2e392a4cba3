/* SPDX-License-Identifier: MIT */
/*
 * grace.c - knowing when no thread can still hold a pointer it read while
 * dispatching, so that ops and replaced arrays can be given back; and the
 * per-thread state of dispatching (its depth, the busy count of
 * libftpad's own calls, the recursion guard, errno's address).
 *
 * The scheme is the membarrier flavour of user-space RCU.  Each thread that
 * dispatches owns a slot, claimed on its first dispatch.  The slot's word w
 * counts the dispatches the thread is in (depth) and, in its high bits, a
 * generation bumped by every outermost one.  The thread changes w with
 * single read-modify-write instructions and no fence; the writer pays
 * instead: after unpublishing a pointer it runs membarrier (a full barrier
 * on every running thread), then waits for every slot it saw inside a
 * dispatch until its depth is 0 or its generation moved on.  A thread that
 * read the old pointer had entered before, and the membarrier makes that
 * visible; a thread that enters later reads the new pointer.
 *
 * Slots are claimed without malloc and given back without a thread-exit
 * hook: pthread_setspecific() allocates once the key's index is 32 or more
 * (glibc's second-level array), and a claim happens on a thread's first
 * traced call, which may be in a signal handler, or in a traced allocator
 * that holds its own lock.  A slot records its owner's tid instead; when a
 * claim finds every slot taken, it takes back those whose thread is gone
 * (tgkill(pid, tid, 0) fails with ESRCH).  A tid reused by a new thread of
 * this process only keeps a slot held a while longer.
 *
 * Slots live in chunks: a static first one, then chunks mmapped as more
 * threads come (mmap is async-signal-safe), chained and never freed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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
static int reclaiming;                      /* atomic: a claim is taking slots back */

__thread struct ftpad_thread_slot *ftpad_slot __attribute__((tls_model("initial-exec")));

static void note_used(struct chunk *c, unsigned int n)
{
	unsigned int old = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);

	while (old < n && !__atomic_compare_exchange_n(&c->used, &old, n, false,
							__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
}

static struct ftpad_thread_slot *claim_in(struct chunk *c, pid_t tid)
{
	for (unsigned int i = 0; i < c->n; i++) {
		int free_ = 0;

		if (__atomic_load_n(&c->slots[i].owner, __ATOMIC_RELAXED))
			continue;
		if (__atomic_compare_exchange_n(&c->slots[i].owner, &free_, tid, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			note_used(c, i + 1);
			return &c->slots[i];
		}
	}
	return NULL;
}

static struct ftpad_thread_slot *claim_any(pid_t tid)
{
	struct ftpad_thread_slot *slot = NULL;

	for (struct chunk *c = __atomic_load_n(&chunks, __ATOMIC_ACQUIRE); c && !slot; c = c->next)
		slot = claim_in(c, tid);
	return slot;
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

static bool thread_gone(pid_t pid, pid_t tid)
{
	return syscall(SYS_tgkill, pid, tid, 0) < 0 && errno == ESRCH;
}

/*
 * Give back the slots of threads that are gone: *freed of the *held.
 * One claim at a time does it, so an owner seen gone is still the owner
 * at the compare-and-swap: only a reclaim frees a slot, and a slot is
 * claimed only once free.  false: another claim is doing it.
 */
static bool reclaim_dead(unsigned int *freed, unsigned int *held)
{
	pid_t pid = getpid();
	int idle = 0;

	*freed = *held = 0;
	if (!__atomic_compare_exchange_n(&reclaiming, &idle, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return false;
	for (struct chunk *c = __atomic_load_n(&chunks, __ATOMIC_ACQUIRE); c; c = c->next) {
		unsigned int n = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);

		*held += c->n;
		for (unsigned int i = 0; i < n; i++) {
			pid_t tid = __atomic_load_n(&c->slots[i].owner, __ATOMIC_RELAXED);

			if (tid && thread_gone(pid, tid) &&
			    __atomic_compare_exchange_n(&c->slots[i].owner, &tid, 0, false,
							__ATOMIC_RELEASE, __ATOMIC_RELAXED))
				(*freed)++;
		}
	}
	__atomic_store_n(&reclaiming, 0, __ATOMIC_RELEASE);
	return true;
}

/* A slot freed by the reclaim another claim is making: wait for it a
 * little (not for long: that claim may be this very thread's, interrupted
 * by the signal handler we run in). */
static struct ftpad_thread_slot *claim_reclaimed(pid_t tid)
{
	for (int i = 0; i < 64 && __atomic_load_n(&reclaiming, __ATOMIC_ACQUIRE); i++)
		sched_yield();
	return claim_any(tid);
}

/* A free slot, owned by tid from now on; NULL if none can be had. */
static struct ftpad_thread_slot *claim(pid_t tid)
{
	struct ftpad_thread_slot *slot = claim_any(tid);
	unsigned int freed, held;

	/* Every slot taken: take back those of threads gone.  Should that
	 * free few, map more room as well, so that claims do not scan every
	 * slot each time while many threads live. */
	if (!slot && !reclaim_dead(&freed, &held))
		slot = claim_reclaimed(tid);
	else if (!slot && freed * 4 >= held)
		slot = claim_any(tid);
	while (!slot) {
		struct chunk *c = grow();

		if (!c)
			return NULL;
		slot = claim_in(c, tid);
	}
	return slot;
}

struct ftpad_thread_slot *ftpad_claim_slot(void)
{
	struct ftpad_thread_slot *slot;
	int saved_errno = errno;

	slot = claim(gettid());
	if (slot) {
		/* Its last owner is gone: only this thread writes these now. */
		__atomic_store_n(&slot->w, 0, __ATOMIC_RELAXED);
		slot->guard = 0;
		slot->errno_ptr = &errno;
		ftpad_slot = slot;
	}
	errno = saved_errno;
	return slot;
}

unsigned long ftpad_grace_slots(void)
{
	unsigned long n = 0;

	for (struct chunk *c = __atomic_load_n(&chunks, __ATOMIC_ACQUIRE); c; c = c->next)
		n += c->n;
	return n;
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

/* The child of fork has one thread: the others' slots mean nothing there,
 * and this one's has a new tid. */
void ftpad_grace_fork_child(void)
{
	for (struct chunk *c = chunks; c; c = c->next)
		for (unsigned int i = 0; i < c->used; i++)
			if (&c->slots[i] != ftpad_slot)
				c->slots[i].owner = 0, c->slots[i].w = 0;
	if (ftpad_slot)
		ftpad_slot->owner = gettid();
	reclaiming = 0;
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
