/* SPDX-License-Identifier: MIT */
/*
 * ftpad_patch_apply() and ftpad_patch_revert() from the program itself,
 * with no instruction encoding of any architecture (tests/attach/
 * test_patch.py runs it on aarch64 under qemu-aarch64): argv[1] is
 * server.c's patch1.so, which replaces a global and a static function.
 * Every result is checked after the apply and after the revert, and the
 * functions' first bytes are the same after the revert as before the
 * apply, and different in between.  Exits 0 when all holds; says
 * "ok patched=N" (the calls the patch counted through FTPAD_SYMBOL).
 */
#include <stdio.h>
#include <string.h>

#include <ftpad.h>

#include "compute.h"

#define ENTRY_BYTES 16

/* What each function returns now is old (x + 1, x * 3) or new (x + 1001,
 * x * 3 + 7), for a few x. */
static int all(int patched)
{
	for (long x = 0; x < 1000; x++)
		if (global_compute(x) != x + (patched ? 1001 : 1) ||
		    static_compute(x) != x * 3 + (patched ? 7 : 0))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	unsigned char g[ENTRY_BYTES], s[ENTRY_BYTES];
	char err[256] = "";
	int e;

	if (argc != 2)
		return 2;
	memcpy(g, (const void *)global_compute, sizeof(g));
	memcpy(s, (const void *)static_compute, sizeof(s));
	if (!all(0))
		return fprintf(stderr, "old results wrong before\n"), 1;
	e = ftpad_patch_apply(argv[1], err, sizeof(err));
	if (e || !all(1) || !memcmp(g, (const void *)global_compute, sizeof(g)) ||
	    !memcmp(s, (const void *)static_compute, sizeof(s)))
		return fprintf(stderr, "apply: %d %s\n", e, err), 1;
	e = ftpad_patch_revert(argv[1], err, sizeof(err));
	if (e || !all(0) || memcmp(g, (const void *)global_compute, sizeof(g)) ||
	    memcmp(s, (const void *)static_compute, sizeof(s)))
		return fprintf(stderr, "revert: %d %s\n", e, err), 1;
	printf("ok patched=%ld\n", patched_calls);
	return 0;
}
