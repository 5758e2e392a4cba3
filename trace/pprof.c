/* SPDX-License-Identifier: MIT */
/*
 * pprof.c - `ftpad dump --pprof DIR`: the calls as a pprof profile
 * (google/pprof's proto/profile.proto, gzip'd), which `go tool pprof`,
 * Pyroscope and Parca read.
 *
 * One sample a distinct call path (trace_collect_paths(): every thread,
 * folded), its locations leaf first, with two values:
 *   calls/count      the calls of the path's function along that path;
 *   self/nanoseconds the time spent in it there, not in its callees.
 * A function's flat is then its self time and its cum (the samples whose
 * stack holds it, each once) its total time, recursion counted once:
 * `ftpad report`'s numbers.  There is no per-path total value: every tool
 * that reads pprof adds a stack's value to each of its frames, so a total
 * would be counted again in every caller.
 *
 * A function is a name (report's grouping: two static functions of one
 * name are one row there and one function here), with its module as its
 * file; its location has no mapping nor address, the name being known:
 * no reader tries to symbolize it.
 *
 * Field numbers, from google/pprof's proto/profile.proto (the same in the
 * copy Go vendors, src/cmd/vendor/github.com/google/pprof/profile/encode.go):
 *   Profile: sample_type = 1, sample = 2, location = 4, function = 5,
 *            string_table = 6, default_sample_type = 14
 *   ValueType: type = 1, unit = 2
 *   Sample: location_id = 1 (packed), value = 2 (packed)
 *   Location: id = 1, line = 4;  Line: function_id = 1
 *   Function: id = 1, name = 2, system_name = 3, filename = 4
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "out.h"
#include "pb.h"
#include "viewers.h"

#ifdef FTPAD_HAVE_ZLIB
#include <zlib.h>
#endif

enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE = 2,
	PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5,
	PROFILE_STRING_TABLE = 6,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	VALUE_TYPE_TYPE = 1,
	VALUE_TYPE_UNIT = 2,
	SAMPLE_LOCATION_ID = 1,
	SAMPLE_VALUE = 2,
	LOCATION_ID = 1,
	LOCATION_LINE = 4,
	LINE_FUNCTION_ID = 1,
	FUNCTION_ID = 1,
	FUNCTION_NAME = 2,
	FUNCTION_SYSTEM_NAME = 3,
	FUNCTION_FILENAME = 4,
};

/* The profile's string table: index 0 is "", as pprof requires; then the
 * sample types' words, then the names, each once. */
enum { STR_EMPTY, STR_CALLS, STR_COUNT, STR_SELF, STR_NANOSECONDS, NFIXED_STRINGS };
static const char *const fixed_strings[NFIXED_STRINGS] = {
	"", "calls", "count", "self", "nanoseconds",
};

static void put_value_type(struct pb *b, struct pb *m, uint64_t type, uint64_t unit)
{
	pb_uint(m, VALUE_TYPE_TYPE, type);
	pb_uint(m, VALUE_TYPE_UNIT, unit);
	pb_message(b, PROFILE_SAMPLE_TYPE, m);
}

/* A sample: its path's locations from the leaf up, then its values. */
static void put_sample(struct pb *b, struct pb *m, struct pb *ids,
		       const struct trace_path *paths, uint32_t i)
{
	for (uint32_t p = i; p != TRACE_NONE; p = paths[p].parent)
		pb_varint(ids, (uint64_t)paths[p].sym + 1); /* location id: sym + 1 */
	pb_message(m, SAMPLE_LOCATION_ID, ids);
	pb_varint(ids, paths[i].calls);
	pb_varint(ids, (uint64_t)(paths[i].self < 0 ? 0 : paths[i].self));
	pb_message(m, SAMPLE_VALUE, ids);
	pb_message(b, PROFILE_SAMPLE, m);
}

/* The location and the function of name `sym`: both numbered sym + 1, so
 * that a sample needs no table to name its locations. */
static void put_function(struct pb *b, struct pb *m, struct pb *line, uint32_t sym,
			 uint64_t name, uint64_t file)
{
	uint64_t id = (uint64_t)sym + 1;

	pb_uint(line, LINE_FUNCTION_ID, id);
	pb_uint(m, LOCATION_ID, id);
	pb_message(m, LOCATION_LINE, line);
	pb_message(b, PROFILE_LOCATION, m);
	pb_uint(m, FUNCTION_ID, id);
	pb_uint(m, FUNCTION_NAME, name);
	pb_uint(m, FUNCTION_SYSTEM_NAME, name);
	pb_uint(m, FUNCTION_FILENAME, file);
	pb_message(b, PROFILE_FUNCTION, m);
}

