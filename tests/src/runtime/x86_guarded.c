/* SPDX-License-Identifier: MIT */
/*
 * x86_guarded.c - after ftpad_register_ops() returns, every enabled site
 * calls, on every thread; after ftpad_unregister_ops() returns, none does;
 * also when other threads block SIGTRAP, so that libftpad writes the
 * batches without int3 (the "guarded" protocol of docs/runtime.md).
 *
 *   x86_guarded ROUNDS BLOCKERS...
 *
 * HOT threads call the 1000 padded functions g_000..g_999 in a loop and
 * count their iterations and their own callbacks.  The main thread, ROUNDS
 * times (one_round()): registers an ops on three functions, changes its
 * filter to three others, registers another on every function, unregisters
 * the first, then the other.  After each of these returns it watches every
 * hot thread for REACH of its own iterations: every call of those that
 * began after the return must have reached the callbacks that are
 * registered now (exactly one call of each), and none of the ops that is
 * not.  BLOCKERS, any of:
 *   sleeper  a thread that blocks every signal and sleeps;
 *   spinner  a thread that blocks every signal and calls g_* in a loop;
 *   churn    a thread that creates and joins threads in a tight loop
 *            (glibc blocks every signal in the caller and in the thread
 *            while it starts and while it exits), each calling g_*;
 *   flip     a thread that blocks every signal (pthread_sigmask or
 *            sigprocmask), calls g_*, unblocks, calls g_*, in a loop: it
 *            may block SIGTRAP after libftpad looked;
 *   handler  a SIGALRM timer whose handler, installed with every signal in
 *            its sa_mask, calls g_*: SIGTRAP blocked while it runs.
 *
 * Prints "ok rounds=R guarded=G" (G: batches written without int3, as
 * libftpad's debug lines say), or "FAIL ..." and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ftpad.h"

#define HOT 2
#define REACH 8 /* iterations each hot thread is watched for, per check */

/* g_000 .. g_999: x * 3 + their number. */
#define G(a, b, c)                                                  \
	__attribute__((noinline)) long g_##a##b##c(long x)          \
	{                                                           \
		return x * 3 + (a * 100 + b * 10 + c);              \
	}
#define G10(a, b) G(a, b, 0) G(a, b, 1) G(a, b, 2) G(a, b, 3) G(a, b, 4) \
	G(a, b, 5) G(a, b, 6) G(a, b, 7) G(a, b, 8) G(a, b, 9)
#define G100(a) G10(a, 0) G10(a, 1) G10(a, 2) G10(a, 3) G10(a, 4) \
	G10(a, 5) G10(a, 6) G10(a, 7) G10(a, 8) G10(a, 9)
G100(0) G100(1) G100(2) G100(3) G100(4) G100(5) G100(6) G100(7) G100(8) G100(9)
#undef G
#define G(a, b, c) g_##a##b##c,
static long (*const fns[])(long) = {
	G100(0) G100(1) G100(2) G100(3) G100(4) G100(5) G100(6) G100(7) G100(8) G100(9)
};
#define NF ((long)(sizeof(fns) / sizeof(fns[0])))

enum { ALL, FEW, NOPS };

struct hot {
	unsigned long iters;      /* atomic: loops completed */
	unsigned long calls[NOPS]; /* atomic: callbacks of each ops */
	pthread_t thread;
};

static struct hot hot[HOT];
static __thread struct hot *me;
static volatile int stop, wrong;

static void on_call(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		    struct ftpad_regs *regs);

static struct ftpad_ops ops[NOPS] = { { .func = on_call }, { .func = on_call } };

static void on_call(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *o,
		    struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)regs;
	if (me)
		__atomic_fetch_add(&me->calls[o == &ops[FEW]], 1, __ATOMIC_RELAXED);
}

/* Every function once, each result checked. */
static void call_all(long x)
{
	for (long i = 0; i < NF; i++)
		if (fns[i](x) != x * 3 + i)
			wrong = 1;
}

