/* SPDX-License-Identifier: MIT */
/*
 * grace.c - knowing when no thread can still hold a pointer it read while
 * dispatching, so that ops and replaced arrays can be given back (and
 * giving back what was retired: ftpad_reclaim()); and the
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
 * Waiting sleeps.  After a few yields (enough for a dispatch that runs),
 * the writer sets the slot's futex word `waiters`, runs membarrier again
 * and, if the thread is still inside, sleeps on that word; the thread's
 * outermost exit, which reads `waiters` right after its store to w, wakes
 * it.  The membarrier is what makes that store-then-load safe without a
 * fence on the thread's side (liburcu's urcu-memb does the same): either
 * the thread's exit was visible to the writer's check after it, or the
 * thread's load comes after it and sees the flag.  So the hot path pays one
 * load and a branch not taken; a callback that blocks for seconds costs the
 * writer nothing but a wake-up every WAIT_SLICE to look again (and to stop
 * waiting for a thread that died inside a callback).
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
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
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
/* Yields before sleeping: a dispatch that runs is out by then. */
#define SPIN_YIELDS 4
/* A sleeping writer looks again this often, whatever wakes it. */
#define WAIT_SLICE_NS 100000000L

static struct ftpad_thread_slot first_slots[FIRST_SLOTS]; /* .bss: no page until used */
static struct chunk first_chunk = { .slots = first_slots, .n = FIRST_SLOTS };
static struct chunk *chunks = &first_chunk; /* atomic head */
static int reclaiming;                      /* atomic: a claim is taking slots back */
/* Until when ftpad_grace_wait() may wait; tv_sec < 0: no limit.  Under ftpad_lock. */
static struct timespec deadline = { .tv_sec = -1 };

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

void ftpad_grace_wake(struct ftpad_thread_slot *t)
{
	int saved_errno = errno;

	if (__atomic_exchange_n(&t->waiters, 0, __ATOMIC_RELAXED))
		syscall(SYS_futex, &t->waiters, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	errno = saved_errno;
}

void ftpad_grace_set_deadline(const struct timespec *until)
{
	deadline = until ? *until : (struct timespec){ .tv_sec = -1 };
}

static bool before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Whether the slot left the dispatch it was in when its word was w. */
static bool left(const struct ftpad_thread_slot *slot, unsigned long w)
{
	unsigned long now = __atomic_load_n(&slot->w, __ATOMIC_ACQUIRE);

	return !(now & FTPAD_DEPTH_MASK) || (now ^ w) >= FTPAD_GEN_ONE;
}

/*
 * Sleep until the owner of slot leaves the dispatch it was in at w, or
 * the deadline passes (false).  The owner's exit wakes us (see above);
 * every WAIT_SLICE_NS we look anyway, also at whether the owner died
 * inside a callback (it will never leave it, but it runs nothing either).
 */
static bool sleep_on(struct ftpad_thread_slot *slot, unsigned long w)
{
	bool out = false;

	while (!(out = left(slot, w))) {
		pid_t owner = __atomic_load_n(&slot->owner, __ATOMIC_RELAXED);
		struct timespec now, until;

		__atomic_store_n(&slot->waiters, 1, __ATOMIC_RELAXED);
		ftpad_text_sync_cores();
		if (left(slot, w) || !owner || thread_gone(getpid(), owner)) {
			out = true;
			break;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (deadline.tv_sec >= 0 && !before(&now, &deadline))
			break;
		until = now;
		until.tv_nsec += WAIT_SLICE_NS;
		if (until.tv_nsec >= 1000000000L)
			until.tv_sec++, until.tv_nsec -= 1000000000L;
		if (deadline.tv_sec >= 0 && before(&deadline, &until))
			until = deadline;
		/* Returns at once if the owner cleared the word meanwhile. */
		syscall(SYS_futex, &slot->waiters, FUTEX_WAIT_BITSET_PRIVATE, 1, &until, NULL,
			FUTEX_BITSET_MATCH_ANY);
	}
	__atomic_store_n(&slot->waiters, 0, __ATOMIC_RELAXED);
	return out;
}

/* Wait until the slot leaves the dispatch it is in: a few yields, then,
 * with sleep, until it does or the deadline passes; whether it did. */
static bool wait_slot(struct ftpad_thread_slot *slot, bool sleep)
{
	unsigned long w = __atomic_load_n(&slot->w, __ATOMIC_ACQUIRE);

	if (!(w & FTPAD_DEPTH_MASK))
		return true;
	for (int i = 0; i < SPIN_YIELDS; i++) {
		sched_yield();
		if (left(slot, w))
			return true;
	}
	return sleep && sleep_on(slot, w);
}

static bool grace(bool sleep)
{
	int saved_errno = errno;
	bool ok = true;

	/* Make every running thread's slot stores visible before reading them. */
	ftpad_text_sync_cores();
	for (struct chunk *c = __atomic_load_n(&chunks, __ATOMIC_ACQUIRE); c && ok; c = c->next) {
		unsigned int n = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);

		for (unsigned int i = 0; i < n && ok; i++)
			if (&c->slots[i] != ftpad_slot)
				ok = wait_slot(&c->slots[i], sleep);
	}
	errno = saved_errno;
	return ok;
}

bool ftpad_grace_wait(void)
{
	return grace(true);
}

bool ftpad_grace_try(void)
{
	/* Enough for dispatches that are running; not for a callback that
	 * blocks, nor for a thread preempted in one. */
	return grace(false);
}

/*
 * Deferred freeing: what was unpublished while another thread may still
 * hold it (replaced entries arrays, unloaded modules) waits here for a
 * grace period.  Under ftpad_lock.
 */
static struct ftpad_retired *retired;
/* No pointer was unpublished since the last grace period ended. */
static bool clean = true;

void ftpad_note_unpublished(void)
{
	clean = false;
}

void ftpad_retire(struct ftpad_retired *r, void (*free_fn)(struct ftpad_retired *r))
{
	r->free = free_fn;
	r->next = retired;
	retired = r;
	ftpad_note_unpublished();
}

bool ftpad_grace_unpublished(void)
{
	if (!ftpad_grace_wait())
		return false;
	clean = true;
	return true;
}

bool ftpad_grace_try_unpublished(void)
{
	if (!ftpad_grace_try())
		return false;
	clean = true;
	return true;
}

bool ftpad_reclaim(bool force)
{
	struct ftpad_retired *r = retired;

	if (!force && !r)
		return true;
	if (!clean && !ftpad_grace_unpublished())
		return false;
	retired = NULL;
	while (r) {
		struct ftpad_retired *next = r->next;

		r->free(r);
		r = next;
	}
	return true;
}

/* The child of fork has one thread: the others' slots mean nothing there,
 * this one's has a new tid, and no call of the parent's is waiting. */
void ftpad_grace_fork_child(void)
{
	for (struct chunk *c = chunks; c; c = c->next) {
		for (unsigned int i = 0; i < c->used; i++) {
			struct ftpad_thread_slot *s = &c->slots[i];

			s->waiters = 0;
			if (s != ftpad_slot)
				s->owner = 0, s->w = 0;
		}
	}
	if (ftpad_slot)
		ftpad_slot->owner = gettid();
	reclaiming = 0;
	ftpad_grace_set_deadline(NULL);
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
