// SPDX-License-Identifier: MIT
// except.cc - what tests/trace/test_trace_trees.py records of C++ exceptions:
// ex_c throws through ex_b, caught in ex_a; then re_b throws, re_a catches
// and rethrows, and main catches it.  leaf() after each catch.
#include <stdexcept>

extern "C" {

#ifdef __clang__
#define TRACED __attribute__((noinline))
#else
#define TRACED __attribute__((noinline, noclone))
#endif
#define KEEP(x) __asm__ volatile("" : "+r"(x))

TRACED int leaf(int x)
{
	return x + 1;
}

TRACED int ex_c(int x)
{
	if (x > 0)
		throw std::runtime_error("ex_c");
	return x;
}

TRACED int ex_b(int x)
{
	int r = ex_c(x);

	KEEP(r);
	return r;
}

TRACED int ex_a(int x)
{
	try {
		int r = ex_b(x);

		KEEP(r);
		return r;
	} catch (const std::exception &) {
		return leaf(x);
	}
}

TRACED int re_b(int x)
{
	int r = ex_c(x);

	KEEP(r);
	return r;
}

TRACED int re_a(int x)
{
	try {
		int r = re_b(x);

		KEEP(r);
		return r;
	} catch (...) {
		int r = leaf(x);

		KEEP(r);
		throw;
	}
}

} // extern "C": the names are the same from both compilers, unmangled

int main()
{
	int r = ex_a(1);

	KEEP(r);
	try {
		r = re_a(2);
	} catch (const std::exception &) {
		r = leaf(3);
	}
	KEEP(r);
	return 0;
}
