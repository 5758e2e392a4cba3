/* SPDX-License-Identifier: MIT */
/* Kernel-style code for the kernel ABI tests: compiled freestanding, never
 * linked.  notrace functions must get nothing; the rest exactly what Linux's
 * own compiler flags give. */
#ifdef __aarch64__
/* As Linux with CC_USING_PATCHABLE_FUNCTION_ENTRY (compiler_types.h). */
#define notrace __attribute__((patchable_function_entry(0, 0)))
#else
#define notrace __attribute__((no_instrument_function))
#endif
#define __init __attribute__((section(".init.text")))

struct list { struct list *next; long val; };

static long total;

long sum_list(const struct list *l)
{
	long s = 0;
	for (; l; l = l->next)
		s += l->val;
	return s;
}

__attribute__((noinline)) static long clamp(long v, long lo, long hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

long account(const struct list *l, long limit)
{
	total += clamp(sum_list(l), 0, limit);
	return total;
}

int fmt_hex(char *buf, unsigned long v)
{
	int n = 0;
	do
		buf[n++] = "0123456789abcdef"[v & 15];
	while (v >>= 4);
	return n;
}

__attribute__((cold, noinline)) void report_bug(const char *what, long *where)
{
	*where = (long)what;
}

notrace long read_total(void) { return total; }

__init int setup_total(long v)
{
	total = v;
	return 0;
}

long (*const handlers[])(const struct list *) = { sum_list };
