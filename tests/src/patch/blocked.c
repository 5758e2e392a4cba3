/* SPDX-License-Identifier: MIT */
/* Refused without --immediate: a thread is blocked in read() called
 * from blocked_in_read. */
#include <ftpad_patch.h>

static long new_blocked(long x)
{
	return x;
}

FTPAD_REPLACE(blocked_in_read, new_blocked);
