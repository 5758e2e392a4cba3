/* SPDX-License-Identifier: MIT */
/* Refused: unpadded_compute has no pad (global_compute is listed first,
 * so a refusal must leave it untouched too). */
#include <ftpad_patch.h>

static long new_global(long x)
{
	return x + 1001;
}

static long new_unpadded(long x)
{
	return x;
}

FTPAD_REPLACE(global_compute, new_global);
FTPAD_REPLACE(unpadded_compute, new_unpadded);
