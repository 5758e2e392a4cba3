/* SPDX-License-Identifier: MIT */
/*
 * stress.c - threads calling traced functions in tight loops while another
 * thread patches them, built with the GCC plugin at -O2 and linked with
 * libftpad.  Every callback checks ip and the arguments; every worker
 * checks the results; the ops and its state are freed right after each
 * unregister, so a late call would read freed memory and fail the check.
 *
 *   stress race THREADS TOGGLES   register/unregister/refilter while the
 *                                 workers never stop
 *   stress signals THREADS TOGGLES  race, with a SIGPROF timer every 200 us
 *                                 of CPU time whose handler calls traced
 *                                 functions, landing in pads mid-patch too
 *   stress fork THREADS FORKS     race (10 toggles per fork) while another
 *                                 thread forks children that trace mix2
 *   stress exact THREADS ROUNDS   between barriers, count every call exactly
 *   stress exactrace THREADS ROUNDS  the same with one ops registered all
 *                                 along, while another thread registers and
 *                                 unregisters other ops (some with the full
 *                                 register save) on the same functions
 *   stress forkcb THREADS FORKS   race, while another thread forks from
 *                                 inside a callback; each child must find
 *                                 libftpad usable
 *
 * Prints "ok calls=N traps=N" or "FAIL ..." lines; exits 1 on any failure.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include "ftpad.h"

#define CALLS_PER_ROUND 1000

__attribute__((noinline)) long mix2(long a, long b)
{
	return a * 3 + b;
}

__attribute__((noinline)) long mix8(long a, long b, long c, long d, long e, long f, long g,
				    long h)
{
	return a + b + c + d + e + f + g + h;
}

__attribute__((noinline)) double scale(double x, long n)
{
	return x * 2 + (double)n;
}

static const struct timespec linger = { 0, 50000 };
static volatile int stop;
static unsigned long failures, late_calls, bad_ip, bad_args;
static unsigned long first_bad_ip; /* named in the FAIL line */

struct state {
	unsigned long calls;   /* atomic */
	int alive;             /* cleared right after unregister returns */
};

static void fail(unsigned long *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/* Each function is called with arguments a callback can check on its own. */
static void check_call(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		       struct ftpad_regs *regs)
{
	struct state *st = ops->private;
	long a = (long)ftpad_regs_get_argument(regs, 0);
	volatile double fp = (double)a * 0.5; /* clobber xmm registers */

	(void)fp;
	if (!st->alive)
		fail(&late_calls);
	if (!parent_ip)
		fail(&bad_ip);
	if (ip == (unsigned long)mix2) {
		if ((long)ftpad_regs_get_argument(regs, 1) != ~a)
			fail(&bad_args);
	} else if (ip == (unsigned long)mix8) {
		for (unsigned int i = 1; i < 8; i++)
			if ((long)ftpad_regs_get_argument(regs, i) != a + i)
				fail(&bad_args);
	} else if (ip == (unsigned long)scale) {
		if ((long)ftpad_regs_get_argument(regs, 0) != 7)
			fail(&bad_args);
	} else {
		__atomic_compare_exchange_n(&first_bad_ip, &(unsigned long){ 0 }, ip, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
		fail(&bad_ip);
	}
	/* Now and then linger, so that unregistering has to wait for us. */
	if (__atomic_fetch_add(&st->calls, 1, __ATOMIC_RELAXED) % 256 == 0)
		nanosleep(&linger, NULL);
	if (!st->alive)
		fail(&late_calls);
}

/* One round of calls; 3 traced calls per iteration. */
static void call_round(long seed)
{
	for (long i = 0; i < CALLS_PER_ROUND; i++) {
		long a = seed + i;

		if (mix2(a, ~a) != a * 3 + ~a)
			fail(&failures);
		if (mix8(a, a + 1, a + 2, a + 3, a + 4, a + 5, a + 6, a + 7) != 8 * a + 28)
			fail(&failures);
		if (scale(1.25, 7) != 9.5)
			fail(&failures);
	}
}

/* SIGPROF lands anywhere, pads included, and calls traced functions too. */
static unsigned long profs;

static void on_prof(int sig)
{
	long a = (long)profs++;

	(void)sig;
	if (mix2(a, ~a) != a * 3 + ~a || scale(1.25, 7) != 9.5)
		fail(&failures);
}

static void start_profiling(void)
{
	struct sigaction sa = { .sa_handler = on_prof, .sa_flags = SA_RESTART };
	struct itimerval every = { { 0, 200 }, { 0, 200 } };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGPROF, &sa, NULL);
	setitimer(ITIMER_PROF, &every, NULL);
}

static void *race_worker(void *arg)
{
	long seed = (long)(intptr_t)arg * 1000003;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		call_round(seed++);
	return NULL;
}

/* States are never reused, so that a late call cannot find a live one. */
static struct state states[20001];
static int nstates;

/* An ops of its own state, in memory the caller gives. */
static struct ftpad_ops *init_ops(struct ftpad_ops *ops)
{
	int i = __atomic_fetch_add(&nstates, 1, __ATOMIC_RELAXED);
	struct state *st = &states[i];

	if (!ops || i >= (int)(sizeof(states) / sizeof(states[0])))
		abort();
	memset(ops, 0, sizeof(*ops));
	st->alive = 1;
	ops->func = check_call;
	ops->private = st;
	return ops;
}

static struct ftpad_ops *new_ops(void)
{
	return init_ops(malloc(sizeof(struct ftpad_ops)));
}

/* Free at once: a call after unregister returned finds garbage or a
 * dead state. */
static void free_ops(struct ftpad_ops *ops)
{
	struct state *st = ops->private;

	st->alive = 0;
	memset(ops, 0, sizeof(*ops));
	free(ops);
}

static void must(int err, const char *what)
{
	if (err) {
		printf("FAIL %s: %s\n", what, ftpad_strerror(err));
		exit(1);
	}
}

static const char *const filters[] = { "mix*", "scale", "mix8,scale", "mix2,mix8,scale" };

static unsigned long traps(void)
{
	struct ftpad_stats st = { .sz = sizeof(st) };

	ftpad_get_stats(&st);
	return st.traps;
}

static void run_race(int nthreads, int toggles)
{
	pthread_t t[64];
	struct ftpad_ops *keep = new_ops();

	/* An ops with no filter traces every function, call_round() among
	 * them: keep must never be registered without one. */
	must(ftpad_set_filter(keep, filters[0], 1), "filter keep");
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, race_worker, (void *)(intptr_t)i);
	for (int i = 0; i < toggles; i++) {
		struct ftpad_ops *ops = new_ops();

		must(ftpad_set_filter(ops, filters[i % 4], 1), "set_filter");
		must(ftpad_register_ops(ops), "register");
		/* Every 8th round a second ops shares the functions: the list ops. */
		if (i % 8 == 0) {
			must(ftpad_register_ops(keep), "register keep");
			must(ftpad_set_filter(keep, filters[(i / 8) % 4], 1), "refilter keep");
			must(ftpad_unregister_ops(keep), "unregister keep");
		}
		must(ftpad_unregister_ops(ops), "unregister");
		free_ops(ops);
	}
	stop = 1;
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	free_ops(keep);
}

