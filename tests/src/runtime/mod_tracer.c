/* SPDX-License-Identifier: MIT */
/*
 * The built-in tracer names callers from symbol tables read before its
 * callbacks run (ftpad_tracer_start() read them before any scan,
 * so they were built later, in callbacks).  Run with FTPAD_FILTER=traced_*:
 * once started, the program forbids itself mmap (a sandbox, as servers set
 * up after their start), so nothing can be read in a callback any more.
 * The trace must still say "traced_leaf <-named_caller".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "ftpad.h"

__attribute__((noinline)) int traced_leaf(int x)
{
	return x * 3;
}

__attribute__((noinline)) int named_caller(int x)
{
	return traced_leaf(x) + 1;
}

static int forbid_mmap(void)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(code) / sizeof(code[0]), code };

	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	       prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

int main(void)
{
	struct ftpad_stats st = { .sz = sizeof(st) };

	if (forbid_mmap())
		return 77;
	printf("%d\n", named_caller(4));
	fflush(stdout);
	return ftpad_get_stats(&st);
}
