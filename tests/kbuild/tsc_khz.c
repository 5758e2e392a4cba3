// SPDX-License-Identifier: MIT
// The host TSC's frequency in kHz, for tsc_early_khz= on the x86_64 guests:
// under QEMU TCG the guest's TSC counts at the host's rate, and the test
// kernel has no HPET or PM timer to calibrate it against, so without this
// its very early trace can only give times in TSC ticks.
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

static double seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_RAW, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(void)
{
	double t0 = seconds();
	unsigned long long c0 = __rdtsc();
	while (seconds() - t0 < 0.2)
		;
	unsigned long long c1 = __rdtsc();
	double t1 = seconds();
	printf("%.0f\n", (double)(c1 - c0) / (t1 - t0) / 1000);
	return 0;
}