static void *hot_loop(void *arg)
{
	me = arg;
	for (long x = 0; !stop; x++) {
		call_all(x);
		__atomic_store_n(&me->iters, me->iters + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* ---- the threads that block SIGTRAP ---- */

static void block_all(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
}

static void *sleeper(void *arg)
{
	(void)arg;
	block_all(NULL);
	while (!stop)
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	return NULL;
}

static void *spinner(void *arg)
{
	(void)arg;
	block_all(NULL);
	for (long x = 0; !stop; x++) {
		call_all(x);
		sched_yield();
	}
	return NULL;
}

static void *short_lived(void *arg)
{
	return (void *)(g_000((long)arg) + g_999((long)arg));
}

static void *churn(void *arg)
{
	(void)arg;
	for (long x = 0; !stop; x++) {
		pthread_t t;
		void *r;

		if (pthread_create(&t, NULL, short_lived, (void *)x) || pthread_join(t, &r))
			wrong = 1;
		else if ((long)r != 6 * x + 999)
			wrong = 1;
	}
	return NULL;
}

/* With pthread_sigmask and sigprocmask in turn. */
static void *flip(void *arg)
{
	(void)arg;
	for (long x = 0; !stop; x++) {
		sigset_t all, old;

		sigfillset(&all);
		if (x & 1)
			sigprocmask(SIG_BLOCK, &all, &old);
		else
			pthread_sigmask(SIG_BLOCK, &all, &old);
		call_all(x);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		call_all(x);
	}
	return NULL;
}

/* On any thread, a hot one too: its calls are not the hot loop's. */
static void on_alarm(int sig)
{
	struct hot *saved = me;

	(void)sig;
	me = NULL;
	call_all(1);
	me = saved;
}

static int start_handler(void)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	struct itimerval every = { { 0, 200 }, { 0, 200 } };

	sigfillset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL))
		return -1;
	return setitimer(ITIMER_REAL, &every, NULL);
}

/* ---- what libftpad says about each batch ---- */

static unsigned long guarded_batches;

static int count_lines(enum ftpad_log_level level, const char *fmt, va_list ap)
{
	char line[512];

	vsnprintf(line, sizeof(line), fmt, ap);
	if (strstr(line, "written without int3")) {
		guarded_batches++;
		return 0;
	}
	if (level == FTPAD_WARN)
		fputs(line, stderr);
	return 0;
}

/* ---- the checks ---- */

