/* SPDX-License-Identifier: MIT */
/*
 * regs.c - functions whose arguments and return values use every register
 * the fast recording path must leave alone (trampoline_x86_64.S "Fast
 * recording"): six integer arguments and more on the stack, eight SSE
 * arguments, a vararg call (al counts the vector registers), long double
 * arguments and x87 returns (st(0), st(1)), two-register returns in
 * rax:rdx and xmm0:xmm1, and an indirect tail call (its target in a
 * register, every argument live at the jump).  Each is called many times
 * through volatile pointers, so that chunks fill and change under the
 * calls, and each result is printed exactly (%a, %La): a recorded run must
 * print what an unrecorded one prints.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

struct pair { long a, b; };
struct dpair { double a, b; };

__attribute__((noinline)) long ints(long a, long b, long c, long d, long e, long f, long g, long h)
{
	return a + 3 * b + 5 * c + 7 * d + 11 * e + 13 * f + 17 * g + 19 * h;
}

__attribute__((noinline)) double dbls(double a, double b, double c, double d, double e, double f,
				      double g, double h)
{
	return a + b / 3 + c * 5 - d / 7 + e * 11 - f / 13 + g * 17 - h / 19;
}

__attribute__((noinline)) double vsum(int n, ...)
{
	va_list ap;
	double s = 0;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		s += va_arg(ap, double) * (i + 1);
	va_end(ap);
	return s;
}

__attribute__((noinline)) long double ldiv3(long double a, long double b)
{
	return a / 3 + b / 7;
}

__attribute__((noinline)) long double _Complex cld(long double re, long double im)
{
	return re / 3 + im / 7 * 1.0il;
}

__attribute__((noinline)) struct pair two(long a, long b)
{
	return (struct pair){ a * 7, b * 11 + (1l << 40) };
}

__attribute__((noinline)) struct dpair dtwo(double a, double b)
{
	return (struct dpair){ a / 3, b / 7 };
}

__attribute__((noinline)) long target(long a, long b, long c, long d, long e, long f)
{
	return a - 2 * b + 3 * c - 4 * d + 5 * e - 6 * f;
}

long (*volatile tail_to)(long, long, long, long, long, long) = target;

__attribute__((noinline)) long tail(long a, long b, long c, long d, long e, long f)
{
	return tail_to(a + 1, b, c, d, e, f); /* an indirect tail call */
}

long (*volatile p_ints)(long, long, long, long, long, long, long, long) = ints;
double (*volatile p_dbls)(double, double, double, double, double, double, double, double) = dbls;
double (*volatile p_vsum)(int, ...) = vsum;
long double (*volatile p_ldiv3)(long double, long double) = ldiv3;
long double _Complex (*volatile p_cld)(long double, long double) = cld;
struct pair (*volatile p_two)(long, long) = two;
struct dpair (*volatile p_dtwo)(double, double) = dtwo;
long (*volatile p_tail)(long, long, long, long, long, long) = tail;

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, si = 0, st = 0, sp = 0;
	double sd = 0, sv = 0, sdp = 0;
	long double sl = 0, sre = 0, sim = 0;

	for (long i = 0; i < n; i++) {
		double x = i + 0.25;
		long double lx = i + 1.0L / 3;
		struct pair p = p_two(i, -i);
		struct dpair dp = p_dtwo(x, -x);
		long double _Complex c = p_cld(lx, -lx);

		si += p_ints(i, i + 1, i + 2, i + 3, i + 4, i + 5, i + 6, i + 7);
		sd += p_dbls(x, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6, x + 7);
		sv += p_vsum(3, x, x * 2, x * 3);
		sl += p_ldiv3(lx, lx * 2);
		sre += __real__ c, sim += __imag__ c;
		sp += p.a ^ p.b;
		sdp += dp.a - dp.b;
		st += p_tail(i, i + 1, i + 2, i + 3, i + 4, i + 5);
	}
	printf("ints %ld\ndbls %a\nvsum %a\nldouble %La\ncomplex %La %La\npair %ld\n"
	       "dpair %a\ntail %ld\n", si, sd, sv, sl, sre, sim, sp, sdp, st);
	return 0;
}
