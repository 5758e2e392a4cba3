/* SPDX-License-Identifier: MIT */
/*
 * grace_fail.c - a register that fails half way must not return while a
 * callback of its ops still runs.
 *
 * A seccomp filter refuses pwrite64 (/proc/self/mem) and mprotect on this
 * program's own text only, so a register enables the site of lib_work()
 * in grace_fail_lib.c, then fails on prog_fn() here.  A thread calls
 * lib_work() in a loop; the callback sleeps a millisecond, and checks, as
 * it starts and as it ends, whether the register already returned.  The
 * ops is poisoned and freed as soon as the register returns its error, as
 * a caller may.  The log callback takes its time over the first write
 * error (5 ms), so that lib_work()'s site, enabled just before, is called
 * meanwhile.  Prints "rounds=N refused=N calls=C late=L"; L must be 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ftpad.h"

#define ROUNDS 40
#define COOKIE ((void *)0x600d)

long lib_work(long x);
extern char __executable_start[], etext[];

__attribute__((noipa)) long prog_fn(long x)
{
	return x + 1;
}

static int returned, stop;
static long calls, late;

static void slow(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		 struct ftpad_regs *regs)
{
	struct timespec ms = { 0, 1000000 };

	(void)ip, (void)parent_ip, (void)regs;
	__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&returned, __ATOMIC_SEQ_CST))
		__atomic_fetch_add(&late, 1, __ATOMIC_RELAXED);
	nanosleep(&ms, NULL);
	if (__atomic_load_n(&returned, __ATOMIC_SEQ_CST) || ops->private != COOKIE)
		__atomic_fetch_add(&late, 1, __ATOMIC_RELAXED);
}

static int logged;

/* The first error of a register is logged while lib_work()'s site calls:
 * take a while then (not later, when the register puts it back). */
static int slow_log(enum ftpad_log_level level, const char *fmt, va_list ap)
{
	struct timespec pause = { 0, 5000000 };
	int n = vfprintf(stderr, fmt, ap);

	(void)level;
	if (!logged++)
		nanosleep(&pause, NULL);
	return n;
}

static void *caller(void *arg)
{
	long sum = 0;

	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		sum += lib_work(sum & 0xff);
	return (void *)sum;
}

/* The seccomp filter's 64-bit argument a in [lo, hi) (which share their
 * high word): EPERM; anything else: allowed. */
#define DENY_RANGE(a, lo, hi)                                                               \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[a]) + 4),     \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)((lo) >> 32), 0, 4),                  \
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[a])),         \
	BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)(lo), 0, 2),                          \
	BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)(hi), 1, 0),                          \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),                               \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

/* Neither /proc/self/mem (pwrite64's offset is the address) nor mprotect
 * may touch this program's text. */
static void deny_text_writes(void)
{
	uint64_t lo = (uintptr_t)__executable_start, hi = (uintptr_t)etext;
	struct sock_filter prog[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pwrite64, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 8, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		DENY_RANGE(3, lo, hi),
		DENY_RANGE(0, lo, hi),
	};
	struct sock_fprog fprog = { .len = sizeof(prog) / sizeof(prog[0]), .filter = prog };

	if (lo >> 32 != (hi - 1) >> 32) {
		fprintf(stderr, "text crosses a 4 GiB boundary\n");
		exit(2);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog)) {
		perror("seccomp");
		exit(2);
	}
}

int main(void)
{
	struct timespec settle = { 0, 3000000 };
	int refused = 0, err;
	pthread_t t;

	deny_text_writes();
	ftpad_set_print(slow_log);
	if (pthread_create(&t, NULL, caller, NULL))
		return 2;
	for (int round = 0; round < ROUNDS; round++) {
		struct ftpad_ops *ops = calloc(1, sizeof(*ops));

		ops->func = slow;
		ops->private = COOKIE;
		__atomic_store_n(&returned, 0, __ATOMIC_SEQ_CST);
		logged = 0;
		if (ftpad_set_filter(ops, "lib_work,prog_fn", 1))
			return 2;
		err = ftpad_register_ops(ops);
		__atomic_store_n(&returned, 1, __ATOMIC_SEQ_CST);
		if (!err) {
			printf("register succeeded: the filter let it write\n");
			return 1;
		}
		refused += err == -EPERM || err == -EACCES;
		memset(ops, 0x5a, sizeof(*ops));
		free(ops);
		/* A late callback, if any, ends meanwhile and counts itself. */
		nanosleep(&settle, NULL);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	printf("rounds=%d refused=%d calls=%ld late=%ld\n", ROUNDS, refused, calls, late);
	return 0;
}
