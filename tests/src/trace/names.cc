// SPDX-License-Identifier: MIT
// names.cc - C++ names for tests/trace/test_trace_names.py: methods, a
// constructor, a template with two arguments, namespaces, an operator.
// main calls each a fixed number of times; the viewers must show them
// demangled, as a C++ developer writes them.
#ifdef __clang__
#define TRACED __attribute__((noinline))
#else
#define TRACED __attribute__((noinline, noclone))
#endif
#define KEEP(x) __asm__ volatile("" : "+r"(x))

namespace geo {

struct Point {
	long x, y;
	TRACED Point(long x0, long y0) : x(x0), y(y0) { KEEP(x); }
	TRACED long norm1() const;
};

TRACED long Point::norm1() const
{
	long r = (x < 0 ? -x : x) + (y < 0 ? -y : y);

	KEEP(r);
	return r;
}

TRACED Point operator+(const Point &a, const Point &b)
{
	return Point(a.x + b.x, a.y + b.y);
}

namespace detail {

template <typename A, typename B> TRACED long pair_sum(A a, B b)
{
	long r = (long)a + (long)b;

	KEEP(r);
	return r;
}

} // namespace detail
} // namespace geo

int main()
{
	long total = 0;

	for (int i = 0; i < 3; i++) {
		geo::Point p(i, -i), q(2, 3);

		total += (p + q).norm1();
		total += geo::detail::pair_sum<int, long>(i, 2L);
	}
	total += geo::detail::pair_sum<char, short>('a', (short)1);
	KEEP(total);
	return total == 0;
}
