/* SPDX-License-Identifier: MIT */
/*
 * livepatch.h - livepatch.c's steps, for attach.c's patch sessions: a
 * patch is prepared (loaded and resolved, or found for a revert), the
 * tool checks that no thread runs the code it replaces, then it is
 * committed: every function switched, or, when the tool gives up or a
 * switch fails, nothing changed.  Between prepare and commit no other
 * patch is applied.
 */
#ifndef FTPAD_LIVEPATCH_H
#define FTPAD_LIVEPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

struct lp_patch;

struct ftpad_patch_prep {
	struct lp_patch *patch;
	bool revert;
	int result;    /* the commit's */
	bool switched; /* a failed apply had switched some functions */
};

/* Code no thread may be in when the patch switches: [lo, hi), and what it is. */
struct ftpad_patch_range {
	uintptr_t lo, hi;
	const char *what;
};

int ftpad_patch_prepare(const char *path, struct ftpad_patch_prep *prep, char *err,
			size_t errlen) FTPAD_HIDDEN;
int ftpad_patch_prepare_revert(const char *path, struct ftpad_patch_prep *prep, char *err,
			       size_t errlen) FTPAD_HIDDEN;
size_t ftpad_patch_ranges(const struct ftpad_patch_prep *prep, struct ftpad_patch_range *out,
			  size_t max) FTPAD_HIDDEN;
/* Switch; await (if not NULL) is called first with the locks held, and
 * a non-zero return aborts: 0, or the error with nothing switched. */
int ftpad_patch_commit(struct ftpad_patch_prep *prep, int (*await)(void *arg), void *arg,
		       char *err, size_t errlen) FTPAD_HIDDEN;
/* After the commit, once the tool let the threads go (a dlclose may wait
 * for them): a reverted patch is unloaded when unload (the tool saw no
 * thread in it), a refused one always unless some function had switched
 * (a thread may have entered it); the next patch may come. */
void ftpad_patch_finish(struct ftpad_patch_prep *prep, bool unload) FTPAD_HIDDEN;
/* One line per applied patch, newest first: "PATH fn,fn"; the length. */
size_t ftpad_patch_list(char *buf, size_t size) FTPAD_HIDDEN;

#endif
