/* SPDX-License-Identifier: MIT */
/* A patch of server.c: a global and a static function, and a static
 * variable of the target through FTPAD_SYMBOL. */
#include <ftpad_patch.h>

static long new_global(long x)
{
	volatile long *count = FTPAD_SYMBOL(patched_calls);

	__atomic_fetch_add(count, 1, __ATOMIC_RELAXED);
	return x + 1001;
}

static long new_static(long x)
{
	return x * 3 + 7;
}

FTPAD_REPLACE(global_compute, new_global);
FTPAD_REPLACE(static_compute, new_static);
