/* SPDX-License-Identifier: MIT */
/*
 * alloc.c - memory for the runtime's own tables, straight from mmap, and a
 * sort and a search of sorted addresses that need no memory.
 *
 * libftpad never calls malloc: the very early tracer (early.c) discovers
 * sites and patches them before any constructor runs, when a program's own
 * malloc may not be ready (or may itself be traced).  The runtime makes few
 * allocations, most of them large (a module's sites, an ops' entries), so
 * one mapping each costs little.  mmap is also async-signal-safe.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* In front of every block: the size of its mapping; 16 keeps the block
 * 16-aligned. */
#define HEADER 16

static size_t mapping_size(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (size + HEADER + page - 1) & ~(page - 1);
}

void *ftpad_alloc(size_t size)
{
	size_t total = mapping_size(size);
	char *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	*(size_t *)p = total;
	return p + HEADER;
}

void ftpad_free(void *block)
{
	char *p = block ? (char *)block - HEADER : NULL;

	if (p)
		munmap(p, *(size_t *)p);
}

void *ftpad_realloc(void *block, size_t size)
{
	char *p = block ? (char *)block - HEADER : NULL;
	size_t total = mapping_size(size);

	if (!p)
		return ftpad_alloc(size);
	if (total <= *(size_t *)p)
		return block;
	p = mremap(p, *(size_t *)p, total, MREMAP_MAYMOVE);
	if (p == MAP_FAILED)
		return NULL;
	*(size_t *)p = total;
	return p + HEADER;
}

static void swap(char *a, char *b, size_t size)
{
	while (size--) {
		char t = *a;

		*a++ = *b;
		*b++ = t;
	}
}

static void sift_down(char *base, size_t root, size_t n, size_t size,
		      int (*cmp)(const void *, const void *))
{
	for (size_t child; (child = 2 * root + 1) < n; root = child) {
		if (child + 1 < n && cmp(base + child * size, base + (child + 1) * size) < 0)
			child++;
		if (cmp(base + root * size, base + child * size) >= 0)
			return;
		swap(base + root * size, base + child * size, size);
	}
}

/* Heapsort: qsort(3) may call malloc. */
void ftpad_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	char *b = base;

	for (size_t i = n / 2; i-- > 0;)
		sift_down(b, i, n, size, cmp);
	for (size_t end = n; end-- > 1;) {
		swap(b, b + end * size, size);
		sift_down(b, 0, end, size, cmp);
	}
}

bool ftpad_sorted_has(const uintptr_t *v, size_t n, uintptr_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] == x)
			return true;
		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}
