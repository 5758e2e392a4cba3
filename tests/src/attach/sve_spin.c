/* SPDX-License-Identifier: MIT */
/*
 * sve_spin.c - one thread, nearly always in an SVE loop whose sum lives in
 * a Z register across the whole round (tests/attach/test_attach_aarch64.py).  The
 * frame ftpad attach restores a thread from holds FP/SIMD state only, so
 * such a thread must never be the one it runs its stub on: restored, the
 * lanes past the first 128 bits would be zero and the round's sum wrong.
 * Built with the aarch64 plugin (attach needs pads) and +sve.
 *
 *   sve_spin STOPFILE   rounds until STOPFILE exists, then
 *                       "sve rounds=R errors=E lanes=L"; exit 0 iff E is 0
 */
#include <arm_sve.h>
#include <stdio.h>
#include <unistd.h>

#define STEPS 20000000L

/* 1 + 2 + ... + lanes, STEPS times, in one Z register. */
__attribute__((noinline)) long round_sum(long steps)
{
	svbool_t all = svptrue_b64();
	svint64_t acc = svdup_s64(0), step = svindex_s64(1, 1);

	for (long i = 0; i < steps; i++) {
		acc = svadd_x(all, acc, step);
		__asm__ volatile("" : "+w"(acc)); /* no closed form: a real loop */
	}
	return svaddv(all, acc);
}

int main(int argc, char **argv)
{
	long lanes = (long)svcntd(), want = STEPS * (lanes * (lanes + 1) / 2);
	long rounds = 0, errors = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: sve_spin STOPFILE\n");
		return 2;
	}
	printf("ready pid=%d lanes=%ld\n", (int)getpid(), lanes);
	fflush(stdout);
	while (access(argv[1], F_OK)) {
		long got = round_sum(STEPS);

		rounds++;
		if (got != want) {
			fprintf(stderr, "sve_spin: FAIL round %ld: sum %ld, want %ld\n", rounds, got,
				want);
			errors++;
		}
	}
	printf("sve rounds=%ld errors=%ld lanes=%ld\n", rounds, errors, lanes);
	return errors != 0;
}
