/* SPDX-License-Identifier: MIT */
/*
 * rt_main.c - drives libftpad over the hand-made pads of pads_x86_64.S,
 * linked into this program (t_*) and into a shared library (so_*).  It
 * prints what it saw; tests/test_runtime_x86_64.py checks it against the
 * ELF files.
 *
 *   rt_main trace GLOBS [GLOBS2]  one ops per GLOBS ("-": no filter), calls
 *                                 every function, prints the callbacks
 *   rt_main bytes                 pad bytes before, during and after tracing
 *   rt_main regs                  a callback clobbering every register
 *   rt_main idle                  registers nothing
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftpad.h"

#define FUNCS(X, P) X(P##add1) X(P##add1_endbr) X(P##noslot) X(P##noslot_endbr) \
	X(P##sum8) X(P##calls_add1) X(P##echo_regs) X(P##bad)
#define DECLARE(P) \
	long P##add1(long), P##add1_endbr(long), P##noslot(long), P##noslot_endbr(long); \
	long P##sum8(long, long, long, long, long, long, long, long), P##calls_add1(long); \
	void P##echo_regs(void *), P##check_regs(void *), P##bad(void); \
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

static int cmd_regs(void)
{
	unsigned char out[184];
	struct ftpad_ops o = { .func = clobber };

	check(ftpad_set_filter(&o, "*echo_regs", 1), 0, "ftpad_set_filter");
	check(ftpad_register_ops(&o), 0, "ftpad_register_ops");
	memset(out, 0, sizeof(out));
	t_check_regs(out);
	check(memcmp(out, t_regs_expected, sizeof(out)), 0, "t_ registers");
	memset(out, 0, sizeof(out));
	so_check_regs(out);
	check(memcmp(out, so_regs_expected, sizeof(out)), 0, "so_ registers");
	check(clobbered, 2, "callbacks");
	printf("regs ok\n");
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
	if (argc == 2 && !strcmp(argv[1], "idle"))
		return cmd_idle();
	fprintf(stderr, "usage: rt_main trace GLOBS [GLOBS2] | bytes | regs | idle\n");
	return 2;
}
