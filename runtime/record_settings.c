/* SPDX-License-Identifier: MIT */
/*
 * record_settings.c - the recorder's settings (record.h lists them): those
 * of the attach request while a session runs (attach.c checks the request
 * through ftpad_request_value() too), else the environment's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

const char *request;
bool bad_setting;

const char *ftpad_request_value(const char *req, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = req; *p; p += strlen(p) + 1)
		if (!strncmp(p, name, len) && p[len] == '=')
			return p + len + 1;
	return NULL;
}

/* A setting of this session: its attach request's, or the environment's. */
const char *setting(const char *name)
{
	return request ? ftpad_request_value(request, name) : getenv(name);
}

size_t setting_size(const char *name, size_t def, size_t min)
{
	const char *v = setting(name);
	char *end;
	unsigned long long n;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (*end || n < min || errno || *v == '-') {
		ftpad_warn("ftpad: error: %s='%s' is not a number >= %zu; using %zu\n", name, v,
			   min, def);
		bad_setting = true;
		return def;
	}
	return n;
}
