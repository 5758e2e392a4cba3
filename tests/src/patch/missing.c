/* SPDX-License-Identifier: MIT */
/* Refused: it replaces a function that resolves, but uses a symbol the
 * target lacks. */
#include <ftpad_patch.h>

static long new_global(long x)
{
	return x + (long)FTPAD_SYMBOL(no_such_symbol);
}

FTPAD_REPLACE(global_compute, new_global);
