/* SPDX-License-Identifier: MIT */
/*
 * rt_pads_aarch64.c - libftpad over the hand-made pads of pads_aarch64.S,
 * run under qemu-aarch64: the kernel layout (NOP NOP, the runtime writes
 * the MOV, with the other threads stopped) and the full register save.
 * tests/runtime/test_runtime_aarch64.py checks what it prints.
 *
 *   rt_pads_aarch64 trace       one ops on add1,k*: ip, parent_ip, arguments
 *   rt_pads_aarch64 bytes       the pad words before, while and after
 *   rt_pads_aarch64 threads     k* enabled while another thread waits
 *   rt_pads_aarch64 blocked     ... while another thread blocks every
 *                               signal: refused while it runs, enabled while
 *                               it sleeps
 *   rt_pads_aarch64 prepared N  MOVs written while single-threaded, then N
 *                               toggles and exact counts with 4 threads
 *   rt_pads_aarch64 kstress N   4 threads over kf0..kf63 while their MOVs are
 *                               written a few at a time, N more toggles, then
 *                               exact counts between barriers, more MOVs
 *   rt_pads_aarch64 between     a thread stopped right between kpage's two
 *                               NOPs, x9 poisoned: traced with the right
 *                               parent_ip (or, without the fix-up, not)
 *   rt_pads_aarch64 regs        FTPAD_OPS_FL_SAVE_REGS reads and changes
 *                               x19-x29 and the flags of regs_probe
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ftpad.h"
#include "rt_common.h"

long add1(long), kadd2(long), kadd3_bti(long), kdouble(long), kcalls(long), regs_probe(void);
long ksum10(long, long, long, long, long, long, long, long, long, long);
void call_regs_probe(unsigned long out[12]);

/* Every call, results checked: 8 traced calls (kcalls calls kadd2 twice). */
static int call_all(void)
{
	check(add1(1), 2, "add1");
	check(kadd2(1), 3, "kadd2");
	check(kadd3_bti(1), 4, "kadd3_bti");
	check(kdouble(3), 6, "kdouble");
	check(ksum10(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 385, "ksum10");
	check(kcalls(5), 9, "kcalls");
	return 8;
}

static void (*const padded[])(void) = {
	(void (*)(void))kadd2, (void (*)(void))kadd3_bti, (void (*)(void))kdouble,
	(void (*)(void))add1,
};

static void dump_pads(const char *phase)
{
	dump_pad_words(padded, sizeof(padded) / sizeof(padded[0]), phase);
}

static pthread_barrier_t barrier;
static volatile int stop;

static void *waits(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&barrier);
	return NULL;
}

/*
 * Another thread waits in a barrier: with FTPAD_STOP_THREADS=1 its MOVs
 * are written all the same; without, the register is refused, and no
 * handler for the stop signal was ever installed (nothing was sent).
 */
static int cmd_threads(void)
{
	struct ftpad_ops ops = { .func = record };
	struct sigaction stop_action;
	pthread_t t;
	int err;

	pthread_barrier_init(&barrier, NULL, 2);
	pthread_create(&t, NULL, waits, NULL);
	check(ftpad_set_filter(&ops, "k*", 1), 0, "ftpad_set_filter");
	err = ftpad_register_ops(&ops);
	printf("register k* with a thread: %d\n", err);
	dump_pads(err ? "refused" : "enabled");
	call_all();
	printf("events %u\n", nevents);
	sigaction(SIGRTMAX - 4, NULL, &stop_action);
	printf("stop handler installed: %d\n", stop_action.sa_handler != SIG_DFL);
	if (!err)
		check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	pthread_barrier_wait(&barrier);
	pthread_join(t, NULL);
	return 0;
}

static volatile int started;

static void block_every_signal(void)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
}

static void *spins_blocked(void *arg)
{
	(void)arg;
	block_every_signal();
	started = 1;
	while (!stop)
		;
	return NULL;
}

static void *sleeps_blocked(void *arg)
{
	(void)arg;
	block_every_signal();
	started = 1;
	pthread_barrier_wait(&barrier);
	return NULL;
}

/*
 * A thread that blocks every signal cannot be stopped: while it runs, the
 * NOP NOP pads are refused and nothing is written; while it sleeps in the
 * kernel, away from the pads, they are enabled.
 */
