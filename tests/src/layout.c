/* SPDX-License-Identifier: MIT */
/* Functions of every shape the x86_64 layout tests look at.  Names that
 * start with "skip_" must get no pad; every other function must get one. */
#include <stdarg.h>
#include <stdio.h>

int leaf(int x) { return x + 1; }

__attribute__((noinline)) static int helper(int x) { return leaf(x) * 2; }

__attribute__((cold, noinline)) int rarely(int x) { return x * 7 - 3; }

int summed(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += helper(i);
	return s;
}

int variadic(int n, ...)
{
	va_list ap;
	int s = 0;
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		s += va_arg(ap, int);
	va_end(ap);
	return s;
}

double scaled(double x, double y) { return x * y + 0.5; }

__attribute__((no_instrument_function)) int skip_notrace(int x) { return x - 1; }

__attribute__((patchable_function_entry(0, 0))) int skip_unpadded(int x) { return x ^ 5; }

/* noinline: GCC 12 ignores naked on aarch64, and the asm "ret" must not
 * end its caller. */
__attribute__((naked, noinline)) void skip_naked(void) { __asm__("ret"); }

int main(int argc, char **argv)
{
	(void)argv;
	skip_naked();
	printf("%d\n", summed(argc) + rarely(argc) + variadic(2, argc, 3) + skip_notrace(argc) +
	       skip_unpadded(argc) + (int)scaled(argc, 2.0));
	return 0;
}
