// SPDX-License-Identifier: MIT
// exits.cc - C++ exceptions thrown through functions with exit sites, for
// tests/plugins/test_exit_sites.py: the EH tables must still unwind through them,
// run their cleanups, and land in the right handler.
#include <cstdio>
#include <stdexcept>
#include <string>

namespace {

int destroyed;

struct guard {
	int id;
	~guard() { destroyed += id; }
};

} // namespace

__attribute__((noinline)) int thrower(int x)
{
	if (x > 2)
		throw std::runtime_error("too big: " + std::to_string(x));
	return x + 1;
}

// A cleanup (the guard) and several returns around a call that throws.
__attribute__((noinline)) int middle(int x)
{
	guard g{x};
	if (x == 0)
		return 100;
	int r = thrower(x);
	if (r > 2)
		return r * 2;
	return r;
}

// Catches, then rethrows through itself.
__attribute__((noinline)) int rethrower(int x)
{
	try {
		return middle(x) + 1;
	} catch (const std::runtime_error &) {
		destroyed += 1000;
		throw;
	}
}

// An inline function: COMDAT, its records in its group.
inline int twice(int x)
{
	return x * 2;
}

int main(int argc, char **)
{
	int total = 0;
	for (int i = argc - 1; i < 5; i++) {
		try {
			total += rethrower(i);
		} catch (const std::exception &e) {
			std::printf("caught %s\n", e.what());
		}
	}
	int (*volatile f)(int) = twice;
	std::printf("total %d destroyed %d twice %d\n", total, destroyed, f(argc));
	return 0;
}