/* Fork while the main thread patches: each child must find libftpad
 * usable (no lock held, sites whole) and trace its own calls. */
static void *forker(void *arg)
{
	int *forks = arg;

	for (int i = 0; i < *forks; i++) {
		pid_t pid = fork();
		int status = 0;

		if (pid == 0) {
			/* No malloc in the child of a threaded parent (ASan's
			 * allocator is not fork-safe); libftpad needs none. */
			static struct ftpad_ops child_ops;
			struct ftpad_ops *ops = init_ops(&child_ops);

			must(ftpad_set_filter(ops, "mix2", 1), "child set_filter");
			must(ftpad_register_ops(ops), "child register");
			call_round(i);
			must(ftpad_unregister_ops(ops), "child unregister");
			_exit(((struct state *)ops->private)->calls == CALLS_PER_ROUND ? 0 : 3);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status)) {
			printf("FAIL child %d: status %#x\n", i, status);
			fail(&failures);
		}
	}
	return NULL;
}

static void run_fork(int nthreads, int forks)
{
	pthread_t t;

	pthread_create(&t, NULL, forker, &forks);
	run_race(nthreads, forks * 10);
	pthread_join(t, NULL);
}

static pthread_barrier_t start, done;
static int rounds;

static void *exact_worker(void *arg)
{
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&start);
		call_round((long)(intptr_t)arg + r);
		pthread_barrier_wait(&done);
	}
	return NULL;
}

static void run_exact(int nthreads)
{
	pthread_t t[64];

	pthread_barrier_init(&start, NULL, nthreads + 1);
	pthread_barrier_init(&done, NULL, nthreads + 1);
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, exact_worker, (void *)(intptr_t)i);
	for (int r = 0; r < rounds; r++) {
		struct ftpad_ops *ops = new_ops();
		struct state *st = ops->private;
		unsigned long want = (unsigned long)nthreads * CALLS_PER_ROUND * (r % 2 ? 3 : 2);

		/* Odd rounds trace all three functions, even rounds two. */
		must(ftpad_set_filter(ops, r % 2 ? "mix*,scale" : "mix*", 1), "set_filter");
		must(ftpad_register_ops(ops), "register");
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		must(ftpad_unregister_ops(ops), "unregister");
		if (st->calls != want) {
			printf("FAIL round %d: %lu calls seen, %lu made\n", r, st->calls, want);
			fail(&failures);
		}
		free_ops(ops);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
}

/* Registers and unregisters ops on the functions the counting ops traces,
 * so that their sites change target (one ops, the list ops, the full
 * register save) all the time, until told to stop. */
static volatile int stop_toggling;

