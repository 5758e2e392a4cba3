/* SPDX-License-Identifier: MIT */
/*
 * seccomp_run PROG [ARGS...]: runs PROG under a seccomp filter that allows
 * every call, so that its /proc/PID/status says "Seccomp: 2" while it runs
 * normally (tests/attach/test_attach.py: ftpad attach refuses such a process).
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = { 1, &allow };

	if (argc < 2 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp_run");
		return 1;
	}
	execv(argv[1], argv + 1);
	perror(argv[1]);
	return 127;
}
