// SPDX-License-Identifier: MIT
// A second patch of server.c's global function, in C++: it goes over
// patch1's, and reverting it brings patch1's back.
#include <ftpad_patch.h>

static long newer_global(long x)
{
	return x + 2001;
}

FTPAD_REPLACE(global_compute, newer_global);
