/* SPDX-License-Identifier: MIT */
/*
 * env_common.h - what the env_*.c programs (tests/runtime/test_runtime_hostile_env.py)
 * share: a traced function, an ops that counts its calls, and a sink that
 * keeps a call to it from being optimized away.  Static: each program
 * gets its own copy.
 */
#ifndef ENV_COMMON_H
#define ENV_COMMON_H

#include "ftpad.h"

static volatile int calls, sink;

__attribute__((noinline)) int traced(int x)
{
	return x + 1;
}

static void on_call(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		    struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	calls++;
}

#endif
