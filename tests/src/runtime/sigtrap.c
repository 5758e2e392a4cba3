/* SPDX-License-Identifier: MIT */
/*
 * sigtrap.c - SIGTRAPs that are not ftpad's still reach the program.
 *
 *   sigtrap handler   install a SIGTRAP handler, then let libftpad install
 *                     its own (by patching), then raise(SIGTRAP) and run an
 *                     int3 of our own: both must reach our handler
 *   sigtrap default   no handler: an int3 of our own after patching must
 *                     still kill the process with SIGTRAP (before printing)
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

#include "ftpad.h"

static volatile int traps, kernel_traps, calls;

__attribute__((noinline)) int traced(int x)
{
	return x + 1;
}

static void on_trap(int sig, siginfo_t *info, void *ctx)
{
	(void)sig, (void)ctx;
	traps++;
	kernel_traps += info->si_code == SI_KERNEL;
}

static void on_call(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		    struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	calls++;
}

static struct ftpad_ops ops = { .func = on_call };

static int patch_once(void)
{
	int err = ftpad_set_filter(&ops, "traced", 1);

	if (!err)
		err = ftpad_register_ops(&ops);
	if (err) {
		printf("FAIL register: %s\n", ftpad_strerror(err));
		return 1;
	}
	return traced(1) != 2;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_sigaction = on_trap, .sa_flags = SA_SIGINFO };

	if (argc > 1 && !strcmp(argv[1], "handler"))
		sigaction(SIGTRAP, &sa, NULL);
	if (patch_once())
		return 1;
	if (argc > 1 && !strcmp(argv[1], "handler"))
		raise(SIGTRAP);
	__asm__ volatile("int3");
	printf("traps=%d kernel=%d calls=%d\n", traps, kernel_traps, calls);
	ftpad_unregister_ops(&ops);
	__asm__ volatile("int3");
	printf("traps=%d kernel=%d calls=%d\n", traps, kernel_traps, calls);
	return 0;
}
