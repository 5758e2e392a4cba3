/* SPDX-License-Identifier: MIT */
/*
 * ftpad_patch_apply() and ftpad_patch_revert() from the program itself
 * (tests/attach/test_patch.py): argv[1] is server.c's patch1.so, which
 * replaces global_compute here too; argv[2] (optional) libpatch.so, which
 * replaces lib.c's lib_compute.  Exits 0 when each call returns what the
 * code switched to at that moment says.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <ftpad.h>

#include "compute.h"

long lib_compute(long x);

/* Whether fn's pad is a jmp straight into the object named like name. */
static int jumps_into(void *fn, const char *name)
{
	const unsigned char *p = fn;
	int32_t rel;
	Dl_info info;

	if (p[0] != 0xe9)
		return 0;
	memcpy(&rel, p + 1, 4);
	return dladdr(p + 5 + rel, &info) && strstr(info.dli_fname, name);
}

int main(int argc, char **argv)
{
	char err[256] = "";
	int e;

	if (argc == 3) { /* the library's function, within reach of its patch */
		e = ftpad_patch_apply(argv[2], err, sizeof(err));
		if (e || lib_compute(1) != 5006 || !jumps_into((void *)lib_compute, "libpatch")) {
			fprintf(stderr, "lib apply: %d %s %ld\n", e, err, lib_compute(1));
			return 1;
		}
		e = ftpad_patch_revert(argv[2], err, sizeof(err));
		if (e || lib_compute(1) != 6) {
			fprintf(stderr, "lib revert: %d %s\n", e, err);
			return 1;
		}
	}
	if (argc < 2 || global_compute(1) != 2 || static_compute(1) != 3)
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
