/* SPDX-License-Identifier: MIT */
/*
 * rt_main.c - drives libftpad over the hand-made pads of pads_x86_64.S,
 * linked into this program (t_*) and into a shared library (so_*).  It
 * prints what it saw; tests/runtime/test_runtime_x86_64.py checks it against the
 * ELF files.
 *
 *   rt_main trace GLOBS [GLOBS2]  one ops per GLOBS ("-": no filter), calls
 *                                 every function, prints the callbacks
 *   rt_main bytes                 pad bytes before, during and after tracing
 *   rt_main regs                  a callback clobbering every register, on
 *                                 every trampoline path
 *   rt_main saveregs              FTPAD_OPS_FL_SAVE_REGS: every register
 *   rt_main idle                  registers nothing
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftpad.h"

#define FUNCS(X, P) X(P##add1) X(P##add1_endbr) X(P##noslot) X(P##noslot_endbr) \
	X(P##sum8) X(P##calls_add1) X(P##echo_regs) X(P##echo_regs_noslot) X(P##regs_probe) \
	X(P##bad)
#define DECLARE(P) \
	long P##add1(long), P##add1_endbr(long), P##noslot(long), P##noslot_endbr(long); \
	long P##sum8(long, long, long, long, long, long, long, long), P##calls_add1(long); \
	void P##echo_regs(void *), P##echo_regs_noslot(void *), P##check_regs(void *, void *); \
	void P##bad(void), P##call_regs_probe(unsigned long *); \
	long P##regs_probe(void); \
	extern const unsigned char P##regs_expected[184];
DECLARE(t_)
DECLARE(so_)

static const struct func {
	const char *name;
	void *addr;
} funcs[] = {
#define ENTRY(f) { #f, (void *)f },
	FUNCS(ENTRY, t_) FUNCS(ENTRY, so_)
};

#define NFUNCS (sizeof(funcs) / sizeof(funcs[0]))

static const char *func_name(unsigned long ip)
{
	for (size_t i = 0; i < NFUNCS; i++)
		if ((unsigned long)funcs[i].addr == ip)
			return funcs[i].name;
	return "?";
}

static struct event {
	struct ftpad_ops *ops;
	unsigned long ip, parent_ip, args[8];
} events[256];
static int nevents;

static void record(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		   struct ftpad_regs *regs)
{
	struct event *e = &events[nevents < 256 ? nevents++ : 255];

	e->ops = ops;
	e->ip = ip;
	e->parent_ip = parent_ip;
	for (unsigned i = 0; i < 8; i++)
		e->args[i] = ftpad_regs_get_argument(regs, i);
}

static void check(long got, long want, const char *what)
{
	if (got != want) {
		printf("FAIL %s = %ld, want %ld\n", what, got, want);
		exit(1);
	}
}

static void call_all(void)
{
	check(t_add1(1), 2, "t_add1");
	check(t_add1_endbr(1), 3, "t_add1_endbr");
	check(t_noslot(3), 6, "t_noslot");
	check(t_noslot_endbr(3), 6, "t_noslot_endbr");
	check(t_sum8(1, 2, 3, 4, 5, 6, 7, 8), 36, "t_sum8");
	check(t_calls_add1(5), 7, "t_calls_add1");
	check(so_add1(10), 11, "so_add1");
	check(so_noslot(10), 20, "so_noslot");
	check(so_sum8(10, 20, 30, 40, 50, 60, 70, 80), 360, "so_sum8");
}

static void print_stats(const char *when)
{
	struct ftpad_stats st = { .sz = sizeof(st) };

	check(ftpad_get_stats(&st), 0, "ftpad_get_stats");
	printf("stats %s modules=%lu sites=%lu enabled=%lu\n", when, st.modules, st.sites,
	       st.enabled);
}

static void print_bases(void)
{
	Dl_info exe, lib;

	dladdr(t_add1, &exe);
	dladdr(so_add1, &lib);
	printf("base exe=%#lx lib=%#lx\n", (unsigned long)exe.dli_fbase,
	       (unsigned long)lib.dli_fbase);
}

/* Anonymous (copied-on-write) memory in the program's and library's code. */
static void print_text_cow(void)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512], path[400] = "";
	int exec = 0;

	while (f && fgets(line, sizeof(line), f)) {
		char perms[8];
		unsigned long kb;

		if (sscanf(line, "%*x-%*x %7s %*s %*s %*s %399s", perms, path) == 2)
			exec = perms[2] == 'x' && (strstr(path, "rt_") || strstr(path, "libpads"));
		else if (exec && sscanf(line, "Anonymous: %lu kB", &kb) == 1)
			printf("cow %s %lu\n", path, kb);
	}
	if (f)
		fclose(f);
}

