// SPDX-License-Identifier: MIT
// Exit sites in C++ (docs/format.md "Exit sites"): exceptions thrown
// through functions that have exit sites, destructors run on the way, and
// an inline function in a COMDAT group.
#include <cstdio>
#include <stdexcept>
#include <string>

#define NOINLINE __attribute__((noinline))

struct Guard {
	const char *what;
	~Guard() { std::printf("unwound %s\n", what); }
};

NOINLINE int thrower(int x)
{
	if (x > 2)
		throw std::runtime_error("too big: " + std::to_string(x));
	return x * 2;
}

// An exception passes through: its exit sites are not reached.
NOINLINE int middle(int x)
{
	Guard g{"middle"};
	int r = thrower(x);
	return r + 1;
}

inline NOINLINE int twice(int x) { return 2 * x; } // COMDAT

NOINLINE int catcher(int x)
{
	try {
		return middle(x) + twice(x);
	} catch (const std::exception &e) {
		std::printf("caught %s\n", e.what());
		return -1;
	}
}

NOINLINE void rethrower(int x)
{
	try {
		middle(x);
	} catch (...) {
		std::printf("rethrow\n");
		throw;
	}
}

int main()
{
	for (int i = 0; i < 5; i++)
		std::printf("catcher(%d) = %d\n", i, catcher(i));
	try {
		rethrower(9);
	} catch (const std::runtime_error &e) {
		std::printf("outer %s\n", e.what());
	}
	return 0;
}
