/* SPDX-License-Identifier: MIT */
/*
 * ftpad_clock.h - the recorder's clock (<ftpad_trace.h>, info's clock=): the TSC
 * on x86_64, CNTVCT_EL0 on aarch64.  Both count the same on every core, so
 * `ftpad record` reads it too, for the trace's last clock_sync= point.
 */
#ifndef FTPAD_CLOCK_H
#define FTPAD_CLOCK_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

static inline uint64_t ftpad_trace_clock(void)
{
#if defined(__x86_64__)
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
#else
	uint64_t v;

	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
	return v;
#endif
}

/* One clock_sync= line of info (docs/format.md): the clock's ticks and
 * CLOCK_MONOTONIC's nanoseconds, read together, into buf. */
static inline void ftpad_clock_sync_line(char *buf, size_t size)
{
	struct timespec ts;
	uint64_t t0 = ftpad_trace_clock(), t1;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	t1 = ftpad_trace_clock();
	snprintf(buf, size, "clock_sync=%llu %llu\n", (unsigned long long)(t0 + (t1 - t0) / 2),
		 (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
}

#endif
