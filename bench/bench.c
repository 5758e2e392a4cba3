/* SPDX-License-Identifier: MIT */
/*
 * bench.c - the cost of one call to a small function, built once per kind
 * of entry instrumentation by bench/run.py, which runs every build in the
 * same session and prints ratios against the plain call.
 *
 *   bench N ROUNDS   ROUNDS timed loops of N calls; prints the fastest
 *                    round as "ns_per_call=..." and the checksum
 *
 * Build-time switches: -DFTPAD_ENABLE (register an ops with an empty
 * callback on leaf), -DXRAY_PATCH (an empty XRay handler, sleds patched).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef FTPAD_ENABLE
#include "ftpad.h"
#endif

#ifdef XRAY_PATCH
/* xray/xray_interface.h is C++ only; these are its extern "C" calls. */
extern int __xray_set_handler(void (*entry)(int, int));
extern int __xray_patch(void);
#define XRAY_PATCHING_SUCCESS 1
__attribute__((xray_never_instrument)) static void xray_empty(int id, int type)
{
	(void)id, (void)type;
}
#endif

#ifdef FTPAD_ENABLE
static void ftpad_empty(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
			struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
}

static struct ftpad_ops ops = { .func = ftpad_empty };
#endif

/* The function whose calls are measured: small, never inlined. */
__attribute__((noinline)) int leaf(int x)
{
	return x * 3 + 1;
}

static void enable_tracing(void)
{
#ifdef FTPAD_ENABLE
	int err = ftpad_set_filter(&ops, "leaf", 1);

	if (!err)
		err = ftpad_register_ops(&ops);
	if (err) {
		fprintf(stderr, "bench: ftpad: %s\n", ftpad_strerror(err));
		exit(1);
	}
#endif
#ifdef XRAY_PATCH
	if (__xray_set_handler(xray_empty) != 1 || __xray_patch() != XRAY_PATCHING_SUCCESS) {
		fprintf(stderr, "bench: XRay patching failed\n");
		exit(1);
	}
#endif
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	double best = 1e30;
	unsigned int sum = 0;

	if (n < 1 || rounds < 1) {
		fprintf(stderr, "usage: bench CALLS ROUNDS\n");
		return 2;
	}
	enable_tracing();
	for (int r = 0; r < rounds; r++) {
		double t0 = now_ns(), t;

		for (long i = 0; i < n; i++)
			sum += leaf((int)i);
		t = (now_ns() - t0) / n;
		best = t < best ? t : best;
	}
	printf("ns_per_call=%.3f checksum=%u\n", best, sum);
	return 0;
}
