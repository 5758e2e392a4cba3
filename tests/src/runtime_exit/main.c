// SPDX-License-Identifier: MIT
/*
 * main.c - exit callbacks on the hand-written exit sites of <arch>.S
 * (tests/runtime/test_runtime_exit.py checks what this prints).
 *   exit    every return path, its value; a tail exit; unregistering
 *   threads entry and exit callbacks pairing up per thread while another
 *           thread registers and unregisters an exit-only ops
 *   v1      (built with -DV1ONLY) functions with entries only
 *   v3      (built with -DV3) a table with a newer record
 */
#define _GNU_SOURCE
#include <complex.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ftpad.h>

struct pair {
	long a, b;
};
int ret_int(int x);
double ret_double(double x);
long double ret_ldouble(const long double *p);
long double _Complex ret_cld(const long double *re, const long double *im);
struct pair ret_pair(long a, long b);
void tail_caller(long a, long b, long c, long d, long e, long f, double d0, double d1,
		 double d2, double d3, double d4, double d5, double d6, double d7);
void tail_target(void);
int noexit_fn(int x);
void clobber(void);
extern char text_start[], text_end[];
extern unsigned long tail_seen[17];

static const long double ld_re = 1.0L / 3, ld_im = -2.0L / 7;

/* Per thread: the parent_ips of the entries not exited yet. */
static __thread unsigned long stack[64];
static __thread int depth;
static __thread unsigned long entries, exits, unpaired;

static void on_entry(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		     struct ftpad_regs *regs)
{
	(void)ip, (void)ops, (void)regs;
	entries++;
	if (depth < 64)
		stack[depth] = parent_ip;
	depth++;
	clobber();
}

/* Whether this exit pairs with the innermost entry: same parent_ip. */
static bool pair_exit(unsigned long parent_ip)
{
	exits++;
	if (depth <= 0 || stack[--depth] != parent_ip) {
		unpaired++;
		return false;
	}
	return true;
}

static bool override;

static void describe(const char *name, struct ftpad_regs *regs, char *out, size_t size)
{
	unsigned long v = ftpad_regs_get_return_value(regs);
	const void *vec0 = ftpad_regs_return_reg(regs, FTPAD_RET_VEC0);
	double d;

	if (!strcmp(name, "ret_int")) {
		snprintf(out, size, "%d", (int)v);
		if (override)
			ftpad_regs_set_return_value(regs, 77);
	} else if (!strcmp(name, "ret_double")) {
		memcpy(&d, vec0, sizeof(d));
		snprintf(out, size, "%g", d);
	} else if (!strcmp(name, "ret_ldouble") || !strcmp(name, "ret_cld")) {
#if defined(__x86_64__)
		const void *re = ftpad_regs_return_reg(regs, FTPAD_RET_X87_0);
		const void *im = ftpad_regs_return_reg(regs, FTPAD_RET_X87_1);
		size_t n = 10;
#else
		const void *re = vec0, *im = ftpad_regs_return_reg(regs, FTPAD_RET_VEC1);
		size_t n = 16;
#endif
		bool cld = !strcmp(name, "ret_cld");
		bool ok = re && !memcmp(re, &ld_re, n) && (!cld || (im && !memcmp(im, &ld_im, n)));

		snprintf(out, size, "%s", ok ? "exact" : "wrong");
	} else if (!strcmp(name, "ret_pair")) {
		snprintf(out, size, "%ld %ld", (long)v,
			 (long)*(unsigned long *)ftpad_regs_return_reg(regs, FTPAD_RET_INT1));
	} else {
		snprintf(out, size, "-");
	}
}

static void on_exit_cb(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		       struct ftpad_regs *regs)
{
	const char *name = ftpad_lookup_name(ip);
	char what[64];

	(void)ops;
	describe(name ? name : "?", regs, what, sizeof(what));
	printf("exit %s %s %s set_ip=%d\n", name ? name : "?", what,
	       pair_exit(parent_ip) ? "paired" : "unpaired", ftpad_regs_set_ip(regs, ip));
	clobber();
}

static struct ftpad_ops ops = { .func = on_entry, .exit_func = on_exit_cb };

static void call_all(void)
{
	long double _Complex c;
	long double ld;
	struct pair p;
	double d;

	printf("ret_int(-5)=%d\n", ret_int(-5));
	printf("ret_int(0)=%d\n", ret_int(0));
	printf("ret_int(21)=%d\n", ret_int(21));
	d = ret_double(1.25);
	printf("ret_double(1.25)=%g\n", d);
	ld = ret_ldouble(&ld_re);
	printf("ret_ldouble=%s\n", ld == ld_re ? "exact" : "wrong");
	c = ret_cld(&ld_re, &ld_im);
	printf("ret_cld=%s\n", creall(c) == ld_re && cimagl(c) == ld_im ? "exact" : "wrong");
	p = ret_pair(-3, 1L << 40);
	printf("ret_pair=%ld %ld\n", p.a, p.b);
	memset(tail_seen, 0, sizeof(tail_seen));
	tail_caller(1, 2, 3, 4, 5, 6, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5);
	printf("tail_target saw:");
	for (int i = 0; i < 9; i++)
		printf(" %#lx", tail_seen[i] == (unsigned long)tail_target ? 0xfffful : tail_seen[i]);
	for (int i = 9; i < 17; i++) {
		memcpy(&d, &tail_seen[i], sizeof(d));
		printf(" %g", d);
	}
	printf("\n");
	printf("noexit_fn(1)=%d\n", noexit_fn(1));
}

