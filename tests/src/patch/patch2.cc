// SPDX-License-Identifier: MIT
// A second patch of server.c's global function, in C++: it goes over
// patch1's, and reverting it brings patch1's back.  FTPAD_SYMBOL from C++.
#include <ftpad_patch.h>

static long newer_global(long x)
{
	volatile long *count = static_cast<volatile long *>(FTPAD_SYMBOL(patched_calls));

	(void)count;
	return x + 2001;
}

FTPAD_REPLACE(global_compute, newer_global);
