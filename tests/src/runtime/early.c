/* SPDX-License-Identifier: MIT */
/*
 * early.c - very early tracing (FTPAD_EARLY): a program whose library and
 * whose own constructor call traced functions before main.  It counts the
 * calls to malloc, calloc and realloc (its own definitions, which every
 * module uses) so that tests/runtime/test_runtime_early.py can check that libftpad
 * called none of them before the constructors ran.
 */
#include <stddef.h>
#include <stdio.h>

void *__libc_malloc(size_t), *__libc_calloc(size_t, size_t), *__libc_realloc(void *, size_t);
long e_lib_work(long);

static unsigned long mallocs;

unsigned long early_mallocs(void)
{
	return __atomic_load_n(&mallocs, __ATOMIC_RELAXED);
}

void *malloc(size_t size)
{
	__atomic_fetch_add(&mallocs, 1, __ATOMIC_RELAXED);
	return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	__atomic_fetch_add(&mallocs, 1, __ATOMIC_RELAXED);
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	__atomic_fetch_add(&mallocs, 1, __ATOMIC_RELAXED);
	return __libc_realloc(p, size);
}

__attribute__((noipa)) long e_ctor_work(long x)
{
	return x * 2;
}

static volatile long sink;

__attribute__((noipa)) static void prog_init_calls(void)
{
	sink = e_ctor_work(2); /* not a tail call */
}

__attribute__((constructor)) static void prog_init(void)
{
	printf("program constructor: %lu mallocs before\n", early_mallocs());
	prog_init_calls();
}

__attribute__((noipa)) long e_main_work(long x)
{
	return x * 3;
}

int main(void)
{
	printf("main: %ld\n", e_main_work(3) + e_lib_work(4));
	return 0;
}
