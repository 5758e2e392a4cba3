/* SPDX-License-Identifier: MIT */
/*
 * quiesce.c - stopping every other thread of the process while the
 * caller writes code that may not change under a running thread, and
 * letting each one fix up its own interrupted context before it goes on:
 * what Linux's stop_machine() does for text the architecture does not
 * allow to be modified concurrently with its execution.
 *
 * The one user is aarch64's NOP NOP pad (arch/aarch64.c): its first NOP
 * becomes `mov x9, x30`, which is not in the architecture's list of
 * instructions that may change while another thread executes them, and a
 * thread that ran the old NOP and sits at the second instruction must get
 * x9 = x30 before the second instruction becomes a BL.
 *
 * How: every thread listed in /proc/self/task gets FTPAD_STOP_SIGNAL
 * (rt_tgsigqueueinfo, marked as ours) and its handler parks it on a futex
 * until the code is written; then it runs the caller's fix-up on its
 * ucontext and returns.  A thread that does not come (it blocks the
 * signal, sleeps uninterruptibly, is stopped) counts as stopped when
 * /proc/self/task/<tid>/syscall shows it asleep in the kernel with a user
 * pc that is not one of the caller's addresses: it runs no user code
 * before it takes the pending signal, or, if it blocks it, it is checked
 * again after the write (ftpad_threads_confirm()).  Threads created
 * meanwhile are found by listing the tasks again until no new one
 * appears; one created after that starts at its clone, never between
 * two instructions of a pad.
 *
 * The handler is async-signal-safe: no lock, no allocation, a linear scan
 * of the tids, futex waits.  What it reads lives in static memory, which
 * the next operation reuses only once no handler is inside (the inside
 * count).  Signals that are not ours (another sender, another library
 * using the same number) go to the action installed before ours.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "quiesce.h"

/* si_value of our signals, with si_code SI_QUEUE and our pid. */
#define STOP_COOKIE 0x66747073 /* "ftps" */

/* A thread's state in one stop (atomic). */
enum { T_SENT, T_PARKED, T_ASLEEP, T_GONE };

/* The phases of one stop (atomic, a futex word). */
enum { P_STOPPING = 1, P_RELEASED, P_ABORTED };

struct stopped_thread {
	pid_t tid;
	int state;
};

struct stop {
	int phase;               /* P_*: parked handlers wait while P_STOPPING */
	int parked;              /* bumped by each handler that parks: the writer's futex */
	size_t n;                /* atomic: threads[0..n) are published */
	size_t cap;              /* threads[] has room for cap, fixed while published */
	struct stopped_thread *threads;
	const uintptr_t *pcs;
	size_t npcs;
	ftpad_fixup_fn fix;
	unsigned long fixed;     /* atomic: contexts fix changed */
};

static struct stop the_stop;
static struct stop *active;    /* atomic: what handlers work on, or NULL */
static int inside;             /* atomic: handlers that may be reading *active */
static struct sigaction prior; /* the action installed before ours */

