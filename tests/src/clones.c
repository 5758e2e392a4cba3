/* SPDX-License-Identifier: MIT */
/* Functions GCC clones at -O2 (.isra, .constprop, .part) and a GNU C nested
 * function: each clone is an entry of its own and gets a pad. */
#include <stdio.h>
#include <stdlib.h>

struct point { long x, y, z; };

/* IPA-SRA: only p->x is used, so the clone takes it by value. */
static __attribute__((noinline)) long scale(const struct point *p) { return p->x * 3; }

/* IPA-CP: every call passes k = 7. */
static __attribute__((noinline)) long mul(long v, long k) { return v * k + k; }

/* Partial inlining: the likely early return is inlined, the rest becomes
 * lookup.part.0. */
static long cached_key = -1, cached_index;

long lookup(long *table, long n, long key)
{
	if (__builtin_expect(key == cached_key, 1))
		return cached_index;
	cached_key = key;
	for (long i = 0; i < n; i++)
		if (table[i] == key) {
			printf("found %ld at %ld\n", key, i);
			return cached_index = i;
		}
	fprintf(stderr, "missing %ld\n", key);
	return cached_index = -2;
}

/* Partial inlining (as GCC's own fnsplit tests): the unlikely test is
 * inlined into the caller and the rest becomes warn_if.part.0. */
__attribute__((noinline)) void note(long v) { printf("note %ld\n", v); }

void warn_if(long v)
{
	if (__builtin_expect(v > 100, 0)) {
		for (long j = 0; j < v; j++)
			note(j);
		for (long j = 0; j < v; j += 2)
			note(j + 1);
		for (long j = 0; j < v; j += 3)
			printf("%ld %ld\n", j, v);
		for (long j = 0; j < v; j += 5)
			fprintf(stderr, "%ld %ld\n", j, v * j);
	}
}

long nested_sum(long n)
{
	long base = n;
	__attribute__((noinline)) long add(long k) { return base + k; }
	long s = 0;
	for (long i = 0; i < n; i++)
		s += add(i);
	return s;
}

int main(int argc, char **argv)
{
	struct point p = { argc, 2, 3 };
	long table[4] = { 5, 6, 7, argc };
	(void)argv;
	long r = scale(&p) + mul(argc, 7) + mul(argc + 1, 7) + nested_sum(argc + 3);
	r += lookup(table, 4, 7) + lookup(table, 4, 7) + lookup(table, 4, argc);
	for (long i = 0; i < 1000; i++)
		warn_if(i / 10);
	warn_if(argc);
	printf("%ld\n", r);
	return 0;
}
