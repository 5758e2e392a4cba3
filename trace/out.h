/* SPDX-License-Identifier: MIT */
/*
 * out.h - the viewers' output: a large buffer filled by hand (printf per
 * line costs more than the walk itself), written to stdout or to a
 * temporary file renamed over -o FILE once everything is written.
 */
#ifndef FTPAD_TRACE_OUT_H
#define FTPAD_TRACE_OUT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define OUT_BUF (1u << 20)

struct out {
	FILE *f;
	char *path, *tmp; /* -o FILE and FILE.tmp.<pid>; NULL for stdout */
	int own;          /* f was opened here and is closed by out_close() */
	size_t len;
	int failed;
	char buf[OUT_BUF];
};

/* stdout for NULL or "-"; a device or FIFO as it is; otherwise a temporary
 * beside `path`.  NULL after saying why. */
struct out *out_open(const char *path);
/* An open stream, left open by out_close(). */
struct out *out_of_file(FILE *f);
/* Whether path is a device, FIFO or socket (-o /dev/stdout, a pipe), which
 * is written to as it is: a rename would replace it with a regular file,
 * and as root that can be /dev/null. */
int out_is_special_file(const char *path);
/* Flushes, and renames the temporary over the file; 0, or -1 after saying
 * why (the temporary is removed). */
int out_close(struct out *o);
void out_flush(struct out *o);

static inline char *out_room(struct out *o, size_t n)
{
	if (o->len + n > OUT_BUF)
		out_flush(o);
	return o->buf + o->len;
}

static inline void out_mem(struct out *o, const char *s, size_t n)
{
	if (n > OUT_BUF / 2) {
		out_flush(o);
		fwrite(s, 1, n, o->f);
		return;
	}
	memcpy(out_room(o, n), s, n);
	o->len += n;
}

static inline void out_str(struct out *o, const char *s)
{
	out_mem(o, s, strlen(s));
}

static inline void out_char(struct out *o, char c)
{
	*out_room(o, 1) = c;
	o->len++;
}

static inline void out_fill(struct out *o, char c, size_t n)
{
	while (n > OUT_BUF / 2) {
		out_fill(o, c, OUT_BUF / 2);
		n -= OUT_BUF / 2;
	}
	memset(out_room(o, n), c, n);
	o->len += n;
}

/* v in decimal, right-aligned in `width` (0: as long as it is). */
static inline void out_u64w(struct out *o, uint64_t v, unsigned width)
{
	char tmp[24], *p = tmp + sizeof(tmp);

	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	while ((unsigned)(tmp + sizeof(tmp) - p) < width)
		*--p = ' ';
	out_mem(o, p, (size_t)(tmp + sizeof(tmp) - p));
}

static inline void out_u64(struct out *o, uint64_t v)
{
	out_u64w(o, v, 0);
}

static inline void out_i64(struct out *o, int64_t v)
{
	if (v < 0) {
		out_char(o, '-');
		out_u64(o, -(uint64_t)v);
	} else {
		out_u64(o, (uint64_t)v);
	}
}

/* ns as microseconds with three decimals: 1234 -> "1.234". */
static inline void out_us(struct out *o, int64_t ns)
{
	uint64_t a = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
	char *p;

	if (ns < 0)
		out_char(o, '-');
	out_u64(o, a / 1000);
	p = out_room(o, 4);
	p[0] = '.';
	p[1] = (char)('0' + a / 100 % 10);
	p[2] = (char)('0' + a / 10 % 10);
	p[3] = (char)('0' + a % 10);
	o->len += 4;
}

/* "  0" .. "999" and "000" .. "999", 4 bytes apart: a duration's digits
 * by table (out.c). */
extern char out_digits3_lead[1000][4], out_digits3[1000][4];

/* A duration below a millisecond as uftrace shows it, 10 characters at p:
 * "  1.234 us".  0 when it is not below a millisecond. */
static inline int put_us_duration(char *p, int64_t ns)
{
	if (ns < 0 || ns >= 1000000)
		return 0;
	memcpy(p, out_digits3_lead[ns / 1000], 4); /* the 4th byte is overwritten */
	p[3] = '.';
	memcpy(p + 4, out_digits3[ns % 1000], 4);
	memcpy(p + 7, " us", 3);
	return 1;
}

/* Copies n bytes in 16-byte steps (no call for a short copy): the caller
 * has room for n + 16 at dst, and src may be read up to n + 16. */
static inline char *copy_padded(char *dst, const char *src, size_t n)
{
	size_t i;

	memcpy(dst, src, 16); /* most names and prefixes: one or two copies */
	if (n > 16) {
		memcpy(dst + 16, src + 16, 16);
		for (i = 32; i < n; i += 16)
			memcpy(dst + i, src + i, 16);
	}
	return dst + n;
}

/* A duration as uftrace shows it, 10 characters: "  1.234 us", " 12.000 ms". */
void out_duration(struct out *o, int64_t ns);

/* s as a JSON string, quotes included. */
void out_json_str(struct out *o, const char *s);

#endif
