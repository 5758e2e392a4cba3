/* SPDX-License-Identifier: MIT */
/*
 * env_forksig.c - fork() from a signal handler that interrupted this very
 * thread inside ftpad_register_ops()/ftpad_unregister_ops(), which hold
 * libftpad's lock.  Neither the parent nor the child may hang.
 *
 * The thread loops register/unregister while a timer fires every 1 ms;
 * its handler forks when it interrupted a call.  The child returns from
 * the handler (finishing the call it interrupted), checks that it sees a
 * call exactly when the ops is registered and that the lock is free, and
 * exits 0.  The parent waits for it in the handler.  Prints the forks
 * made, the rounds run and the children that failed.
 *
 * The work is fixed by counts, not by time: FORKS forks, each inside a
 * call, in at least MIN_ROUNDS rounds.  A fork and its child's run take
 * longer than the timer's period on a loaded machine, so a fork per tick
 * for a fixed number of rounds made the run's length grow with the load.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "env_common.h"

#define MIN_ROUNDS 3000
#define FORKS 200
/* Rounds after which too few forks is a failure: the timer does not fire. */
#define MAX_ROUNDS 10000000

static volatile sig_atomic_t in_call, in_child, forks, children_failed;
static volatile int last_failure;

static struct ftpad_ops ops = { .func = on_call }, child_ops = { .func = on_call };

static void on_alarm(int sig)
{
	int saved = errno, status;
	pid_t pid;

	(void)sig;
	if (!in_call || forks == FORKS)
		return;
	pid = fork();
	if (pid == 0) {
		in_child = 1;
		return;
	}
	forks++;
	while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		last_failure = pid < 0 ? -1 : status, children_failed++;
	errno = saved;
}

/*
 * In the child, once the interrupted call returned: the code is whole (a
 * call is seen exactly when ops is registered) and the lock is free.
 * Nothing that scans the modules: glibc does not reset dl_iterate_phdr's
 * lock in the child of a fork made inside it.
 */
static void child_check(bool registered)
{
	int before = calls, err;

	sink = traced(1);
	err = ftpad_set_filter(&child_ops, "traced", 1);
	_exit(err ? 100 - err : calls != before + registered ? 3 : 0);
}

int main(void)
{
	struct itimerval every = { { 0, 1000 }, { 0, 1000 } };
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	int rounds;

	if (ftpad_set_filter(&ops, "traced", 1))
		return 1;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &every, NULL);
	for (rounds = 0; rounds < MIN_ROUNDS || (forks < FORKS && rounds < MAX_ROUNDS); rounds++) {
		int err;

		in_call = 1;
		err = ftpad_register_ops(&ops);
		in_call = 0;
		if (in_child)
			child_check(!err);
		if (err) {
			printf("FAIL register: %s\n", ftpad_strerror(err));
			return 1;
		}
		sink = traced(rounds);
		in_call = 1;
		err = ftpad_unregister_ops(&ops);
		in_call = 0;
		if (in_child)
			child_check(err);
		if (err) {
			printf("FAIL unregister: %s\n", ftpad_strerror(err));
			return 1;
		}
	}
	setitimer(ITIMER_REAL, &(struct itimerval){ 0 }, NULL);
	if (in_child)
		child_check(false);
	printf("forks=%d rounds=%d children_failed=%d calls=%d\n", forks, rounds, children_failed,
	       calls);
	if (children_failed)
		printf("last failure: wait status %#x\n", last_failure);
	return 0;
}
