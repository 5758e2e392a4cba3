/* SPDX-License-Identifier: MIT */
/*
 * A process whose second thread only is under a seccomp filter, one that
 * kills the whole process (SIGSYS) on socket(): the main thread's
 * /proc/PID/status says "Seccomp: 0".  That thread spins in padded code,
 * the main one blocks in read() on stdin, so ftpad attach would run its
 * stub on the filtered thread, and libftpad's socket() would kill the
 * process (tests/attach/test_attach_hostile.py: attach refuses it).  Built with
 * the ftpad GCC plugin.  Prints "ready PID" once the filter is on; stdin's
 * end of file ends it with "ok".
 */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_int ready, stop;
static volatile unsigned long spins;

__attribute__((noinline)) void seccomp_spin(void)
{
	spins++;
}

static void *filtered(void *arg)
{
	struct sock_filter kill_socket[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(kill_socket) / sizeof(kill_socket[0]), kill_socket };

	(void)arg;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp_thread: prctl");
		ready = -1;
		return NULL;
	}
	ready = 1;
	while (!stop)
		seccomp_spin();
	return NULL;
}

int main(void)
{
	pthread_t t;
	char c;

	if (pthread_create(&t, NULL, filtered, NULL))
		return 1;
	while (!ready)
		usleep(1000);
	if (ready < 0)
		return 1;
	printf("ready %d\n", getpid());
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	stop = 1;
	pthread_join(t, NULL);
	printf("ok %lu\n", spins);
	return 0;
}
