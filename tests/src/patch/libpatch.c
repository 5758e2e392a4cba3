/* SPDX-License-Identifier: MIT */
/* A patch of lib.c's lib_compute. */
#include <ftpad_patch.h>

static long new_lib_compute(long x)
{
	return x + 5005;
}

FTPAD_REPLACE(lib_compute, new_lib_compute);
