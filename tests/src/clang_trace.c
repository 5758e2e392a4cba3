/* SPDX-License-Identifier: MIT */
/* libftpad tracing a program built by clang with the plugin, on x86_64 and
 * (under qemu-aarch64) on aarch64; tests/plugins/test_clang_pass.py checks what it
 * prints against the ELF file.  Only the f_* functions are padded.  An ops
 * on f_* prints one line per call:
 *     event NAME ip=0x... parent=0x... args=A,B,...
 * then the results, which must be the same traced and untraced, and where
 * main is. */
#include <ftpad.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE long f_add(long a, long b)
{
	return a + b;
}

NOINLINE long f_ten(long a, long b, long c, long d, long e, long f, long g, long h, long i,
		    long j)
{
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j;
}

NOINLINE long f_caller(long x)
{
	return f_add(x, 1) * 3;
}

static volatile long in[3] = { 2, 3, 10 };

NOINLINE long call_all(void)
{
	return f_add(in[0], in[1]) + f_ten(1, 2, 3, 4, 5, 6, 7, 8, 9, 10) + f_caller(in[2]);
}

static void on_entry(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		     struct ftpad_regs *regs)
{
	(void)ops;
	printf("event %s ip=%#lx parent=%#lx args=", ftpad_lookup_name(ip), ip, parent_ip);
	for (unsigned int n = 0; n < 10; n++)
		printf("%s%ld", n ? "," : "", (long)ftpad_regs_get_argument(regs, n));
	printf("\n");
}

static struct ftpad_ops ops = { .func = on_entry };

int main(void)
{
	long untraced = call_all(), traced;
	int err = ftpad_set_filter(&ops, "f_*", 1);

	if (!err)
		err = ftpad_register_ops(&ops);
	if (err) {
		fprintf(stderr, "clang_trace: %s\n", ftpad_strerror(err));
		return 2;
	}
	traced = call_all();
	ftpad_unregister_ops(&ops);
	printf("untraced=%ld traced=%ld after=%ld\n", untraced, traced, call_all());
	printf("main=%p\n", (void *)main); /* the load bias of a PIE */
	return 0;
}
