/* SPDX-License-Identifier: MIT */
/*
 * env_noproc.c - run where /proc is not mounted: the program's own sites
 * are found all the same (from the path it was started by), or, when that
 * path no longer leads to it, a warning says they are not patched.
 *
 *   env_noproc          register, call traced: prints whether /proc is
 *                       there, the register's result and the calls seen
 *   env_noproc chdir    the same after chdir("/"), so that a relative
 *                       path it was started by leads nowhere
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "env_common.h"

static struct ftpad_ops ops = { .func = on_call };

int main(int argc, char **argv)
{
	int err;

	if (argc > 1 && !strcmp(argv[1], "chdir") && chdir("/"))
		return 2;
	err = ftpad_set_filter(&ops, "traced", 1);
	if (!err)
		err = ftpad_register_ops(&ops);
	sink = traced(1);
	printf("proc=%s register=%d calls=%d\n", access("/proc/self/exe", F_OK) ? "absent" : "there",
	       err, calls);
	return 0;
}
