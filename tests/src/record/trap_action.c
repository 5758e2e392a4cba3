/* SPDX-License-Identifier: MIT */
/*
 * Prints whether the SIGTRAP action the kernel holds is the one sigaction()
 * shows ("same"), or a wrapper of the recorder's behind it ("wrapped"):
 * libftpad's own trap handler, set while the recorder runs, must not be
 * wrapped, or the traps of its patching are recorded as the program's
 * signals.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((noinline)) int padded(int x)
{
	return x + 1;
}

int main(void)
{
	struct sigaction shown;
	struct { /* the kernel's struct sigaction on x86_64 */
		void *handler;
		unsigned long flags;
		void *restorer;
		unsigned long mask;
	} held;

	padded(1);
	sigaction(SIGTRAP, NULL, &shown);
	syscall(SYS_rt_sigaction, SIGTRAP, NULL, &held, sizeof(held.mask));
	printf("%s\n", held.handler == (void *)shown.sa_sigaction ? "same" : "wrapped");
	return 0;
}
