/* SPDX-License-Identifier: MIT */
/*
 * recordmcount test source: every kind of function Linux's recordmcount
 * meets in a kernel object.  No headers, so that every cross compiler can
 * build it with -c alone.
 */
#define noinline __attribute__((noinline))
#define notrace __attribute__((no_instrument_function))
#define section(s) __attribute__((section(s)))

int sink;

noinline int global_fn(int x)
{
	return x * 3 + sink;
}

static noinline int static_fn(int x)
{
	sink += x;
	return x - 1;
}

__attribute__((weak)) noinline int weak_fn(int x)
{
	return x + 7 + sink;
}

section(".init.text") noinline int init_fn(int x)
{
	return static_fn(x) + 1;
}

/* Not a traced section: the call becomes a NOP (x86, arm, arm64). */
section(".entry.text") noinline int entry_fn(int x)
{
	return global_fn(x) * 2;
}

section(".noinstr.text") noinline int noinstr_fn(int x)
{
	return x ^ sink;
}

section(".sched.text") noinline int sched_fn(int x)
{
	return x + weak_fn(x);
}

notrace noinline int notrace_fn(int x)
{
	return x + 11;
}

int caller(int x)
{
	return global_fn(x) + static_fn(x) + weak_fn(x) + init_fn(x) + entry_fn(x) +
	       noinstr_fn(x) + sched_fn(x) + notrace_fn(x);
}