/* The sample types, the samples, the locations and functions of the names
 * the samples use, and the string table. */
static void encode_profile(struct trace *t, const struct trace_path *paths, size_t npaths,
			   struct pb *b)
{
	struct pb m = { 0 }, inner = { 0 };
	uint32_t *string_of = calloc(t->nsyms + 1, sizeof(*string_of)); /* sym: its string + 1 */
	uint32_t *module_of = calloc(t->nsyms + 1, sizeof(*module_of)); /* sym: a module sym + 1 */
	uint32_t nstrings = NFIXED_STRINGS, *order = malloc((2 * t->nsyms + 1) * sizeof(*order));
	size_t i;

	if (!string_of || !module_of || !order)
		abort();
	put_value_type(b, &m, STR_CALLS, STR_COUNT);
	put_value_type(b, &m, STR_SELF, STR_NANOSECONDS);
	for (i = 0; i < npaths; i++)
		put_sample(b, &m, &inner, paths, (uint32_t)i);
	for (i = 0; i < t->nfuncs; i++) /* a name's module: its first function's */
		if (!module_of[t->funcs[i].sym])
			module_of[t->funcs[i].sym] = t->funcs[i].mod + 1;
	for (i = 0; i < npaths; i++) { /* names and modules in first use */
		uint32_t sym = paths[i].sym, mod = module_of[sym];

		if (!string_of[sym])
			order[(string_of[sym] = ++nstrings) - NFIXED_STRINGS - 1] = sym;
		if (mod && !string_of[mod - 1])
			order[(string_of[mod - 1] = ++nstrings) - NFIXED_STRINGS - 1] = mod - 1;
	}
	for (i = 0; i < npaths; i++) {
		uint32_t sym = paths[i].sym, mod = module_of[sym];

		if (string_of[sym] & 0x80000000u) /* written */
			continue;
		put_function(b, &m, &inner, sym, string_of[sym] - 1,
			     mod ? (string_of[mod - 1] & 0x7fffffffu) - 1 : STR_EMPTY);
		string_of[sym] |= 0x80000000u;
	}
	for (i = 0; i < NFIXED_STRINGS; i++)
		pb_string(b, PROFILE_STRING_TABLE, fixed_strings[i]);
	for (i = 0; i < nstrings - NFIXED_STRINGS; i++)
		pb_string(b, PROFILE_STRING_TABLE, t->syms[order[i]]);
	pb_uint(b, PROFILE_DEFAULT_SAMPLE_TYPE, STR_SELF);
	free(m.buf);
	free(inner.buf);
	free(string_of);
	free(module_of);
	free(order);
}

#ifdef FTPAD_HAVE_ZLIB
/* The profile gzip'd into o, as pprof files are. */
static int write_gzip(struct out *o, const struct pb *b)
{
	z_stream z = { 0 };
	unsigned char chunk[1 << 16];
	int rc;

	/* 15 + 16: a gzip header and trailer around the deflate stream */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	z.next_in = b->buf;
	z.avail_in = (uInt)b->len;
	do {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		rc = deflate(&z, Z_FINISH);
		out_mem(o, (const char *)chunk, sizeof(chunk) - z.avail_out);
	} while (rc == Z_OK);
	deflateEnd(&z);
	return rc == Z_STREAM_END ? 0 : -1;
}

#define HAVE_GZIP 1
#else
/* The aarch64 ftpad is cross-built with no zlib for its target. */
static int write_gzip(struct out *o, const struct pb *b)
{
	(void)o, (void)b;
	return -1;
}

#define HAVE_GZIP 0
#endif

int trace_dump_pprof(struct trace *t, const char *path)
{
	struct trace_path *paths;
	struct pb b = { 0 };
	struct out *o;
	size_t npaths;
	int rc = 1;

	if (!HAVE_GZIP) {
		fputs("ftpad: error: dump --pprof: this ftpad was built without zlib, which gzips "
		      "the profile\n", stderr);
		return 1;
	}
	if (!trace_has_exits(t)) /* calls are still counted; times are 0 */
		trace_say_no_exits(t, "warning", "dump --pprof");
	npaths = trace_collect_paths(t, &paths);
	encode_profile(t, paths, npaths, &b);
	o = out_open(path);
	if (o) {
		if (write_gzip(o, &b)) /* zlib's only failure here: memory */
			o->failed = ENOMEM; /* and no half profile under the name asked for */
		rc = out_close(o) ? 1 : 0;
	}
	free(paths);
	free(b.buf);
	return rc;
}
