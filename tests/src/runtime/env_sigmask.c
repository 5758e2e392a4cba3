/* SPDX-License-Identifier: MIT */
/*
 * env_sigmask.c - the program's own SIGTRAP handler, reached through
 * libftpad's, runs with the mask it would have without libftpad: the
 * interrupted thread's, its action's sa_mask, and SIGTRAP.  A signal the
 * thread blocks, pending, is not delivered inside it.
 *
 * The check runs on a thread that blocks SIGUSR1 and has one pending,
 * once before libftpad installed its handler (the baseline) and once
 * after, for a raise() and for an int3 of the program's own.  Prints one
 * line per trap: "<when> <how>: ok" or what was wrong.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

#include "env_common.h"

static sigset_t expected, expected_uc;
static volatile sig_atomic_t in_trap, usr1_inside, usr1_seen;
static char verdict[256];

static void on_usr1(int sig)
{
	(void)sig;
	usr1_inside += in_trap;
	usr1_seen++;
}

/* Which signals 1..64 differ between a and b (glibc's own two aside). */
static void diff(const char *what, const sigset_t *a, const sigset_t *b)
{
	char *p = verdict + strlen(verdict);

	for (int sig = 1; sig < 65; sig++) {
		if (sig == 32 || sig == 33)
			continue;
		if (sigismember(a, sig) != sigismember(b, sig)) {
			snprintf(p, verdict + sizeof(verdict) - p, " %s:%d", what, sig);
			p += strlen(p);
		}
	}
}

static void on_trap(int sig, siginfo_t *info, void *ctx)
{
	ucontext_t *uc = ctx;
	sigset_t now;

	(void)sig, (void)info;
	in_trap = 1;
	pthread_sigmask(SIG_BLOCK, NULL, &now);
	verdict[0] = 0;
	diff("mask", &now, &expected);
	diff("uc_sigmask", &uc->uc_sigmask, &expected_uc);
	/* Give a wrongly unblocked SIGUSR1 every chance to come in here. */
	for (volatile int i = 0; i < 100000; i++)
		;
	in_trap = 0;
}

static struct ftpad_ops ops = { .func = on_call };

static void trap(const char *when, const char *how)
{
	usr1_inside = 0;
	usr1_seen = 0;
	pthread_kill(pthread_self(), SIGUSR1); /* pending: blocked */
	if (!strcmp(how, "raise"))
		raise(SIGTRAP);
	else
		__asm__ volatile("int3");
	if (usr1_inside || usr1_seen)
		printf("%s %s: SIGUSR1 delivered inside the handler\n", when, how);
	else if (verdict[0])
		printf("%s %s: wrong mask:%s\n", when, how, verdict);
	else
		printf("%s %s: ok\n", when, how);
	/* Take the pending SIGUSR1 now, out of the handler. */
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
}

static void *thread(void *arg)
{
	sigset_t block;

	(void)arg;
	/* The thread's mask: SIGUSR1 (pending at the trap) and SIGWINCH. */
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGWINCH);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	pthread_sigmask(SIG_BLOCK, NULL, &expected_uc);
	/* The handler's: that, its sa_mask (SIGUSR2) and SIGTRAP. */
	expected = expected_uc;
	sigaddset(&expected, SIGUSR2);
	sigaddset(&expected, SIGTRAP);
	trap("before", "raise");
	trap("before", "int3");
	if (ftpad_set_filter(&ops, "traced", 1) || ftpad_register_ops(&ops) || traced(1) != 2) {
		printf("FAIL register\n");
		return NULL;
	}
	trap("after", "raise");
	trap("after", "int3");
	printf("calls=%d\n", calls);
	ftpad_unregister_ops(&ops);
	return NULL;
}

int main(void)
{
	struct sigaction sa = { .sa_sigaction = on_trap, .sa_flags = SA_SIGINFO };
	pthread_t t;

	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR2);
	sigaction(SIGTRAP, &sa, NULL);
	signal(SIGUSR1, on_usr1);
	if (pthread_create(&t, NULL, thread, NULL))
		return 1;
	pthread_join(t, NULL);
	return 0;
}
