/* SPDX-License-Identifier: MIT */
/* out.c - see out.h. */
#define _GNU_SOURCE
#include "out.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int out_is_special_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

struct out *out_of_file(FILE *f)
{
	struct out *o = calloc(1, sizeof(*o));

	if (o)
		o->f = f;
	return o;
}

struct out *out_open(const char *path)
{
	struct out *o;

	if (!path || !strcmp(path, "-"))
		return out_of_file(stdout);
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->path = strdup(path);
	if (out_is_special_file(path)) {
		o->f = fopen(path, "w");
		o->own = 1;
		if (o->f)
			return o;
		fprintf(stderr, "ftpad: error: %s: %s\n", path, strerror(errno));
		free(o->path);
		free(o);
		return NULL;
	}
	if (asprintf(&o->tmp, "%s.tmp.%d", path, (int)getpid()) < 0)
		exit(1);
	o->f = fopen(o->tmp, "w");
	if (!o->f) {
		fprintf(stderr, "ftpad: error: %s: %s\n", o->tmp, strerror(errno));
		free(o->tmp);
		free(o->path);
		free(o);
		return NULL;
	}
	return o;
}

void out_flush(struct out *o)
{
	if (o->len && fwrite(o->buf, 1, o->len, o->f) != o->len)
		o->failed = errno ? errno : EIO;
	o->len = 0;
}

int out_close(struct out *o)
{
	int rc = 0;

	out_flush(o);
	if (fflush(o->f) || ferror(o->f))
		o->failed = errno ? errno : EIO;
	if (o->tmp) {
		if (fclose(o->f))
			o->failed = errno ? errno : EIO;
		if (!o->failed && rename(o->tmp, o->path))
			o->failed = errno;
		if (o->failed)
			unlink(o->tmp);
	} else if (o->own && fclose(o->f)) {
		o->failed = errno ? errno : EIO;
	}
	if (o->failed && o->failed != EPIPE) {
		fprintf(stderr, "ftpad: error: %s: %s\n", o->path ? o->path : "standard output",
			strerror(o->failed));
		rc = -1;
	}
	free(o->tmp);
	free(o->path);
	free(o);
	return rc;
}

char out_digits3_lead[1000][4], out_digits3[1000][4];

/* Filled before main: the tables are 8 KB, cheaper made than spelled. */
__attribute__((constructor)) static void fill_digit_tables(void)
{
	unsigned i;

	for (i = 0; i < 1000; i++) {
		out_digits3[i][0] = (char)('0' + i / 100);
		out_digits3[i][1] = (char)('0' + i / 10 % 10);
		out_digits3[i][2] = (char)('0' + i % 10);
		out_digits3_lead[i][0] = i >= 100 ? out_digits3[i][0] : ' ';
		out_digits3_lead[i][1] = i >= 10 ? out_digits3[i][1] : ' ';
		out_digits3_lead[i][2] = out_digits3[i][2];
	}
}

void out_duration(struct out *o, int64_t ns)
{
	static const char *const unit[] = { " us", " ms", "  s" };
	uint64_t v = ns < 0 ? 0 : (uint64_t)ns, frac;
	unsigned i = 0;

	if (put_us_duration(out_room(o, 10), ns)) { /* the common case */
		o->len += 10;
		return;
	}
	/* uftrace's units: the largest that keeps the integer part below 1000. */
	frac = v % 1000;
	v /= 1000;
	while (v >= 1000 && i < 2) {
		frac = v % 1000;
		v /= 1000;
		i++;
	}
	out_u64w(o, v, 3);
	out_char(o, '.');
	out_u64w(o, frac / 100, 0);
	out_u64w(o, frac / 10 % 10, 0);
	out_u64w(o, frac % 10, 0);
	out_str(o, unit[i]);
}

/* The length of the valid UTF-8 sequence at s, or 0. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n, i;

	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0;
	n = s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
	for (i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* A symbol name is bytes; JSON is UTF-8: a byte that is not part of valid
 * UTF-8 becomes U+FFFD, so that the file always parses. */
void out_json_str(struct out *o, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	out_char(o, '"');
	while (*s) {
		unsigned char c = (unsigned char)*s;
		size_t n;

		if (c == '"' || c == '\\') {
			out_char(o, '\\');
			out_char(o, (char)c);
		} else if (c < 0x20) {
			out_str(o, "\\u00");
			out_char(o, hex[c >> 4]);
			out_char(o, hex[c & 15]);
		} else if (c < 0x80) {
			out_char(o, (char)c);
		} else if ((n = utf8_len((const unsigned char *)s))) {
			out_mem(o, s, n);
			s += n;
			continue;
		} else {
			out_str(o, "\\ufffd");
		}
		s++;
	}
	out_char(o, '"');
}