int main(int argc, char **argv);

static void stats(void)
{
	struct ftpad_stats st = { .sz = sizeof(st) };

	ftpad_get_stats(&st);
	printf("stats: sites=%lu enabled=%lu exit_sites=%lu exits_enabled=%lu entries_only=%lu\n",
	       st.sites, st.enabled, st.exit_sites, st.exits_enabled, st.entries_only);
	printf("entries_only: ret_int=%d noexit_fn=%d main=%d\n",
	       ftpad_lookup_entries_only((unsigned long)ret_int),
	       ftpad_lookup_entries_only((unsigned long)noexit_fn),
	       ftpad_lookup_entries_only((unsigned long)main));
}

static int mode_exit(void)
{
	size_t len = text_end - text_start;
	char *before = malloc(len), *during = malloc(len);
	int err;

	memcpy(before, text_start, len);
	err = ftpad_register_ops(&ops);
	printf("register=%d\n", err);
	memcpy(during, text_start, len);
	stats();
	call_all();
	override = true;
	printf("override: ret_int(3)=%d\n", ret_int(3));
	override = false;
	printf("depth=%d entries=%lu exits=%lu unpaired=%lu\n", depth, entries, exits, unpaired);
	printf("unregister=%d\n", ftpad_unregister_ops(&ops));
	printf("text while registered: %s\n", memcmp(before, during, len) ? "changed" : "same");
	printf("text after unregister: %s\n", memcmp(before, text_start, len) ? "changed" : "same");
	stats();
	/* An ops with an exit callback only. */
	ops.func = NULL;
	entries = exits = 0;
	printf("exit only: register=%d\n", ftpad_register_ops(&ops));
	ret_int(2);
	ftpad_unregister_ops(&ops);
	printf("exit only: entries=%lu exits=%lu\n", entries, exits);
	return 0;
}

/* threads: workers call, one thread toggles an exit-only ops. */
enum { WORKERS = 3, CALLS = 20000, TOGGLES = 40 };
static unsigned long toggled_exits;
static int stop;

static void count_exit(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *o,
		       struct ftpad_regs *regs)
{
	(void)parent_ip, (void)o, (void)regs;
	if (ip == (unsigned long)ret_int)
		__atomic_fetch_add(&toggled_exits, 1, __ATOMIC_RELAXED);
}

static void quiet_exit(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *o,
		       struct ftpad_regs *regs)
{
	(void)ip, (void)o, (void)regs;
	pair_exit(parent_ip);
	clobber();
}

static struct ftpad_ops pairs = { .func = on_entry, .exit_func = quiet_exit };
static struct ftpad_ops toggled = { .exit_func = count_exit };

static void *worker(void *arg)
{
	unsigned long *out = arg;
	long wrong = 0;

	for (int i = 0; i < CALLS; i++) {
		int x = i % 3 - 1;
		struct pair p = ret_pair(i, -i);

		wrong += ret_int(x) != (x < 0 ? -1 : 2 * x);
		wrong += p.a != i || p.b != -i;
	}
	out[0] = entries, out[1] = exits, out[2] = unpaired, out[3] = depth, out[4] = wrong;
	return NULL;
}

static void *toggler(void *arg)
{
	int *errors = arg;

	for (int i = 0; i < TOGGLES && !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
		*errors += ftpad_register_ops(&toggled) != 0;
		*errors += ftpad_unregister_ops(&toggled) != 0;
	}
	return NULL;
}

static int mode_threads(void)
{
	unsigned long out[WORKERS][5];
	pthread_t w[WORKERS], t;
	int errors = 0;

	printf("register=%d\n", ftpad_register_ops(&pairs));
	pthread_create(&t, NULL, toggler, &errors);
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&w[i], NULL, worker, out[i]);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(w[i], NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	for (int i = 0; i < WORKERS; i++)
		printf("worker %d: calls=%d entries=%lu exits=%lu unpaired=%lu depth=%lu wrong=%lu\n",
		       i, 2 * CALLS, out[i][0], out[i][1], out[i][2], out[i][3], out[i][4]);
	printf("toggler errors=%d\n", errors);
	printf("unregister=%d\n", ftpad_unregister_ops(&pairs));
	return 0;
}

static int mode_v(void)
{
	printf("register=%d\n", ftpad_register_ops(&ops));
	stats();
	printf("ret_int(21)=%d\n", ret_int(21));
	printf("entries=%lu exits=%lu\n", entries, exits);
	printf("unregister=%d\n", ftpad_unregister_ops(&ops));
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "exit";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "exit"))
		return mode_exit();
	if (!strcmp(mode, "threads"))
		return mode_threads();
	return mode_v();
}