static int cmd_blocked(void)
{
	struct ftpad_ops ops = { .func = record }, user = { .func = record };
	pthread_t t;

	pthread_create(&t, NULL, spins_blocked, NULL);
	while (!started)
		;
	check(ftpad_set_filter(&ops, "k*", 1), 0, "ftpad_set_filter");
	printf("register k* with a spinning thread that blocks every signal: %d\n",
	       ftpad_register_ops(&ops));
	dump_pads("refused");
	call_all();
	printf("events %u\n", nevents);
	/* The user layout needs no MOV, so nothing to stop the threads for. */
	check(ftpad_set_filter(&user, "add1", 1), 0, "ftpad_set_filter add1");
	printf("register add1 with that thread: %d\n", ftpad_register_ops(&user));
	call_all();
	printf("events %u\n", nevents);
	check(ftpad_unregister_ops(&user), 0, "ftpad_unregister_ops");
	stop = 1;
	pthread_join(t, NULL);

	started = 0;
	pthread_barrier_init(&barrier, NULL, 2);
	pthread_create(&t, NULL, sleeps_blocked, NULL);
	while (!started)
		;
	printf("register k* with a sleeping thread that blocks every signal: %d\n",
	       ftpad_register_ops(&ops));
	nevents = 0;
	call_all();
	printf("events %u\n", nevents);
	check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	pthread_barrier_wait(&barrier);
	pthread_join(t, NULL);
	return 0;
}

/* ---- prepared while single-threaded, then toggled under four threads ---- */

static unsigned long failures;
static pthread_barrier_t stopped, start, done;
static int rounds;

static void hammer_once(long a)
{
	if (kadd2(a) != a + 2 || kadd3_bti(a) != a + 3 || kdouble(a) != 2 * a ||
	    kcalls(a) != a + 4 || ksum10(a, 1, 1, 1, 1, 1, 1, 1, 1, 1) != a + 54)
		__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
}

static void *hammer(void *arg)
{
	long a = (long)(intptr_t)arg * 1000;

	while (!stop)
		hammer_once(a++);
	pthread_barrier_wait(&stopped);
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&start);
		for (int i = 0; i < 200; i++)
			hammer_once(a++);
		pthread_barrier_wait(&done);
	}
	return NULL;
}

static unsigned long counted;

static void count(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		  struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	__atomic_fetch_add(&counted, 1, __ATOMIC_RELAXED);
}

static int cmd_prepared(int toggles)
{
	struct ftpad_ops ops = { .func = count };
	pthread_t t[4];

	rounds = 20;
	pthread_barrier_init(&stopped, NULL, 5);
	pthread_barrier_init(&start, NULL, 5);
	pthread_barrier_init(&done, NULL, 5);
	check(ftpad_set_filter(&ops, "k*", 1), 0, "ftpad_set_filter");
	/* While single-threaded: the MOVs are written now, and kept. */
	check(ftpad_register_ops(&ops), 0, "first register");
	check(ftpad_unregister_ops(&ops), 0, "first unregister");
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, hammer, (void *)(intptr_t)i);
	for (int i = 0; i < toggles; i++) {
		check(ftpad_set_filter(&ops, i % 2 ? "k*" : "kadd*,kcalls", 1), 0, "refilter");
		check(ftpad_register_ops(&ops), 0, "register");
		check(ftpad_unregister_ops(&ops), 0, "unregister");
	}
	stop = 1;
	pthread_barrier_wait(&stopped);
	check(ftpad_set_filter(&ops, "k*", 1), 0, "ftpad_set_filter");
	for (int r = 0; r < rounds; r++) {
		counted = 0;
		check(ftpad_register_ops(&ops), 0, "register");
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		check(ftpad_unregister_ops(&ops), 0, "unregister");
		/* kcalls calls kadd2 twice: 7 traced calls per hammer_once. */
		check(counted, 4 * 200 * 7, "calls counted in a round");
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	check(failures, 0, "results");
	printf("prepared ok %d\n", toggles);
	return 0;
}

/* ---- kf0..kf63: MOVs written a few at a time under four threads ---- */

#define NKF 64
extern long (*const kf_table[NKF])(long);
extern const char __executable_start[], etext[];

/* libftpad's debug lines, counted: threads stopped, and found between. */
static unsigned long stops, stood;

static int count_stops(enum ftpad_log_level level, const char *fmt, va_list ap)
{
	char line[512];
	const char *stopped;
	unsigned long movs, fixed;

	vsnprintf(line, sizeof(line), fmt, ap);
	stopped = strstr(line, " written with the other threads stopped; ");
	if (sscanf(line, "ftpad: %lu kernel-ABI pad MOV", &movs) == 1 && stopped &&
	    sscanf(stopped, " written with the other threads stopped; %lu", &fixed) == 1) {
		stops++;
		stood += fixed;
	} else if (level == FTPAD_WARN) {
		fputs(line, stderr);
	}
	return 0;
}

static unsigned long kf_bad;

static bool is_kf(unsigned long ip)
{
	for (int i = 0; i < NKF; i++)
		if (ip == (unsigned long)kf_table[i])
			return true;
	return false;
}

