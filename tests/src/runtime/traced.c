/* SPDX-License-Identifier: MIT */
/*
 * traced.c - a program compiled with the GCC plugin (every function padded)
 * whose output must be the same whether or not it is traced.  With
 * FTPAD_TRACED=1 in the environment it registers one ops on "t_*" whose
 * callback destroys every call-clobbered register, uses floating point, and
 * records (ip, parent_ip) of each call; the events go to the file named by
 * FTPAD_EVENTS when the program (or a forked child) ends, with the load
 * addresses of the modules, and tests/runtime/test_runtime_programs.py checks the
 * (callee, caller) edges against the ELF files.
 *
 *   traced [LIB]   runs every scenario; LIB is the padded library to dlopen
 *
 * Scenarios, one line of output each: recursion, setjmp/longjmp, varargs,
 * large-struct returns, float and vector arguments, GNU C nested functions
 * (the static chain in r10/x18, and a stack trampoline), tail calls, a
 * signal handler interrupting a traced function (synchronous and from a
 * timer), threads, fork, dlopen and dlclose.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ftpad.h"

#define NOINLINE __attribute__((noinline))
/* noipa: no caller assumes anything about the callee (no clones, no
 * constant propagation), so each call stays a call. */
#define OPAQUE __attribute__((noipa))

typedef double v2df __attribute__((vector_size(16)));
typedef float v4sf __attribute__((vector_size(16)));

/* ---- the recording callback -------------------------------------------- */

struct event {
	unsigned long ip, parent_ip;
	int tid;
};

#define MAX_EVENTS 4096
static struct event events[MAX_EVENTS];
static unsigned int nevents;
static unsigned int dump_from; /* a forked child dumps only its own */
static int tracing;

/* What a callback may do to registers, and more: the trampoline must give
 * every argument register back.  rax is set to 0, the value that would
 * make a varargs function skip saving its vector registers. */
static void clobber_registers(void)
{
#if defined(__x86_64__)
	__asm__ volatile("xor %%eax, %%eax\n\tmov $-1, %%rcx\n\tmov $-1, %%rdx\n\t"
			 "mov $-1, %%rsi\n\tmov $-1, %%rdi\n\tmov $-1, %%r8\n\t"
			 "mov $-1, %%r9\n\tmov $-1, %%r10\n\tmov $-1, %%r11\n\t"
			 "pcmpeqd %%xmm0, %%xmm0\n\tpcmpeqd %%xmm1, %%xmm1\n\t"
			 "pcmpeqd %%xmm2, %%xmm2\n\tpcmpeqd %%xmm3, %%xmm3\n\t"
			 "pcmpeqd %%xmm4, %%xmm4\n\tpcmpeqd %%xmm5, %%xmm5\n\t"
			 "pcmpeqd %%xmm6, %%xmm6\n\tpcmpeqd %%xmm7, %%xmm7\n\t"
			 "pcmpeqd %%xmm8, %%xmm8\n\tpcmpeqd %%xmm15, %%xmm15"
			 ::: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
			 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
			 "xmm8", "xmm15", "cc");
#elif defined(__aarch64__)
	__asm__ volatile("mov x0, #-1\n\tmov x1, x0\n\tmov x2, x0\n\tmov x3, x0\n\t"
			 "mov x4, x0\n\tmov x5, x0\n\tmov x6, x0\n\tmov x7, x0\n\t"
			 "mov x8, x0\n\tmov x9, x0\n\tmov x10, x0\n\tmov x16, x0\n\t"
			 "mov x17, x0\n\tmov x18, x0\n\t"
			 "movi v0.2d, #-1\n\tmovi v1.2d, #-1\n\tmovi v2.2d, #-1\n\t"
			 "movi v3.2d, #-1\n\tmovi v4.2d, #-1\n\tmovi v5.2d, #-1\n\t"
			 "movi v6.2d, #-1\n\tmovi v7.2d, #-1\n\tmovi v16.2d, #-1"
			 ::: "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10",
			 "x16", "x17", "x18", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7",
			 "v16", "cc");
#endif
}

static volatile double fp_sink;

static void record(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		   struct ftpad_regs *regs)
{
	unsigned int i = __atomic_fetch_add(&nevents, 1, __ATOMIC_RELAXED);
	volatile v2df v = { (double)ip, 0.5 };

	(void)ops, (void)regs;
	if (i < MAX_EVENTS) {
		events[i].ip = ip;
		events[i].parent_ip = parent_ip;
		events[i].tid = gettid();
	}
	/* Floating point and vectors in the callback, then worse. */
	fp_sink = v[0] * v[1] + (double)parent_ip / 3.0;
	clobber_registers();
}

static struct ftpad_ops ops = { .func = record, .flags = FTPAD_OPS_FL_RECURSION };

static char events_path[4096];

static void write_line(int fd, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int len;

	va_start(ap, fmt);
	len = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (write(fd, line, len) != len)
		_exit(99);
}

