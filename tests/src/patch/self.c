/* SPDX-License-Identifier: MIT */
/*
 * ftpad_patch_apply() and ftpad_patch_revert() from the program itself
 * (tests/attach/test_patch.py): argv[1] is server.c's patch1.so, which
 * replaces global_compute here too.  Exits 0 when each call returns what
 * the code switched to at that moment says.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <ftpad.h>

static volatile long patched_calls;

__attribute__((noipa)) long global_compute(long x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

__attribute__((noipa)) static long static_compute(long x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3;
}

int main(int argc, char **argv)
{
	char err[256] = "";
	int e;

	if (argc != 2 || global_compute(1) != 2 || static_compute(1) != 3)
		return 1;
	e = ftpad_patch_apply(argv[1], err, sizeof(err));
	if (e || global_compute(1) != 1002 || static_compute(1) != 10 || patched_calls != 1) {
		fprintf(stderr, "apply: %d %s\n", e, err);
		return 1;
	}
	e = ftpad_patch_apply(argv[1], err, sizeof(err));
	if (e != -EEXIST || !strstr(err, "already applied")) {
		fprintf(stderr, "twice: %d %s\n", e, err);
		return 1;
	}
	e = ftpad_patch_revert(argv[1], err, sizeof(err));
	if (e || global_compute(1) != 2 || static_compute(1) != 3) {
		fprintf(stderr, "revert: %d %s\n", e, err);
		return 1;
	}
	printf("ok\n");
	return 0;
}