/* Every call: a kf function, called from right behind a BLR in our code. */
static void kf_count(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		     struct ftpad_regs *regs)
{
	(void)ops, (void)regs;
	if (!is_kf(ip) || parent_ip < (unsigned long)__executable_start + 4 ||
	    parent_ip >= (unsigned long)etext ||
	    (*(const uint32_t *)(parent_ip - 4) & 0xfffffc1fu) != 0xd63f0000u)
		__atomic_fetch_add(&kf_bad, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&counted, 1, __ATOMIC_RELAXED);
}

static void kf_once(long a)
{
	for (int i = 0; i < NKF; i++)
		if (kf_table[i](a) != a + i)
			__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
}

#define KF_WINDOW 20 /* passes over kf0..kf63 per thread between two barriers */

/* The four functions whose MOVs are being written, which the threads
 * call most while they run free. */
static volatile int hot_group;

static void kf_hot(long a)
{
	int base = 4 * hot_group;

	for (int i = base; i < base + 4; i++)
		if (kf_table[i](a) != a + i)
			__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);
}

static void *kf_hammer(void *arg)
{
	long a = (long)(intptr_t)arg * 100000;

	while (!stop) {
		for (int i = 0; i < 16; i++)
			kf_hot(a++);
		kf_once(a++);
	}
	pthread_barrier_wait(&stopped);
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_wait(&start);
		for (int i = 0; i < KF_WINDOW; i++)
			kf_once(a++);
		pthread_barrier_wait(&done);
	}
	return NULL;
}

/* "kfA,kfB,...": the functions lo..lo+n-1 and, every step-th, of 0..below-1. */
static size_t kf_filter(char *buf, size_t size, int lo, int n, int below, int step)
{
	size_t len = 0, count = 0;

	buf[0] = 0;
	for (int i = 0; i < NKF; i++) {
		if (!((i >= lo && i < lo + n) || (i < below && step && i % step == 0)))
			continue;
		len += snprintf(buf + len, size - len, "%skf%d", len ? "," : "", i);
		count++;
	}
	return count;
}

/*
 * Four threads call kf0..kf63 in a loop.  First they run free while each
 * round enables four more of kf0..kf31, whose MOVs are written with the
 * threads stopped wherever they were, with some already prepared, and
 * disables them again; then `toggles` rounds over the prepared ones.
 * Then eight rounds between barriers, each enabling four more of
 * kf32..kf63 (the threads stopped in the barrier wait) and some of the
 * first half: every call of an enabled function counted exactly, from the
 * right place, every result right.
 */
static int cmd_kstress(int toggles)
{
	struct ftpad_ops ops = { .func = kf_count };
	pthread_t t[4];
	char filter[1024];

	ftpad_set_print(count_stops);
	rounds = 8;
	pthread_barrier_init(&stopped, NULL, 5);
	pthread_barrier_init(&start, NULL, 5);
	pthread_barrier_init(&done, NULL, 5);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, kf_hammer, (void *)(intptr_t)i);
	for (int r = 0; r < 8 + toggles; r++) {
		hot_group = r % 8;
		if (r < 8)
			kf_filter(filter, sizeof(filter), 4 * r, 4, 4 * r, 3);
		else
			kf_filter(filter, sizeof(filter), 0, 0, 32, 1 + r % 5);
		check(ftpad_set_filter(&ops, filter, 1), 0, "refilter");
		check(ftpad_register_ops(&ops), 0, "register");
		check(ftpad_unregister_ops(&ops), 0, "unregister");
	}
	stop = 1;
	pthread_barrier_wait(&stopped);
	for (int r = 0; r < rounds; r++) {
		size_t n = kf_filter(filter, sizeof(filter), 32 + 4 * r, 4, 32, 7);

		check(ftpad_set_filter(&ops, filter, 1), 0, "refilter");
		counted = 0;
		check(ftpad_register_ops(&ops), 0, "register");
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		check(ftpad_unregister_ops(&ops), 0, "unregister");
		check(counted, 4 * KF_WINDOW * n, "calls counted in a round");
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	check(failures, 0, "results");
	check(kf_bad, 0, "callbacks with a wrong ip or parent_ip");
	printf("kstress ok toggles=%d stops=%lu stood=%lu\n", toggles, stops, stood);
	return 0;
}

/* ---- one thread stopped right between kpage's two NOPs ---- */

long kpage(long);
void spin_victim(volatile int *stop, volatile long *result);
extern const char spin_victim_ret[];

static volatile long victim_result;
static volatile int victim_traced;

static void print_event(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
			struct ftpad_regs *regs)
{
	(void)ops, (void)regs;
	/* Now: without the fix-up this thread dies when kpage returns. */
	if (!victim_traced)
		dprintf(1, "event ip=%#lx parent=%#lx\n", ip, parent_ip);
	victim_traced = 1;
}

static void *victim(void *arg)
{
	(void)arg;
	spin_victim(&stop, &victim_result);
	return NULL;
}