/* Append this process's events to FTPAD_EVENTS, one write per line. */
static void dump_events(void)
{
	int fd;
	unsigned int n = __atomic_load_n(&nevents, __ATOMIC_ACQUIRE);

	if (!tracing)
		return;
	fd = open(events_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		_exit(98);
	for (unsigned int i = dump_from; i < n && i < MAX_EVENTS; i++)
		write_line(fd, "event %d %d %#lx %#lx\n", getpid(), events[i].tid, events[i].ip,
			   events[i].parent_ip);
	close(fd);
}

static void mark(const char *what, unsigned long value)
{
	int fd;

	if (!tracing)
		return;
	fd = open(events_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		_exit(98);
	/* The events so far belong before this mark. */
	write_line(fd, "mark %s %#lx after %u\n", what, value,
		   __atomic_load_n(&nevents, __ATOMIC_ACQUIRE));
	close(fd);
}

/* ---- recursion ------------------------------------------------------------ */

static volatile long fib_calls;

OPAQUE long t_fib(long n)
{
	long r = n < 2 ? n : t_fib(n - 1) + t_fib(n - 2);

	fib_calls++; /* after the calls: GCC turns none of them into a loop */
	return r;
}

/* ---- setjmp/longjmp ------------------------------------------------------- */

static jmp_buf jump_env;

OPAQUE void t_jump_inner(int v)
{
	longjmp(jump_env, v);
}

OPAQUE void t_jump_outer(int v)
{
	t_jump_inner(v + 1);
	printf("not reached\n");
}

OPAQUE int t_after_jump(int v)
{
	return v * 10;
}

NOINLINE static void scenario_longjmp(void)
{
	volatile int got = setjmp(jump_env);

	if (!got)
		t_jump_outer(4);
	printf("longjmp: %d %d\n", got, t_after_jump(got));
}

/* ---- varargs -------------------------------------------------------------- */

/* fmt: 'i' an int, 'd' a double; al carries how many vector registers hold
 * arguments: a trampoline that loses it loses the doubles. */
OPAQUE double t_vsum(const char *fmt, ...)
{
	va_list ap;
	double sum = 0;

	va_start(ap, fmt);
	for (; *fmt; fmt++)
		sum += *fmt == 'd' ? va_arg(ap, double) : (double)va_arg(ap, int);
	va_end(ap);
	return sum;
}

OPAQUE int t_vformat(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	return n;
}

NOINLINE static void scenario_varargs(void)
{
	char buf[128];

	t_vformat(buf, sizeof(buf), "%d %.2f %s %.3f %ld", 7, 2.5, "x", 0.125, 1234567890123l);
	printf("varargs: %.4f %.4f [%s]\n", t_vsum("idid", 1, 1.5, 2, 2.25),
	       t_vsum("dddddddddi", 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10), buf);
}

/* ---- large-struct returns --------------------------------------------------- */

struct big {
	long v[9]; /* returned through the hidden pointer: rdi / x8 */
};

OPAQUE struct big t_make_big(long x, long y)
{
	struct big r;

	for (int i = 0; i < 9; i++)
		r.v[i] = x * (i + 1) + y;
	return r;
}

NOINLINE static void scenario_struct(void)
{
	struct big b = t_make_big(3, 100);
	long sum = 0;

	for (int i = 0; i < 9; i++)
		sum += b.v[i] * (i + 1);
	printf("struct: %ld %ld %ld\n", b.v[0], b.v[8], sum);
}

/* ---- float and vector arguments ----------------------------------------------- */

OPAQUE double t_floats(double a, float b, v2df c, v4sf d, double e, double f, double g,
		       double h)
{
	return a * 1000 + b * 100 + (c[0] + c[1]) * 10 + (d[0] + d[1] + d[2] + d[3]) + e / 2 +
	       f / 4 + g / 8 + h / 16;
}

NOINLINE static void scenario_floats(void)
{
	v2df c = { 0.5, 0.25 };
	v4sf d = { 1, 2, 3, 4.5f };

	printf("floats: %.6f\n", t_floats(1.5, 2.25f, c, d, 3, 5, 7, 9));
}

/* ---- GNU C nested functions ---------------------------------------------------- */

OPAQUE long t_outer(long x)
{
	long base = x * 100;

	/* Called directly: the static chain arrives in r10 (x86_64) or x18. */
	OPAQUE long t_nested(long y)
	{
		return base + y;
	}
	return t_nested(7) + t_nested(8);
}

static int compare_calls;

OPAQUE long t_sort_with_nested(int reverse)
{
	int v[] = { 5, 1, 4, 2, 3 };

	/* Its address is taken: GCC builds a trampoline on the stack. */
	OPAQUE int t_compar(const void *a, const void *b)
	{
		compare_calls++;
		return reverse ? *(const int *)b - *(const int *)a : *(const int *)a - *(const int *)b;
	}
	qsort(v, 5, sizeof(v[0]), t_compar);
	return v[0] * 10000 + v[1] * 1000 + v[2] * 100 + v[3] * 10 + v[4];
}

NOINLINE static void scenario_nested(void)
{
	long sorted = t_sort_with_nested(1);

	printf("nested: %ld %ld %d\n", t_outer(4), sorted, compare_calls > 0);
}

/* ---- tail calls ------------------------------------------------------------ */

OPAQUE long t_tail_b(long x)
{
	return x * 3;
}

/* At -O2, a jmp: t_tail_b's parent_ip is t_tail_a's caller's. */
OPAQUE long t_tail_a(long x)
{
	return t_tail_b(x + 1);
}

NOINLINE static void scenario_tail(void)
{
	printf("tail: %ld\n", t_tail_a(4));
}

/* ---- signals ---------------------------------------------------------------- */

static volatile sig_atomic_t in_handler, alarms;

OPAQUE int t_in_handler(int sig)
{
	return sig * 2;
}

NOINLINE static void on_signal(int sig)
{
	in_handler += t_in_handler(sig);
	if (sig == SIGALRM)
		alarms = 1;
}

/* Interrupted by the signal it raises itself. */
OPAQUE int t_raises(int sig)
{
	raise(sig);
	return in_handler;
}

/* Interrupted by a timer, whenever it lands. */
OPAQUE long t_spins(void)
{
	long spins = 0;

	while (!alarms)
		spins++;
	return spins > 0;
}

NOINLINE static void scenario_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct itimerval once = { { 0, 0 }, { 0, 20000 } };
	int raised;
	long spun;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);
	raised = t_raises(SIGUSR1);
	setitimer(ITIMER_REAL, &once, NULL);
	spun = t_spins();
	printf("signals: %d %ld %d\n", raised, spun, (int)in_handler);
}

