/* SPDX-License-Identifier: MIT */
/*
 * ipa_ra_aarch64.c - the IPA-RA hazard on aarch64, as tests/src/ipa_ra.c on
 * x86_64: caller() keeps many values live across a call to a small traced
 * leaf.  With IPA-RA on, GCC sees that leaf() leaves most call-clobbered
 * registers alone and keeps values there; an enabled site then runs a
 * callback that clobbers every call-clobbered register, and the caller's
 * result goes wrong.  Exit 0 and "OK" when the result stays right.
 */
#include <ftpad.h>
#include <stdio.h>

volatile int sink;

__attribute__((noinline)) int leaf(int x)
{
	sink = x;
	return x + 1;
}

__attribute__((noinline)) long caller(long a, long b, long c, double d, double e)
{
	long v0 = a * b, v1 = b * c, v2 = a * c, v3 = a * a, v4 = b * b, v5 = c * c;
	long v6 = a * b * c, v7 = (a + 1) * (b + 2), v8 = (b + 3) * (c + 4), v9 = (a + 5) * (c + 6);
	double d0 = d * e, d1 = d * d, d2 = e * e, d3 = d * 3.5, d4 = e * 4.5, d5 = d * e * 5.5;
	double d6 = (d + 1) * (e + 2), d7 = (d + 3) * (e + 4), d8 = (d + 5) * (e + 6);
	double d9 = (d + 7) * (e + 8);
	int r = leaf((int)a);
	return v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7 + v8 + v9 + r +
	       (long)(d0 + d1 + d2 + d3 + d4 + d5 + d6 + d7 + d8 + d9);
}

static volatile unsigned long calls;

/* Writes garbage into every call-clobbered register of the AAPCS64. */
__attribute__((no_instrument_function)) static void clobber_all(unsigned long ip,
	unsigned long parent_ip, struct ftpad_ops *ops, struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	__asm__ volatile(
		"mov x0, #0x5a5a\n\tmov x1, x0\n\tmov x2, x0\n\tmov x3, x0\n\tmov x4, x0\n\t"
		"mov x5, x0\n\tmov x6, x0\n\tmov x7, x0\n\tmov x8, x0\n\tmov x9, x0\n\t"
		"mov x10, x0\n\tmov x11, x0\n\tmov x12, x0\n\tmov x13, x0\n\tmov x14, x0\n\t"
		"mov x15, x0\n\tmov x16, x0\n\tmov x17, x0\n\t"
		"dup v0.2d, x0\n\tmov v1.16b, v0.16b\n\tmov v2.16b, v0.16b\n\t"
		"mov v3.16b, v0.16b\n\tmov v4.16b, v0.16b\n\tmov v5.16b, v0.16b\n\t"
		"mov v6.16b, v0.16b\n\tmov v7.16b, v0.16b\n\tmov v16.16b, v0.16b\n\t"
		"mov v17.16b, v0.16b\n\tmov v18.16b, v0.16b\n\tmov v19.16b, v0.16b\n\t"
		"mov v20.16b, v0.16b\n\tmov v21.16b, v0.16b\n\tmov v22.16b, v0.16b\n\t"
		"mov v23.16b, v0.16b\n\tmov v24.16b, v0.16b\n\tmov v25.16b, v0.16b\n\t"
		"mov v26.16b, v0.16b\n\tmov v27.16b, v0.16b\n\tmov v28.16b, v0.16b\n\t"
		"mov v29.16b, v0.16b\n\tmov v30.16b, v0.16b\n\tmov v31.16b, v0.16b"
		::: "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11",
		    "x12", "x13", "x14", "x15", "x16", "x17",
		    "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v16", "v17", "v18", "v19",
		    "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30",
		    "v31", "cc", "memory");
	calls++;
}

static struct ftpad_ops ops = { .func = clobber_all };

int main(void)
{
	long expected = caller(3, 5, 7, 1.25, 2.5);
	int err = ftpad_set_filter(&ops, "leaf", 1);
	if (!err)
		err = ftpad_register_ops(&ops);
	if (err) {
		fprintf(stderr, "ipa_ra_aarch64: %s\n", ftpad_strerror(err));
		return 2;
	}
	long got = caller(3, 5, 7, 1.25, 2.5);
	ftpad_unregister_ops(&ops);
	printf("%s expected=%ld got=%ld calls=%lu\n", got == expected ? "OK" : "MISMATCH",
	       expected, got, calls);
	return got == expected && calls == 1 ? 0 : 1;
}