static struct ftpad_ops ops[2] = { { .func = record }, { .func = record } };

static int cmd_trace(int argc, char **argv)
{
	int n = argc > 3 ? 2 : 1;

	print_bases();
	print_stats("before");
	for (int i = 0; i < n; i++) {
		const char *globs = argv[2 + i];

		if (strcmp(globs, "-"))
			check(ftpad_set_filter(&ops[i], globs, 1), 0, "ftpad_set_filter");
		check(ftpad_register_ops(&ops[i]), 0, "ftpad_register_ops");
		check(!!(ops[i].flags & FTPAD_OPS_FL_ENABLED), 1, "FTPAD_OPS_FL_ENABLED");
	}
	check(ftpad_register_ops(&ops[0]), -16 /* -EBUSY */, "second register");
	print_stats("enabled");
	call_all();
	for (int i = 0; i < nevents; i++) {
		struct event *e = &events[i];
		const char *lookup = ftpad_lookup_name(e->ip);
		char caller[256];

		ftpad_lookup_symbol(e->parent_ip, caller, sizeof(caller));
		printf("event ops=%d func=%s lookup=%s ip=%#lx parent=%#lx caller=%s args=",
		       (int)(e->ops - ops), func_name(e->ip), lookup ? lookup : "(null)", e->ip,
		       e->parent_ip, caller);
		for (int a = 0; a < 8; a++)
			printf("%s%ld", a ? "," : "", (long)e->args[a]);
		printf("\n");
	}
	for (int i = 0; i < n; i++)
		check(ftpad_unregister_ops(&ops[i]), 0, "ftpad_unregister_ops");
	check(ftpad_unregister_ops(&ops[0]), -2 /* -ENOENT */, "second unregister");
	nevents = 0;
	call_all();
	printf("after-unregister events=%d\n", nevents);
	print_stats("after");
	print_text_cow();
	return 0;
}

static void dump_pads(const char *phase)
{
	for (size_t i = 0; i < NFUNCS; i++) {
		const unsigned char *p = (const unsigned char *)funcs[i].addr - 16;

		printf("pad %s %s ", funcs[i].name, phase);
		for (int b = 0; b < 32; b++)
			printf("%02x", p[b]);
		printf("\n");
	}
}

static int cmd_bytes(void)
{
	print_bases();
	dump_pads("before");
	check(ftpad_register_ops(&ops[0]), 0, "ftpad_register_ops");
	dump_pads("enabled");
	check(ftpad_unregister_ops(&ops[0]), 0, "ftpad_unregister_ops");
	dump_pads("after");
	return 0;
}

static int clobbered;

/* Destroys every call-clobbered register the trampoline must give back. */
static void clobber(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *o,
		    struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)o, (void)regs;
	clobbered++;
	__asm__ volatile("mov $-1, %%rax\n\tmov $-1, %%rcx\n\tmov $-1, %%rdx\n\t"
			 "mov $-1, %%rsi\n\tmov $-1, %%rdi\n\tmov $-1, %%r8\n\t"
			 "mov $-1, %%r9\n\tmov $-1, %%r10\n\tmov $-1, %%r11\n\t"
			 "pcmpeqd %%xmm0, %%xmm0\n\tpcmpeqd %%xmm1, %%xmm1\n\t"
			 "pcmpeqd %%xmm2, %%xmm2\n\tpcmpeqd %%xmm3, %%xmm3\n\t"
			 "pcmpeqd %%xmm4, %%xmm4\n\tpcmpeqd %%xmm5, %%xmm5\n\t"
			 "pcmpeqd %%xmm6, %%xmm6\n\tpcmpeqd %%xmm7, %%xmm7"
			 ::: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
			 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");
}

/* Every trampoline path: the fast one (ops slot), C (no slot), and the
 * full save, each in the program and in the library. */
