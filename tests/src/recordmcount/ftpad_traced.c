/* SPDX-License-Identifier: MIT */
/*
 * Functions built by plain gcc or clang, without the ftpad plugin, with
 * -fpatchable-function-entry=N,M or -pg -mfentry; recordmcount-ng
 * --format=ftpad then turns their pads into ftpad records.
 * tests/recordmcount/test_recordmcount_ftpad.py links this with ftpad_driver.c, which
 * traces every function libftpad finds, and expects exactly the t_* ones
 * below except t_untraced.  NOTRACE comes from the command line: the
 * attribute that keeps the compiler from padding one function.
 */
#ifndef NOTRACE
#define NOTRACE
#endif
#define NOINLINE __attribute__((noinline))

NOINLINE long t_add(long a, long b)
{
	return a + b;
}

/* Static and called through a pointer only, so no clone renames it. */
NOINLINE static long t_hidden(long x)
{
	return x * 3;
}

long (*volatile t_hidden_ptr)(long) = t_hidden;

NOINLINE __attribute__((weak)) long t_weak(long x)
{
	return x - 1;
}

NOINLINE NOTRACE long t_untraced(long x)
{
	return x + 100;
}

/* Seven arguments: the last one on the stack on x86_64. */
NOINLINE long t_seven(long a, long b, long c, long d, long e, long f, long g)
{
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g;
}

NOINLINE long t_outer(long x)
{
	long r = t_add(x, 1);

	r += t_hidden_ptr(x);
	return r;
}

/* What the driver calls: every function above, in this order. */
long t_run(long x)
{
	long r = t_outer(x);

	r += t_weak(x);
	r += t_untraced(x);
	r += t_seven(1, 2, 3, 4, 5, 6, 7);
	return r;
}