static void *toggler(void *arg)
{
	(void)arg;
	/* Leave states for the rest: new_ops() never reuses one. */
	for (int i = 0; !stop_toggling && i < 7000; i++) {
		struct ftpad_ops *ops = new_ops(), *extra = new_ops();

		if (i % 3 == 0)
			ops->flags |= FTPAD_OPS_FL_SAVE_REGS;
		must(ftpad_set_filter(ops, filters[i % 4], 1), "toggler set_filter");
		must(ftpad_register_ops(ops), "toggler register");
		/* A third ops on the same sites, gone again at once: the sites
		 * stay on the list ops, which must not call it after this. */
		must(ftpad_set_filter(extra, filters[(i + 1) % 4], 1), "toggler set_filter 2");
		must(ftpad_register_ops(extra), "toggler register 2");
		nanosleep(&linger, NULL); /* callbacks of extra run, some linger */
		must(ftpad_unregister_ops(extra), "toggler unregister 2");
		free_ops(extra);
		must(ftpad_unregister_ops(ops), "toggler unregister");
		free_ops(ops);
	}
	return NULL;
}

static void run_exactrace(int nthreads)
{
	pthread_t t[64], tog;
	struct ftpad_ops *keep = new_ops();
	struct state *st = keep->private;
	unsigned long seen = 0;

	pthread_barrier_init(&start, NULL, nthreads + 1);
	pthread_barrier_init(&done, NULL, nthreads + 1);
	must(ftpad_set_filter(keep, "mix2,mix8,scale", 1), "set_filter keep");
	must(ftpad_register_ops(keep), "register keep");
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, exact_worker, (void *)(intptr_t)i);
	pthread_create(&tog, NULL, toggler, NULL);
	for (int r = 0; r < rounds; r++) {
		unsigned long want = (unsigned long)nthreads * CALLS_PER_ROUND * 3, now;

		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		now = __atomic_load_n(&st->calls, __ATOMIC_RELAXED);
		if (now - seen != want) {
			printf("FAIL round %d: %lu calls seen, %lu made\n", r, now - seen, want);
			fail(&failures);
		}
		seen = now;
	}
	stop_toggling = 1;
	pthread_join(tog, NULL);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	must(ftpad_unregister_ops(keep), "unregister keep");
	free_ops(keep);
}

/* fork() from inside a callback, while another thread patches. */
__attribute__((noipa)) long spawn(long x)
{
	return x;
}

static __thread pid_t spawned = -1;

static void fork_in_callback(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
			     struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	spawned = fork();
}

static void *callback_forker(void *arg)
{
	int *forks = arg;
	struct ftpad_ops *ops = new_ops();

	ops->func = fork_in_callback;
	must(ftpad_set_filter(ops, "spawn", 1), "forker set_filter");
	must(ftpad_register_ops(ops), "forker register");
	for (int i = 0; i < *forks; i++) {
		int status = 0;
		pid_t pid;

		spawn(i);
		pid = spawned;
		if (pid == 0) {
			static struct ftpad_ops child_ops;
			struct ftpad_ops *mine = init_ops(&child_ops);

			/* A lock left held by a thread that is not here would hang. */
			alarm(20);
			must(ftpad_set_filter(mine, "mix2", 1), "child set_filter");
			must(ftpad_register_ops(mine), "child register");
			call_round(i);
			must(ftpad_unregister_ops(mine), "child unregister");
			_exit(((struct state *)mine->private)->calls == CALLS_PER_ROUND ? 0 : 3);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status)) {
			printf("FAIL child %d: status %#x\n", i, status);
			fail(&failures);
		}
	}
	must(ftpad_unregister_ops(ops), "forker unregister");
	return NULL;
}

static void run_forkcb(int nthreads, int forks)
{
	pthread_t t;

	pthread_create(&t, NULL, callback_forker, &forks);
	run_race(nthreads, forks * 10);
	pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
	int nthreads = argc > 2 ? atoi(argv[2]) : 4, n = argc > 3 ? atoi(argv[3]) : 1000;

	if (argc < 2 || nthreads < 1 || nthreads > 64 || n < 1 || n > 10000) {
		fprintf(stderr, "usage: stress race|signals|fork|forkcb|exact|exactrace THREADS COUNT\n");
		return 2;
	}
	if (!strcmp(argv[1], "fork")) {
		run_fork(nthreads, n);
	} else if (!strcmp(argv[1], "forkcb")) {
		run_forkcb(nthreads, n);
	} else if (!strcmp(argv[1], "exactrace")) {
		rounds = n;
		run_exactrace(nthreads);
	} else if (!strcmp(argv[1], "race") || !strcmp(argv[1], "signals")) {
		if (!strcmp(argv[1], "signals"))
			start_profiling();
		run_race(nthreads, n);
		setitimer(ITIMER_PROF, &(struct itimerval){ 0 }, NULL);
	} else {
		rounds = n;
		run_exact(nthreads);
	}
	if (failures || late_calls || bad_ip || bad_args) {
		const char *name = first_bad_ip ? ftpad_lookup_name(first_bad_ip) : NULL;

		printf("FAIL results=%lu late=%lu ip=%lu args=%lu%s%s\n", failures, late_calls,
		       bad_ip, bad_args, name ? " first bad ip: " : "", name ? name : "");
		return 1;
	}
	if (!strcmp(argv[1], "signals") && !profs) {
		printf("FAIL no SIGPROF arrived\n");
		return 1;
	}
	printf("ok traps=%lu\n", traps());
	return 0;
}