/* One try, in a child process (kpage is a NOP NOP pad there, never
 * enabled): exit 0 when the thread was found between the NOPs, 3 when
 * the signal found it elsewhere. */
static int between_once(void)
{
	struct ftpad_ops ops = { .func = print_event };
	pthread_t t;
	int err;

	ftpad_set_print(count_stops);
	pthread_create(&t, NULL, victim, NULL);
	while (victim_result != 42)
		;
	check(ftpad_set_filter(&ops, "kpage", 1), 0, "ftpad_set_filter");
	err = ftpad_register_ops(&ops);
	if (err) {
		dprintf(1, "register: %d\n", err);
		return 1;
	}
	while (!victim_traced)
		;
	stop = 1;
	pthread_join(t, NULL);
	check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	dprintf(1, "stops=%lu stood=%lu result=%ld\n", stops, stood, victim_result);
	return stops == 1 && stood == 1 && victim_result == 42 ? 0 : 3;
}

static int cmd_between(void)
{
	for (int try = 1; try <= 20; try++) {
		pid_t pid;
		int status;

		fflush(stdout);
		pid = fork();
		if (pid == 0)
			_exit(between_once());
		if (pid < 0 || waitpid(pid, &status, 0) != pid)
			return 1;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
			continue;
		if (WIFEXITED(status)) {
			printf("between exit %d after %d tries\n", WEXITSTATUS(status), try);
			return WEXITSTATUS(status);
		}
		printf("between died of signal %d\n", WTERMSIG(status));
		return 1;
	}
	printf("between: never found between the NOPs\n");
	return 1;
}

/* ---- FTPAD_OPS_FL_SAVE_REGS ---- */

static int saw_full, saw_partial;

static void probe(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		  struct ftpad_regs *regs)
{
	struct ftpad_pt_regs *pt = ftpad_get_pt_regs(regs);

	(void)ops;
	if (!pt) {
		saw_partial++;
		return;
	}
	saw_full++;
	static const unsigned long set[10] = { 0x1919, 0x2020, 0x2121, 0x2222, 0x2323,
						0x2424, 0x2525, 0x2626, 0x2727, 0x2828 };

	for (int r = 19; r <= 28; r++)
		check(pt->regs[r], set[r - 19], "x19-x28 as set");
	check(!!(pt->pstate & 0x20000000), 1, "carry set");
	check(pt->pc, ip + 8, "pc: after the pad");
	check(pt->regs[30], parent_ip, "x30: the caller's return address");
	check(pt->regs[9], parent_ip, "x9: the MOV's copy");
	pt->regs[19] = 0x9191;
	pt->regs[28] = 0x8282;
	pt->regs[29] = 0x2929;
	pt->pstate &= ~0x20000000ul;
}

static int cmd_regs(void)
{
	struct ftpad_ops full = { .func = probe, .flags = FTPAD_OPS_FL_SAVE_REGS };
	struct ftpad_ops partial = { .func = probe };
	unsigned long out[12];

	call_regs_probe(out);
	check(out[10], 1, "untraced: carry");
	check(ftpad_set_filter(&full, "regs_probe", 1), 0, "ftpad_set_filter");
	check(ftpad_register_ops(&full), 0, "ftpad_register_ops");
	call_regs_probe(out);
	check(saw_full, 1, "full callbacks");
	check(ftpad_unregister_ops(&full), 0, "ftpad_unregister_ops");
	printf("regs x19=%#lx x20=%#lx x27=%#lx x28=%#lx x0=%lu x29=%#lx\n", out[0], out[1],
	       out[8], out[9], out[10], out[11]);
	check(ftpad_set_filter(&partial, "regs_probe", 1), 0, "ftpad_set_filter");
	check(ftpad_register_ops(&partial), 0, "ftpad_register_ops");
	call_regs_probe(out);
	check(ftpad_unregister_ops(&partial), 0, "ftpad_unregister_ops");
	printf("partial %d x0=%lu x19=%#lx\n", saw_partial, out[10], out[0]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "trace"))
		return trace_all("add1,k*", call_all);
	if (argc == 2 && !strcmp(argv[1], "bytes"))
		return dump_toggled(dump_pads);
	if (argc == 2 && !strcmp(argv[1], "threads"))
		return cmd_threads();
	if (argc == 2 && !strcmp(argv[1], "blocked"))
		return cmd_blocked();
	if (argc == 3 && !strcmp(argv[1], "kstress"))
		return cmd_kstress(atoi(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "between"))
		return cmd_between();
	if (argc == 3 && !strcmp(argv[1], "prepared"))
		return cmd_prepared(atoi(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "regs"))
		return cmd_regs();
	fprintf(stderr, "usage: rt_pads_aarch64 trace | bytes | threads | blocked | prepared N | "
		"kstress N | between | regs\n");
	return 2;
}