static long futex(int *word, int op, int val, const struct timespec *timeout)
{
	return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

static pid_t current_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ---- the handler, in every other thread ---- */

static struct stopped_thread *find_thread(struct stop *s, pid_t tid)
{
	size_t n = __atomic_load_n(&s->n, __ATOMIC_ACQUIRE);

	for (size_t i = 0; i < n; i++)
		if (s->threads[i].tid == tid)
			return &s->threads[i];
	return NULL;
}

/* Wait here until the code is written, then fix this thread's context. */
static void stop_here(void *uc)
{
	struct stop *s;

	__atomic_fetch_add(&inside, 1, __ATOMIC_SEQ_CST);
	s = __atomic_load_n(&active, __ATOMIC_SEQ_CST);
	if (s) {
		struct stopped_thread *t = find_thread(s, current_tid());

		if (t && __atomic_load_n(&s->phase, __ATOMIC_ACQUIRE) == P_STOPPING) {
			__atomic_store_n(&t->state, T_PARKED, __ATOMIC_RELEASE);
			__atomic_fetch_add(&s->parked, 1, __ATOMIC_RELEASE);
			futex(&s->parked, FUTEX_WAKE_PRIVATE, 1, NULL);
			while (__atomic_load_n(&s->phase, __ATOMIC_ACQUIRE) == P_STOPPING)
				futex(&s->phase, FUTEX_WAIT_PRIVATE, P_STOPPING, NULL);
		}
		/* Also a thread that comes only now: the code is written, and it
		 * may sit where the fix-up is needed. */
		if (__atomic_load_n(&s->phase, __ATOMIC_ACQUIRE) == P_RELEASED &&
		    s->fix(uc, s->pcs, s->npcs))
			__atomic_fetch_add(&s->fixed, 1, __ATOMIC_RELAXED);
	}
	__atomic_fetch_sub(&inside, 1, __ATOMIC_SEQ_CST);
}

static bool ours(const siginfo_t *info)
{
	return info->si_code == SI_QUEUE && info->si_pid == getpid() &&
	       info->si_value.sival_int == STOP_COOKIE;
}

/* A signal that is not ours: what the action before ours would have done. */
static void chain(int sig, siginfo_t *info, void *uc)
{
	if (prior.sa_flags & SA_SIGINFO) {
		prior.sa_sigaction(sig, info, uc);
	} else if (prior.sa_handler == SIG_DFL) {
		/* Terminate, as the default action of a real-time signal does:
		 * it is blocked here, and taken when the handler returns. */
		sigaction(sig, &prior, NULL);
		syscall(SYS_tgkill, getpid(), current_tid(), sig);
	} else if (prior.sa_handler != SIG_IGN) {
		prior.sa_handler(sig);
	}
}

static void on_stop_signal(int sig, siginfo_t *info, void *uc)
{
	int saved = errno;

	if (ours(info))
		stop_here(uc);
	else
		chain(sig, info, uc);
	errno = saved;
}

/* Ours, unless the program installed another action since. */
static int install_handler(void)
{
	struct sigaction sa = { .sa_sigaction = on_stop_signal,
				.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK };
	struct sigaction cur;

	if (sigaction(FTPAD_STOP_SIGNAL, NULL, &cur) < 0)
		return -errno;
	if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_stop_signal)
		return 0;
	/* Parked threads block everything: nothing else runs on them. */
	sigfillset(&sa.sa_mask);
	if (sigaction(FTPAD_STOP_SIGNAL, &sa, &prior) < 0)
		return -errno;
	return 0;
}

/* ---- what the writer sees of the other threads, through /proc ---- */

/* "/proc/self/task/<tid>/<file>" into buf (no stdio: other threads may
 * hold its locks while they are stopped). */
static void task_path(char *buf, pid_t tid, const char *file)
{
	char digits[16];
	int n = 0;

	do
		digits[n++] = (char)('0' + tid % 10);
	while ((tid /= 10) > 0);
	strcpy(buf, "/proc/self/task/");
	buf += strlen(buf);
	while (n)
		*buf++ = digits[--n];
	*buf++ = '/';
	strcpy(buf, file);
}

