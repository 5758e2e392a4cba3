/* SPDX-License-Identifier: MIT */
/*
 * textwrite.c - how libftpad writes code, on 64 small functions compiled
 * with the GCC plugin (x86_64).  tests/runtime/test_runtime_text.py runs it.
 *
 *   textwrite idle          nothing registered: the program's text pages
 *                           dirtied (Private_Dirty of its r-x mapping, kB)
 *   textwrite trace         the same after tracing (the control)
 *   textwrite deny-procmem  seccomp refuses pwrite64: /proc/self/mem
 *                           cannot be written, mprotect must do
 *   textwrite deny-both     seccomp also refuses mprotect with PROT_WRITE:
 *                           registering must fail, the code untouched
 *   textwrite toggle        register and unregister once (for strace)
 *   textwrite toggle-busy   the same, while another thread is inside a
 *                           callback that sleeps: the slots cannot go back
 *                           with the other bytes, only after it returns
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <unistd.h>

#include "ftpad.h"

#define F(n) __attribute__((noipa)) long tw_##n(long x) { return x + n; }
#define F8(n) F(n##0) F(n##1) F(n##2) F(n##3) F(n##4) F(n##5) F(n##6) F(n##7)
F8(1) F8(2) F8(3) F8(4) F8(5) F8(6) F8(7) F8(8)

#define C(n) tw_##n,
#define C8(n) C(n##0) C(n##1) C(n##2) C(n##3) C(n##4) C(n##5) C(n##6) C(n##7)
static long (*const funcs[])(long) = { C8(1) C8(2) C8(3) C8(4) C8(5) C8(6) C8(7) C8(8) };
#define NFUNCS (sizeof(funcs) / sizeof(funcs[0]))

static unsigned long calls;

static void count(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		  struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	calls++;
}

static struct ftpad_ops ops = { .func = count };

static long call_all(void)
{
	long sum = 0;

	for (size_t i = 0; i < NFUNCS; i++)
		sum += funcs[i](1);
	return sum;
}

/* Private_Dirty of this program's executable mappings, in kB. */
static unsigned long text_dirty(void)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512], exe[400], path[400] = "";
	unsigned long total = 0, kb;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int mine = 0;

	exe[n > 0 ? n : 0] = 0;
	while (f && fgets(line, sizeof(line), f)) {
		char perms[8];

		if (sscanf(line, "%*x-%*x %7s %*s %*s %*s %399s", perms, path) == 2)
			mine = perms[2] == 'x' && !strcmp(path, exe);
		else if (mine && sscanf(line, "Private_Dirty: %lu kB", &kb) == 1)
			total += kb;
	}
	if (f)
		fclose(f);
	return total;
}

/* Make syscall nr fail with EPERM; for mprotect only when arg prot (2)
 * asks for PROT_WRITE. */
static void deny(int nr, int prot_write_only)
{
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, prot_write_only ? PROT_WRITE : ~0u, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fprog = { .len = sizeof(prog) / sizeof(prog[0]), .filter = prog };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog)) {
		perror("seccomp");
		exit(2);
	}
}

static int try_tracing(void)
{
	unsigned char before[NFUNCS][16];
	long sum;
	int err;

	for (size_t i = 0; i < NFUNCS; i++)
		memcpy(before[i], (const char *)funcs[i] - 8, 16);
	err = ftpad_register_ops(&ops);
	sum = call_all();
	printf("register=%d calls=%lu sum=%ld\n", err, calls, sum);
	if (!err)
		printf("unregister=%d\n", ftpad_unregister_ops(&ops));
	for (size_t i = 0; i < NFUNCS; i++)
		if (memcmp(before[i], (const char *)funcs[i] - 8, 16))
			printf("FAIL %zu: pad changed\n", i);
	return 0;
}

static volatile int inside;

static void sleepy(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		   struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	inside = 1;
	usleep(300 * 1000);
}

static void *call_one(void *arg)
{
	(void)arg;
	funcs[0](1);
	return NULL;
}

/* Unregister while another thread sleeps in the callback; every pad must
 * be as before once it is back. */
static int toggle_busy(void)
{
	static struct ftpad_ops slow = { .func = sleepy };
	unsigned char before[NFUNCS][16];
	pthread_t t;
	int err;

	for (size_t i = 0; i < NFUNCS; i++)
		memcpy(before[i], (const char *)funcs[i] - 8, 16);
	ftpad_set_filter(&slow, "tw_*", 1);
	printf("register=%d\n", ftpad_register_ops(&slow));
	pthread_create(&t, NULL, call_one, NULL);
	while (!inside)
		usleep(1000);
	err = ftpad_unregister_ops(&slow);
	pthread_join(t, NULL);
	printf("unregister=%d\n", err);
	for (size_t i = 0; i < NFUNCS; i++)
		if (memcmp(before[i], (const char *)funcs[i] - 8, 16))
			printf("FAIL %zu: pad changed\n", i);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	ftpad_set_filter(&ops, "tw_*", 1);
	if (!strcmp(mode, "idle")) {
		printf("sum=%ld dirty=%lu\n", call_all(), text_dirty());
	} else if (!strcmp(mode, "trace")) {
		ftpad_register_ops(&ops);
		printf("sum=%ld dirty=%lu\n", call_all(), text_dirty());
	} else if (!strcmp(mode, "deny-procmem")) {
		deny(SYS_pwrite64, 0);
		try_tracing();
	} else if (!strcmp(mode, "deny-both")) {
		deny(SYS_pwrite64, 0);
		deny(SYS_mprotect, 1);
		try_tracing();
	} else if (!strcmp(mode, "toggle")) {
		printf("register=%d\n", ftpad_register_ops(&ops));
		printf("unregister=%d\n", ftpad_unregister_ops(&ops));
	} else if (!strcmp(mode, "toggle-busy")) {
		return toggle_busy();
	} else {
		fprintf(stderr, "usage: textwrite idle|trace|deny-procmem|deny-both|toggle|"
			"toggle-busy\n");
		return 2;
	}
	return 0;
}