static unsigned long load(const unsigned long *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/*
 * After an update returned: every hot thread's calls that begin from now
 * on reach ops k want[k] times per loop (NF, 3 or 0), for REACH loops.
 * The loop counts are read around the call counts, each one on the side
 * that makes the bounds hold whatever the thread did in between.
 */
static int check(const char *what, long round, const long want[NOPS])
{
	unsigned long calls0[HOT][NOPS], before[HOT], iters0[HOT];

	for (int t = 0; t < HOT; t++) {
		before[t] = load(&hot[t].iters);
		for (int k = 0; k < NOPS; k++)
			calls0[t][k] = load(&hot[t].calls[k]);
		iters0[t] = load(&hot[t].iters);
	}
	for (int t = 0; t < HOT; t++) {
		unsigned long iters, calls[NOPS], after;

		while ((iters = load(&hot[t].iters)) < iters0[t] + REACH)
			sched_yield();
		for (int k = 0; k < NOPS; k++)
			calls[k] = load(&hot[t].calls[k]);
		after = load(&hot[t].iters);
		for (int k = 0; k < NOPS; k++) {
			/* Loops iters0 + 1 .. iters - 1 ran whole after the
			 * update; at most loops before .. after ran in part. */
			unsigned long got = calls[k] - calls0[t][k];
			unsigned long whole = (iters - iters0[t] - 1) * (unsigned long)want[k];
			unsigned long most = (after - before[t] + 1) * (unsigned long)want[k];

			if (got < whole || got > most) {
				printf("FAIL round %ld, after %s: hot thread %d made %lu calls of "
				       "ops %d in %lu loops, wanted %ld per loop (%lu..%lu)\n",
				       round, what, t, got, k, iters - iters0[t], want[k], whole,
				       most);
				return -1;
			}
		}
	}
	return 0;
}

static int must(int err, const char *what, long round)
{
	if (err)
		printf("FAIL round %ld: %s: %s\n", round, what, ftpad_strerror(err));
	return err;
}

/*
 * One round of updates, each writing code: the few sites up; three up and
 * three down; the rest up; in odd rounds, with the few ops asking for the
 * full register save, the few from the full save's stub back to the plain
 * one (a call that stays a call); all down.
 */
static int one_round(long r)
{
	static const char *const firsts[] = { "g_007,g_500,g_993", "g_123,g_456,g_789" };
	const long none[NOPS] = { 0, 0 }, all[NOPS] = { NF, 0 }, few[NOPS] = { 0, 3 },
		   both[NOPS] = { NF, 3 };

	ops[FEW].flags = r & 1 ? FTPAD_OPS_FL_SAVE_REGS : 0;
	if (must(ftpad_set_filter(&ops[FEW], firsts[r & 1], 1), "filter", r) ||
	    must(ftpad_register_ops(&ops[FEW]), "register few", r) ||
	    check("register few", r, few) ||
	    must(ftpad_set_filter(&ops[FEW], firsts[!(r & 1)], 1), "refilter", r) ||
	    check("refilter", r, few) ||
	    must(ftpad_register_ops(&ops[ALL]), "register all", r) ||
	    check("register all", r, both) ||
	    must(ftpad_unregister_ops(&ops[FEW]), "unregister few", r) ||
	    check("unregister few", r, all) ||
	    must(ftpad_unregister_ops(&ops[ALL]), "unregister all", r) ||
	    check("unregister all", r, none))
		return -1;
	return 0;
}

static void *(*const blocker_fns[])(void *) = { sleeper, spinner, churn, flip };
static const char *const blocker_names[] = { "sleeper", "spinner", "churn", "flip" };

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 0, done = 0;
	pthread_t blockers[8];
	int nblockers = 0;

	if (rounds <= 0)
		return 2;
	ftpad_set_print(count_lines);
	for (int t = 0; t < HOT; t++)
		if (pthread_create(&hot[t].thread, NULL, hot_loop, &hot[t]))
			return 1;
	for (int i = 2; i < argc; i++) {
		size_t k;

		if (!strcmp(argv[i], "handler")) {
			if (start_handler())
				return 1;
			continue;
		}
		for (k = 0; k < sizeof(blocker_names) / sizeof(blocker_names[0]); k++)
			if (!strcmp(argv[i], blocker_names[k]))
				break;
		if (k == sizeof(blocker_names) / sizeof(blocker_names[0]) || nblockers == 8) {
			fprintf(stderr, "x86_guarded: %s: not a blocker\n", argv[i]);
			return 2;
		}
		if (pthread_create(&blockers[nblockers], NULL, blocker_fns[k], NULL))
			return 1;
		pthread_setname_np(blockers[nblockers++], blocker_names[k]);
	}
	while (done < rounds && !one_round(done))
		done++;
	stop = 1;
	setitimer(ITIMER_REAL, &(struct itimerval){ 0 }, NULL);
	for (int t = 0; t < HOT; t++)
		pthread_join(hot[t].thread, NULL);
	for (int i = 0; i < nblockers; i++)
		pthread_join(blockers[i], NULL);
	if (done < rounds)
		return 1;
	if (wrong) {
		printf("FAIL a padded function returned a wrong result\n");
		return 1;
	}
	printf("ok rounds=%ld guarded=%lu\n", done, guarded_batches);
	return 0;
}