/* The file's first size - 1 bytes, NUL-terminated; -1 when it cannot be read. */
static ssize_t read_task_file(pid_t tid, const char *file, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	task_path(path, tid, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n;
}

static uintptr_t parse_hex(const char *p)
{
	uintptr_t v = 0;

	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	for (;; p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' :
			*p >= 'a' && *p <= 'f' ? *p - 'a' + 10 :
			*p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;

		if (d < 0)
			return v;
		v = v << 4 | (uintptr_t)d;
	}
}

enum seen { SEEN_RUNNING, SEEN_ASLEEP, SEEN_AT_PC, SEEN_GONE };

/*
 * Thread tid as the kernel shows it now: running (or unknown), asleep in
 * the kernel away from the pcs, asleep at one of them, or gone.  The
 * syscall file is "running", or the syscall number, its arguments, then
 * sp and the user pc of a thread that is not running.
 */
static enum seen observe(struct stop *s, pid_t tid)
{
	char buf[256];
	const char *last;

	if (syscall(SYS_tgkill, getpid(), tid, 0) < 0 && errno == ESRCH)
		return SEEN_GONE;
	if (read_task_file(tid, "syscall", buf, sizeof(buf)) <= 0 || !strncmp(buf, "running", 7))
		return SEEN_RUNNING;
	last = strrchr(buf, ' ');
	if (!last)
		return SEEN_RUNNING;
	return ftpad_sorted_has(s->pcs, s->npcs, parse_hex(last + 1)) ? SEEN_AT_PC : SEEN_ASLEEP;
}

/* Whether /proc/self/task/<tid>/status shows sig blocked; its name into
 * name[size] (the "Name:" line) when it does. */
static bool task_blocks(pid_t tid, int sig, char *name, size_t size)
{
	char buf[2048];
	const char *line;
	size_t n = 0;

	if (read_task_file(tid, "status", buf, sizeof(buf)) <= 0)
		return false;
	line = strstr(buf, "\nSigBlk:");
	if (!line)
		return false;
	line += strlen("\nSigBlk:");
	while (*line == ' ' || *line == '\t')
		line++;
	if (!(parse_hex(line) >> (sig - 1) & 1))
		return false;
	if (name && size && !strncmp(buf, "Name:", 5))
		for (line = buf + 5 + strspn(buf + 5, " \t"); n + 1 < size && line[n] &&
		     line[n] != '\n'; n++)
			name[n] = line[n];
	if (name && size)
		name[n] = 0;
	return true;
}

static bool blocks_signal(pid_t tid)
{
	return task_blocks(tid, FTPAD_STOP_SIGNAL, NULL, 0);
}

/* ---- listing and signalling ---- */

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static pid_t parse_tid(const char *name)
{
	long v = 0;

	if (!*name)
		return -1;
	for (; *name; name++) {
		if (*name < '0' || *name > '9' || v > INT_MAX / 10)
			return -1;
		v = v * 10 + (*name - '0');
	}
	return (pid_t)v;
}

/*
 * Call add(s, tid) for each thread of the process but this one, from
 * getdents64 (opendir() allocates).  Returns how many there are, or
 * -errno.
 */
static long for_each_task(struct stop *s, int (*add)(struct stop *, pid_t))
{
	char buf[4096];
	pid_t self = current_tid();
	long count = 0, n;
	int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
			pid_t tid = parse_tid(d->d_name);

			off += d->d_reclen;
			if (tid <= 0 || tid == self)
				continue;
			count++;
			if (add && add(s, tid) < 0) {
				close(fd);
				return -EAGAIN;
			}
		}
	}
	close(fd);
	return n < 0 ? -errno : count;
}

/* The other threads, counted before any is stopped; without /proc they
 * cannot be listed, and the caller fails: say why. */
static long count_threads(struct stop *s)
{
	long n = for_each_task(s, NULL);

	if (n < 0)
		ftpad_warn("ftpad: error: cannot list the threads (/proc/self/task: %s), which "
			   "must be stopped or gone while a kernel-ABI pad's MOV is written\n",
			   ftpad_strerror((int)n));
	return n;
}

static int send_stop(pid_t tid)
{
	siginfo_t info;

	memset(&info, 0, sizeof(info));
	info.si_signo = FTPAD_STOP_SIGNAL;
	info.si_code = SI_QUEUE;
	info.si_pid = getpid();
	info.si_uid = getuid();
	info.si_value.sival_int = STOP_COOKIE;
	if (syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, FTPAD_STOP_SIGNAL, &info) < 0)
		return -errno;
	return 0;
}

