/* SPDX-License-Identifier: MIT */
/*
 * rt_pads_aarch64.c - libftpad over the hand-made pads of pads_aarch64.S,
 * run under qemu-aarch64: the kernel layout (NOP NOP, the runtime writes
 * the MOV, only while single-threaded) and the full register save.
 * tests/test_runtime_aarch64.py checks what it prints.
 *
 *   rt_pads_aarch64 trace       one ops on add1,k*: ip, parent_ip, arguments
 *   rt_pads_aarch64 bytes       the pad words before, while and after
 *   rt_pads_aarch64 threads     with another thread running: refused, then
 *                               the user layout still works
 *   rt_pads_aarch64 prepared N  MOVs written while single-threaded, then N
 *                               toggles and exact counts with 4 threads
 *   rt_pads_aarch64 regs        FTPAD_OPS_FL_SAVE_REGS reads and changes
 *                               x19-x29 and the flags of regs_probe
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftpad.h"

long add1(long), kadd2(long), kadd3_bti(long), kdouble(long), kcalls(long), regs_probe(void);
long ksum10(long, long, long, long, long, long, long, long, long, long);
void call_regs_probe(unsigned long out[12]);

static void check(long got, long want, const char *what)
{
	if (got != want) {
		printf("FAIL %s = %ld, want %ld\n", what, got, want);
		exit(1);
	}
}

static struct event {
	unsigned long ip, parent_ip, args[10];
} events[64];
static unsigned int nevents;

static void record(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		   struct ftpad_regs *regs)
{
	unsigned int i = __atomic_fetch_add(&nevents, 1, __ATOMIC_RELAXED);

	(void)ops;
	if (i >= 64)
		return;
	events[i].ip = ip;
	events[i].parent_ip = parent_ip;
	for (unsigned int a = 0; a < 10; a++)
		events[i].args[a] = ftpad_regs_get_argument(regs, a);
}

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

static int cmd_trace(void)
{
	struct ftpad_ops ops = { .func = record };
	int n;

	check(ftpad_set_filter(&ops, "add1,k*", 1), 0, "ftpad_set_filter");
	check(ftpad_register_ops(&ops), 0, "ftpad_register_ops");
	n = call_all();
	check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	check(nevents, n, "events");
	for (unsigned int i = 0; i < nevents; i++) {
		const char *name = ftpad_lookup_name(events[i].ip);

		printf("event %s ip=%#lx parent=%#lx args=", name ? name : "?", events[i].ip,
		       events[i].parent_ip);
		for (int a = 0; a < 10; a++)
			printf("%s%ld", a ? "," : "", (long)events[i].args[a]);
		printf("\n");
	}
	nevents = 0;
	call_all();
	printf("after-unregister events=%u\n", nevents);
	return 0;
}

static long (*const padded[])(long) = { kadd2, kadd3_bti, kdouble, add1 };

/* The ops slot and the four words from the entry. */
static void dump_pads(const char *phase)
{
	for (size_t i = 0; i < sizeof(padded) / sizeof(padded[0]); i++) {
		const unsigned int *p = (const unsigned int *)((const char *)padded[i] - 8);

		printf("pad %s %#lx", phase, (unsigned long)padded[i]);
		for (int w = 0; w < 6; w++)
			printf(" %08x", p[w]);
		printf("\n");
	}
}

static int cmd_bytes(void)
{
	struct ftpad_ops ops = { .func = record };

	dump_pads("before");
	check(ftpad_register_ops(&ops), 0, "ftpad_register_ops");
	dump_pads("enabled");
	check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	dump_pads("after");
	return 0;
}

static pthread_barrier_t barrier;

static void *waits(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&barrier);
	return NULL;
}

static int cmd_threads(void)
{
	struct ftpad_ops ops = { .func = record };
	pthread_t t;

	pthread_barrier_init(&barrier, NULL, 2);
	pthread_create(&t, NULL, waits, NULL);
	check(ftpad_set_filter(&ops, "k*", 1), 0, "ftpad_set_filter");
	printf("register k* with a thread: %d\n", ftpad_register_ops(&ops));
	dump_pads("refused");
	call_all();
	printf("events %u\n", nevents);
	check(ftpad_set_filter(&ops, "add1", 1), 0, "ftpad_set_filter add1");
	printf("register add1 with a thread: %d\n", ftpad_register_ops(&ops));
	call_all();
	printf("events %u\n", nevents);
	check(ftpad_unregister_ops(&ops), 0, "ftpad_unregister_ops");
	pthread_barrier_wait(&barrier);
	pthread_join(t, NULL);
	return 0;
}

/* ---- prepared while single-threaded, then toggled under four threads ---- */

static volatile int stop;
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
		return cmd_trace();
	if (argc == 2 && !strcmp(argv[1], "bytes"))
		return cmd_bytes();
	if (argc == 2 && !strcmp(argv[1], "threads"))
		return cmd_threads();
	if (argc == 3 && !strcmp(argv[1], "prepared"))
		return cmd_prepared(atoi(argv[2]));
	if (argc == 2 && !strcmp(argv[1], "regs"))
		return cmd_regs();
	fprintf(stderr, "usage: rt_pads_aarch64 trace | bytes | threads | prepared N | regs\n");
	return 2;
}
