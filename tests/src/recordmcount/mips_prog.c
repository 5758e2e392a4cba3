/* SPDX-License-Identifier: MIT */
/*
 * A freestanding mips program (no libc: raw syscalls) for the
 * recordmcount-ng run test.  Traced functions live in .text; entry_fn and
 * noinstr_fn live in sections ftrace does not trace, so recordmcount-ng turns
 * their _mcount calls into their disabled forms.  Each function works on
 * its own stack frame, so a disabled call that left the stack unbalanced
 * (o32's `addiu sp, sp, -8` in the jal's delay slot, which _mcount pops)
 * shows up in the output or crashes.  mips_mcount.S counts the calls.
 */
#define noinline __attribute__((noinline))
#define notrace __attribute__((no_instrument_function))
#define section(s) __attribute__((section(s)))

extern unsigned long mcount_calls;	/* mips_mcount.S */
volatile int sink = 3;

static notrace long sys3(long nr, long a0, long a1, long a2)
{
	register long v0 __asm__("$2") = nr;
	register long r4 __asm__("$4") = a0;
	register long r5 __asm__("$5") = a1;
	register long r6 __asm__("$6") = a2;
	register long r7 __asm__("$7");

	__asm__ volatile("syscall" : "+r"(v0), "=r"(r7) : "r"(r4), "r"(r5), "r"(r6)
			 : "$1", "$3", "$8", "$9", "$10", "$11", "$12", "$13", "$14", "$15",
			   "$24", "$25", "hi", "lo", "memory");
	return v0;
}

#if _MIPS_SIM == _ABIO32
#define NR_WRITE 4004
#define NR_EXIT 4001
#else
#define NR_WRITE 5001
#define NR_EXIT 5058
#endif

static notrace void put(const char *s)
{
	unsigned long n = 0;

	while (s[n])
		n++;
	sys3(NR_WRITE, 1, (long)s, (long)n);
}

static notrace void put_num(const char *what, unsigned long v)
{
	char buf[24];
	int i = sizeof(buf) - 1;

	buf[i] = 0;
	buf[--i] = '\n';
	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(what);
	put(" ");
	put(buf + i);
}

/* A frame of its own: locals the caller would see clobbered if sp moved. */
noinline int global_fn(int x)
{
	volatile int a[6];

	for (int i = 0; i < 6; i++)
		a[i] = x * (i + 1) + sink;
	return a[0] + a[5];
}

static noinline int static_fn(int x)
{
	return global_fn(x) - 1;
}

section(".entry.text") noinline int entry_fn(int x)
{
	volatile int b[4] = { x, x + 1, x + 2, x + 3 };

	return global_fn(b[3]) * 2 + b[0];
}

section(".noinstr.text") noinline int noinstr_fn(int x)
{
	volatile int c[3] = { x, sink, 7 };

	return c[0] ^ c[1] ^ c[2];
}

noinline int caller(int x)
{
	volatile int keep[2] = { x, -x };
	int r = static_fn(x) + entry_fn(x) + noinstr_fn(x);

	return r + keep[0] + keep[1];
}

notrace void __start(void)
{
	unsigned long sum = 0;

	for (int i = 1; i <= 5; i++) {
		int r = caller(i);

		put_num("caller", (unsigned long)r);
		sum += (unsigned long)r;
	}
	put_num("sum", sum);
	put_num("mcount_calls", mcount_calls);
	sys3(NR_EXIT, 0, 0, 0);
}