/* Add a thread not seen yet and signal it; -1 when there is no room. */
static int add_thread(struct stop *s, pid_t tid)
{
	size_t n = __atomic_load_n(&s->n, __ATOMIC_RELAXED);
	struct stopped_thread *t;

	for (size_t i = 0; i < n; i++)
		if (s->threads[i].tid == tid)
			return 0;
	if (n == s->cap)
		return -1;
	t = &s->threads[n];
	t->tid = tid;
	t->state = T_SENT;
	__atomic_store_n(&s->n, n + 1, __ATOMIC_RELEASE);
	if (send_stop(tid) == -ESRCH)
		__atomic_store_n(&t->state, T_GONE, __ATOMIC_RELAXED);
	return 0;
}

/* Room for every thread there is now and for many more to come, before
 * anything is published (the handlers read threads[] without a lock). */
static int reserve(struct stop *s, long threads)
{
	size_t want = (size_t)threads * 2 + 256;

	if (want > s->cap) {
		void *p = ftpad_realloc(s->threads, want * sizeof(*s->threads));

		if (!p)
			return -ENOMEM;
		s->threads = p;
		s->cap = want;
	}
	return 0;
}

/* ---- the writer ---- */

static long elapsed_ms(const struct timespec *since)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

/* Wait for a handler to park, or a little while. */
static void wait_a_little(struct stop *s, int parked)
{
	const struct timespec tick = { 0, 500 * 1000 };

	futex(&s->parked, FUTEX_WAIT_PRIVATE, parked, &tick);
}

/*
 * One look at every thread not stopped in the handler: whether each one
 * is stopped or gone or asleep away from the pcs, now.  Fills *why with
 * the first that is not.
 */
