// SPDX-License-Identifier: MIT
#include <cstdio>
#include "comdat.h"
int from_a(int x);
int from_b(int x) { return shared_inline(x) + shared_twice(x) + 1; }
int unused_b(int x) { return x - 42; }
int main(int argc, char **)
{
	std::printf("%d\n", from_a(argc) + from_b(argc));
	return 0;
}
