/* SPDX-License-Identifier: MIT */
/*
 * filter.c - an ops' name filters (ftpad_set_filter(), ftpad_set_notrace()):
 * parsing a comma-separated glob list, and matching a function's name the
 * way ftrace does.  Pure: no lock, no state; ops.c keeps the lists, and
 * patch.c asks them which sites an ops wants.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <string.h>

#include "internal.h"

struct ftpad_filter {
	size_t n;
	char *globs[];
};

/*
 * fnmatch() with no flags, where most names fail the compare before the
 * glob's first special character: an update asks every site of every
 * module (100,000 of them for one -F leaf), and fnmatch costs ten times
 * that compare.  A glob without special characters matches only itself.
 */
static bool glob_matches(const char *glob, const char *name)
{
	size_t literal = strcspn(glob, "*?[\\");

	if (strncmp(glob, name, literal))
		return false;
	if (!glob[literal])
		return !name[literal];
	return !fnmatch(glob, name, 0);
}

static bool filter_has(const struct ftpad_filter *f, const char *name)
{
	for (size_t i = 0; f && name && i < f->n; i++)
		if (glob_matches(f->globs[i], name))
			return true;
	return false;
}

bool ftpad_ops_all(const struct ftpad_ops *ops)
{
	const struct ftpad_filter *f = ops->internal.filter, *nt = ops->internal.notrace;

	return (!f || !f->n) && (!nt || !nt->n);
}

bool ftpad_ops_match(const struct ftpad_ops *ops, const char *name)
{
	const struct ftpad_filter *f = ops->internal.filter;

	/* As in ftrace: the notrace list wins over the filter. */
	if (filter_has(ops->internal.notrace, name))
		return false;
	return !f || !f->n || filter_has(f, name);
}

/* The next glob of a list: *len bytes at the returned start (blanks
 * around it dropped), *rest past its comma; NULL at the end. */
static const char *next_glob(const char *p, size_t *len, const char **rest)
{
	const char *end;

	for (;;) {
		p += strspn(p, " \t\n");
		if (!*p)
			return NULL;
		end = p + strcspn(p, ",");
		*rest = *end ? end + 1 : end;
		while (end > p && strchr(" \t\n", end[-1]))
			end--;
		if (end > p) {
			*len = end - p;
			return p;
		}
		p = *rest;
	}
}

/* A filter holding old's globs, then those of "a, b*,c": one block, the
 * strings after the pointers (no malloc: see alloc.c). */
struct ftpad_filter *ftpad_filter_parse(const struct ftpad_filter *old, const char *globs)
{
	size_t n = old ? old->n : 0, bytes = 0, len;
	const char *g, *rest;
	struct ftpad_filter *f;
	char *str;

	for (size_t i = 0; i < n; i++)
		bytes += strlen(old->globs[i]) + 1;
	for (rest = globs; (g = next_glob(rest, &len, &rest));)
		n++, bytes += len + 1;
	f = ftpad_alloc(sizeof(*f) + n * sizeof(f->globs[0]) + bytes);
	if (!f)
		return NULL;
	str = (char *)&f->globs[n];
	for (size_t i = 0; old && i < old->n; i++) {
		f->globs[f->n++] = strcpy(str, old->globs[i]);
		str += strlen(str) + 1;
	}
	for (rest = globs; (g = next_glob(rest, &len, &rest));) {
		f->globs[f->n++] = memcpy(str, g, len);
		str[len] = 0;
		str += len + 1;
	}
	return f;
}

void ftpad_free_filter(void *filter)
{
	ftpad_free(filter);
}
