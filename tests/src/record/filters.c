/* SPDX-License-Identifier: MIT */
/*
 * filters.c - calls of known depths and durations for `ftpad record
 * --depth` and `--time-filter` (tests/trace/test_record_filters.py).  Built with
 * the GCC plugin and exit=1, except filters_noexit.c (entries only).
 * "slow" functions spin for SLOW_MS, the others return at once.  The
 * depths below count main as 1.
 */
#include <setjmp.h>
#include <stdio.h>
#include <time.h>

#define SLOW_MS 30
#define CALL __attribute__((noinline, noclone))

void noexit_leaf(void); /* filters_noexit.c: no exit sites */

static volatile unsigned long sink;
static volatile int do_jump = 1; /* so that the jumpers have exits */
static jmp_buf back;

static inline __attribute__((always_inline)) void spin(void) /* not padded */
{
	struct timespec a, b;
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		clock_gettime(CLOCK_MONOTONIC, &b);
		ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	} while (ms < SLOW_MS);
}

CALL void short_leaf(void) { sink++; }
CALL void slow_leaf(void) { spin(); sink++; }
CALL void short_parent(void) { short_leaf(); sink++; }         /* short, short child */
CALL void deepest(void) { sink++; noexit_leaf(); sink++; }      /* depth 5 */
CALL void inner(void) { deepest(); spin(); sink++; }            /* depth 4, slow */
CALL void middle(void) { inner(); sink++; }                     /* depth 3 */
CALL void outer(void) { middle(); sink++; }                     /* depth 2 */
CALL void jump_deep2(void) { if (do_jump) longjmp(back, 1); sink++; }                /* depth 4 */
CALL void jump_deep1(void) { jump_deep2(); sink++; }           /* depth 3 */
CALL void jumper(void) { jump_deep1(); sink++; }                /* depth 2 */
CALL void after_child(void) { sink++; }                         /* depth 3 */
CALL void after_jump(void) { after_child(); spin(); sink++; }   /* depth 2 */
CALL void last_leaf(void) { sink++; }                           /* depth 2 */

int main(void)
{
	short_leaf();
	slow_leaf();
	short_parent();
	outer();
	noexit_leaf();
	if (!setjmp(back))
		jumper();
	after_jump();
	last_leaf();
	puts("done");
	return 0;
}