static bool all_still(struct stop *s, bool look, struct ftpad_stop_failure *why)
{
	size_t n = __atomic_load_n(&s->n, __ATOMIC_ACQUIRE);
	bool all = true;

	for (size_t i = 0; i < n; i++) {
		struct stopped_thread *t = &s->threads[i];
		int state = __atomic_load_n(&t->state, __ATOMIC_ACQUIRE);
		enum seen seen;

		if (state == T_PARKED || state == T_GONE)
			continue;
		seen = look ? observe(s, t->tid) : SEEN_RUNNING;
		if (seen == SEEN_GONE || seen == SEEN_ASLEEP) {
			/* Not over a handler that parked meanwhile. */
			__atomic_compare_exchange_n(&t->state, &state,
						    seen == SEEN_GONE ? T_GONE : T_ASLEEP, false,
						    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
			continue;
		}
		if (all) {
			why->tid = t->tid;
			why->at_pc = seen == SEEN_AT_PC;
		}
		all = false;
	}
	return all;
}

/* Let the handlers go, and wait until none of them reads *s any more. */
static void release(struct stop *s, int phase)
{
	__atomic_store_n(&s->phase, phase, __ATOMIC_RELEASE);
	futex(&s->phase, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
	__atomic_store_n(&active, NULL, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&inside, __ATOMIC_SEQ_CST))
		sched_yield();
}

/* ftpad_thread_blocking()'s search, under ftpad_lock. */
static struct {
	int sig;
	bool (*ignore)(pid_t tid);
	pid_t tid;
	char *name;
	size_t size;
} blocker;

static int note_blocker(struct stop *s, pid_t tid)
{
	(void)s;
	if (!task_blocks(tid, blocker.sig, blocker.name, blocker.size) ||
	    (blocker.ignore && blocker.ignore(tid)))
		return 0;
	blocker.tid = tid;
	return -1; /* found: stop listing */
}

pid_t ftpad_thread_blocking(int sig, bool (*ignore)(pid_t tid), char *name, size_t size)
{
	long n;

	blocker.sig = sig, blocker.ignore = ignore, blocker.tid = 0;
	blocker.name = name, blocker.size = size;
	n = for_each_task(NULL, note_blocker);
	return blocker.tid ? blocker.tid : n < 0 && n != -EAGAIN ? (pid_t)n : 0;
}

bool ftpad_threads_may_stop(void)
{
	const char *env = getenv("FTPAD_STOP_THREADS");

	return env && !strcmp(env, "1");
}

int ftpad_threads_check(struct ftpad_stop_failure *why)
{
	long threads;

	memset(why, 0, sizeof(*why));
	/* glibc knows no thread was ever started (under qemu-user, whose own
	 * thread shows in /proc, this is the only sure sign). */
	if (__libc_single_threaded || ftpad_threads_may_stop())
		return 0;
	threads = count_threads(&the_stop);
	if (threads <= 0)
		return threads < 0 ? (int)threads : 0;
	why->refused = (int)threads + 1;
	return -EAGAIN;
}

static int fail(struct ftpad_stop_failure *why)
{
	why->blocks = why->tid > 0 && blocks_signal(why->tid);
	return -EAGAIN;
}

int ftpad_threads_stop(const uintptr_t *pcs, size_t n, ftpad_fixup_fn fix,
		       struct ftpad_stop_failure *why)
{
	struct stop *s = &the_stop;
	struct timespec start;
	long threads;
	int err;

	memset(why, 0, sizeof(*why));
	__atomic_store_n(&active, NULL, __ATOMIC_SEQ_CST);
	/* glibc knows no thread was ever started (under qemu-user, whose own
	 * thread shows in /proc, this is the only sure sign). */
	if (__libc_single_threaded)
		return 0;
	threads = count_threads(s);
	if (threads <= 0)
		return threads < 0 ? (int)threads : 0;
	if (!ftpad_threads_may_stop())
		return ftpad_threads_check(why);
	err = reserve(s, threads);
	if (!err)
		err = install_handler();
	if (err)
		return err;
	s->n = 0;
	s->pcs = pcs;
	s->npcs = n;
	s->fix = fix;
	s->fixed = 0;
	s->parked = 0;
	s->phase = P_STOPPING;
	__atomic_store_n(&active, s, __ATOMIC_SEQ_CST);
	clock_gettime(CLOCK_MONOTONIC, &start);
	err = (int)for_each_task(s, add_thread);
	for (; err >= 0;) {
		int parked = __atomic_load_n(&s->parked, __ATOMIC_ACQUIRE);
		/* Give the threads a moment to come before reading /proc. */
		long ms = elapsed_ms(&start);

		if (all_still(s, ms >= 1, why)) {
			long before = (long)__atomic_load_n(&s->n, __ATOMIC_RELAXED);

			/* Threads that were started meanwhile. */
			err = (int)for_each_task(s, add_thread);
			if (err >= 0 && (long)__atomic_load_n(&s->n, __ATOMIC_RELAXED) == before)
				return 0;
			continue;
		}
		if (ms >= FTPAD_STOP_TIMEOUT_MS)
			break;
		wait_a_little(s, parked);
	}
	release(s, P_ABORTED);
	if (err == -EAGAIN) {
		why->tid = 0;
		why->too_many = true;
	}
	return err < 0 ? err : fail(why);
}

int ftpad_threads_confirm(struct ftpad_stop_failure *why)
{
	struct stop *s = __atomic_load_n(&active, __ATOMIC_SEQ_CST);
	struct timespec start;

	memset(why, 0, sizeof(*why));
	if (!s)
		return 0;
	/* A thread seen asleep that blocks the signal may have run since:
	 * it must be seen asleep again, now that the code is written, away
	 * from the pcs.  The others come to the handler first if they wake. */
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (!all_still(s, true, why)) {
		if (elapsed_ms(&start) >= FTPAD_STOP_TIMEOUT_MS)
			return fail(why);
		wait_a_little(s, __atomic_load_n(&s->parked, __ATOMIC_ACQUIRE));
	}
	return 0;
}

unsigned long ftpad_threads_release(void)
{
	struct stop *s = __atomic_load_n(&active, __ATOMIC_SEQ_CST);

	if (!s)
		return 0;
	release(s, P_RELEASED);
	return __atomic_load_n(&s->fixed, __ATOMIC_RELAXED);
}