/* ---- threads -------------------------------------------------------------------- */

OPAQUE long t_leaf(long x)
{
	return x + 1;
}

OPAQUE long t_thread_work(long x)
{
	long sum = 0;

	for (int i = 0; i < 3; i++)
		sum += t_leaf(x + i);
	return sum;
}

NOINLINE static void *thread_main(void *arg)
{
	*(long *)arg = t_thread_work(*(long *)arg);
	return NULL;
}

NOINLINE static void scenario_threads(void)
{
	pthread_t t[4];
	long v[4] = { 10, 20, 30, 40 };

	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, thread_main, &v[i]);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("threads: %ld %ld %ld %ld\n", v[0], v[1], v[2], v[3]);
}

/* ---- fork -------------------------------------------------------------------------- */

OPAQUE long t_child_work(long x)
{
	return t_leaf(x) * 2;
}

NOINLINE static void scenario_fork(void)
{
	int status = 0;
	pid_t pid;

	unsigned int before = __atomic_load_n(&nevents, __ATOMIC_ACQUIRE);

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		long r;

		dump_from = before;
		r = t_child_work(5);

		dump_events();
		_exit(r == 12 ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	printf("fork: %d %ld\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1, t_child_work(6));
}

/* ---- dlopen and dlclose ------------------------------------------------------------- */

NOINLINE static void scenario_dlopen(const char *lib)
{
	long results[2];

	for (int round = 0; round < 2; round++) {
		void *h = dlopen(lib, RTLD_NOW);
		long (*fn)(long) = h ? (long (*)(long))dlsym(h, "t_lib_square") : NULL;
		Dl_info info;

		if (!fn) {
			printf("dlopen: %s\n", dlerror());
			return;
		}
		dladdr((void *)fn, &info);
		mark("lib", (unsigned long)info.dli_fbase);
		results[round] = fn(round + 3);
		dlclose(h);
	}
	printf("dlopen: %ld %ld\n", results[0], results[1]);
}

int main(int argc, char **argv)
{
	const char *path = getenv("FTPAD_EVENTS");
	Dl_info info;

	tracing = getenv("FTPAD_TRACED") && path;
	if (tracing) {
		int err;

		snprintf(events_path, sizeof(events_path), "%s", path);
		dladdr((void *)main, &info);
		mark("exe", (unsigned long)info.dli_fbase);
		if ((err = ftpad_set_filter(&ops, "t_*", 1)) || (err = ftpad_register_ops(&ops))) {
			printf("ftpad: %s\n", ftpad_strerror(err));
			return 1;
		}
	}
	printf("recursion: %ld\n", t_fib(10));
	mark("scenario", 1);
	scenario_longjmp();
	mark("scenario", 2);
	scenario_varargs();
	mark("scenario", 3);
	scenario_struct();
	mark("scenario", 4);
	scenario_floats();
	mark("scenario", 5);
	scenario_nested();
	mark("scenario", 6);
	scenario_tail();
	mark("scenario", 7);
	scenario_signals();
	mark("scenario", 8);
	scenario_threads();
	mark("scenario", 9);
	scenario_fork();
	mark("scenario", 10);
	if (argc > 1)
		scenario_dlopen(argv[1]);
	if (tracing) {
		ftpad_unregister_ops(&ops);
		dump_events();
	}
	return 0;
}
