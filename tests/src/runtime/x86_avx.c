/* SPDX-License-Identifier: MIT */
/*
 * x86_avx.c - a traced function whose eight arguments are whole ymm
 * registers (__m256 and __m256d in ymm0-7, built with -mavx2), and a
 * callback that does what ordinary callbacks do: memset, strlen,
 * snprintf, whose glibc AVX2 versions end with vzeroupper, and one
 * vzeroupper of its own so that the upper halves are gone on any libc.
 * Build with the plugin padding avx_sum only (include=avx_sum), with or
 * without ops slots (ops=0: every call goes through the C dispatch).
 *
 *   x86_avx MODE   MODE: plain (no flag), regs (FTPAD_OPS_FL_SAVE_REGS),
 *                  recursion (FTPAD_OPS_FL_RECURSION: the C assist)
 *
 * Calls avx_sum untraced for the reference, then traced, and prints
 * "ok calls=N" when every traced result equals the reference.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ftpad.h"

#define ROUNDS 1000

/* FNV-1a over all 256 bits of each argument, and where it was. */
static uint64_t mix(uint64_t h, const void *v)
{
	const unsigned char *p = v;

	for (int i = 0; i < 32; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

__attribute__((noinline)) uint64_t avx_sum(__m256 a0, __m256d a1, __m256 a2, __m256d a3,
					   __m256 a4, __m256d a5, __m256 a6, __m256d a7)
{
	uint64_t h = 0xcbf29ce484222325ull;

	h = mix(h, &a0), h = mix(h, &a1), h = mix(h, &a2), h = mix(h, &a3);
	h = mix(h, &a4), h = mix(h, &a5), h = mix(h, &a6), h = mix(h, &a7);
	return h;
}

static uint64_t (*volatile call_sum)(__m256, __m256d, __m256, __m256d, __m256, __m256d, __m256,
				     __m256d) = avx_sum;
static unsigned long calls;
static volatile size_t sink;

static void on_call(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		    struct ftpad_regs *regs)
{
	char buf[256];

	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	memset(buf, 'x', sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = 0;
	sink += strlen(buf);
	sink += (size_t)snprintf(buf, sizeof(buf), "%lu %f %s", calls, 3.25 * (double)calls, "y");
	/* Whatever libc this is: the upper halves are gone. */
	__asm__ volatile("vzeroupper");
	calls++;
}

static struct ftpad_ops ops = { .func = on_call };

static uint64_t call_once(int round)
{
	float f = (float)round;
	double d = (double)round;

	return call_sum(_mm256_setr_ps(f + 1, 2, 3, 4, 5, 6, 7, f + 8),
			_mm256_setr_pd(d + 0.5, 11, 12, d + 13.5),
			_mm256_setr_ps(21, 22, 23, 24, 25, 26, 27, f + 28),
			_mm256_setr_pd(31, 32, 33, d + 34.25),
			_mm256_setr_ps(41, 42, 43, 44, 45, 46, f + 47, 48),
			_mm256_setr_pd(51, 52, d + 53.75, 54),
			_mm256_setr_ps(61, 62, 63, 64, 65, f + 66, 67, 68),
			_mm256_setr_pd(71, d + 72.125, 73, 74));
}

int main(int argc, char **argv)
{
	static uint64_t want[ROUNDS];
	unsigned long bad = 0;
	int err;

	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "regs"))
		ops.flags = FTPAD_OPS_FL_SAVE_REGS;
	else if (!strcmp(argv[1], "recursion"))
		ops.flags = FTPAD_OPS_FL_RECURSION;
	else if (strcmp(argv[1], "plain"))
		return 2;
	for (int i = 0; i < ROUNDS; i++)
		want[i] = call_once(i);
	err = ftpad_set_filter(&ops, "avx_sum", 1);
	if (!err)
		err = ftpad_register_ops(&ops);
	if (err) {
		printf("FAIL register: %d\n", err);
		return 1;
	}
	for (int i = 0; i < ROUNDS; i++)
		if (call_once(i) != want[i] && bad++ < 3)
			printf("MISMATCH round %d\n", i);
	err = ftpad_unregister_ops(&ops);
	if (err || bad || calls != ROUNDS) {
		printf("FAIL unregister=%d mismatches=%lu calls=%lu\n", err, bad, calls);
		return 1;
	}
	printf("ok calls=%lu\n", calls);
	return 0;
}