static int cmd_regs(void)
{
	static const unsigned long flags[] = { 0, FTPAD_OPS_FL_SAVE_REGS };
	struct {
		void (*check)(void *, void *);
		void (*echo)(void *);
		const unsigned char *expected;
	} const cases[] = {
		{ t_check_regs, t_echo_regs, t_regs_expected },
		{ t_check_regs, t_echo_regs_noslot, t_regs_expected },
		{ so_check_regs, so_echo_regs, so_regs_expected },
		{ so_check_regs, so_echo_regs_noslot, so_regs_expected },
	};
	unsigned char out[184];
	int n = 0;

	for (size_t f = 0; f < 2; f++) {
		struct ftpad_ops o = { .func = clobber, .flags = flags[f] };

		check(ftpad_set_filter(&o, "*echo_regs*", 1), 0, "ftpad_set_filter");
		check(ftpad_register_ops(&o), 0, "ftpad_register_ops");
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++, n++) {
			memset(out, 0, sizeof(out));
			cases[c].check(out, (void *)cases[c].echo);
			check(memcmp(out, cases[c].expected, sizeof(out)), 0, func_name((unsigned long)cases[c].echo));
		}
		check(ftpad_unregister_ops(&o), 0, "ftpad_unregister_ops");
	}
	check(clobbered, n, "callbacks");
	printf("regs ok %d\n", n);
	return 0;
}

static int full_seen, partial_seen;

/* Reads what call_regs_probe set, and changes some of it. */
static void probe(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *o,
		  struct ftpad_regs *regs)
{
	struct ftpad_pt_regs *pt = ftpad_get_pt_regs(regs);

	(void)o;
	if (!pt) {
		partial_seen++;
		return;
	}
	full_seen++;
	check(pt->rbx == 0x0b0b0b0b0b0b0b0bul && pt->rbp == 0x0c0c0c0c0c0c0c0cul &&
	      pt->r12 == 0x1212121212121212ul && pt->r15 == 0x1515151515151515ul, 1,
	      "rbx, rbp, r12, r15 as set");
	check(pt->eflags & 1, 1, "carry set");
	check(pt->rip, ip + 5, "rip: after the site");
	check(*(unsigned long *)pt->rsp, parent_ip, "rsp: points at parent_ip");
	pt->rbx = 0xb0;
	pt->rbp = 0xc0;
	pt->r13 = 0x31;
	pt->eflags &= ~1ul;
}

static int cmd_saveregs(void)
{
	struct ftpad_ops full = { .func = probe, .flags = FTPAD_OPS_FL_SAVE_REGS };
	struct ftpad_ops partial = { .func = probe };
	unsigned long out[7];

	t_call_regs_probe(out);
	check(out[6], 1, "untraced: carry");
	check(ftpad_set_filter(&full, "*regs_probe", 1), 0, "ftpad_set_filter");
	check(ftpad_register_ops(&full), 0, "ftpad_register_ops");
	t_call_regs_probe(out);
	printf("t_ rbx=%#lx rbp=%#lx r12=%#lx r13=%#lx r15=%#lx rax=%lu\n", out[0], out[1], out[2],
	       out[3], out[5], out[6]);
	so_call_regs_probe(out);
	printf("so_ rbx=%#lx rbp=%#lx r12=%#lx r13=%#lx r15=%#lx rax=%lu\n", out[0], out[1],
	       out[2], out[3], out[5], out[6]);
	check(ftpad_unregister_ops(&full), 0, "ftpad_unregister_ops");
	check(ftpad_set_filter(&partial, "*regs_probe", 1), 0, "ftpad_set_filter");
	check(ftpad_register_ops(&partial), 0, "ftpad_register_ops");
	t_call_regs_probe(out);
	check(ftpad_unregister_ops(&partial), 0, "ftpad_unregister_ops");
	/* No rax: without the full save the flags are not kept (the ABI does
	 * not pass anything in them to a function). */
	printf("full=%d partial=%d rbx=%#lx\n", full_seen, partial_seen, out[0]);
	return 0;
}

static int cmd_idle(void)
{
	print_stats("idle");
	dump_pads("idle");
	print_text_cow();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "trace"))
		return cmd_trace(argc, argv);
	if (argc == 2 && !strcmp(argv[1], "bytes"))
		return cmd_bytes();
	if (argc == 2 && !strcmp(argv[1], "regs"))
		return cmd_regs();
	if (argc == 2 && !strcmp(argv[1], "saveregs"))
		return cmd_saveregs();
	if (argc == 2 && !strcmp(argv[1], "idle"))
		return cmd_idle();
	fprintf(stderr, "usage: rt_main trace GLOBS [GLOBS2] | bytes | regs | saveregs | idle\n");
	return 2;
}
