// SPDX-License-Identifier: MIT
// C++ shapes for the x86_64 layout tests: templates, inline functions,
// constructors, destructors, virtual functions.  Names containing "skip_"
// must get no pad.
#include <cstdio>

template <typename T> __attribute__((noinline)) T twice(T x) { return x + x; }

inline __attribute__((noinline)) int inlined_twice(int x) { return twice(x) + 1; }

struct Shape {
	explicit Shape(int s) : side(s) {}
	virtual ~Shape() { std::puts(""); }
	virtual int area() const { return side * side; }
	int side;
};

struct Square : Shape {
	explicit Square(int s) : Shape(s) {}
	int area() const override { return twice(side) * side / 2; }
};

__attribute__((no_instrument_function)) int skip_notrace(int x) { return x - 1; }

__attribute__((noinline)) int use(const Shape &s) { return s.area(); }

int main(int argc, char **)
{
	Square sq(argc + 1);
	std::printf("%d %g\n", use(sq) + inlined_twice(argc) + skip_notrace(argc), twice(2.5));
	return 0;
}
