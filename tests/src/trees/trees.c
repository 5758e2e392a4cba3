/* SPDX-License-Identifier: MIT */
/*
 * trees.c - what tests/trace/test_trace_trees.py records, one call tree per mode.
 * Every traced function is noinline (and noclone for GCC), so the tree
 * has the same names and shape from GCC and clang; a call that must not
 * become a tail call is followed by an empty asm using its result.
 *   trees rec         rec(3) recursing to leaf()
 *   trees deep N      deep() recursing N frames deep; prints the count
 *   trees threads     two threads, one after the other, each worker->mid->leaf
 *   trees fork        the child runs child_side() and exits from it
 *   trees fork-noreturn  the child runs child_noreturn(), which exits
 *   trees exec        mid(), then execs itself as "trees rec"
 *   trees signal      raiser() raises SIGUSR1; on_usr1() calls leaf()
 *   trees longjmp     jl_a..jl_d, longjmp from jl_d to main, then leaf()
 *   trees tail        a direct tail call and one through a pointer
 *   trees context     swapcontext into co_fn() and back, twice
 *   trees dlopen LIB  lib_fn() of LIB twice, then dlclose, then leaf()
 *   trees noexit      plain_fn() (of an object without exit sites)
 *   trees count N     mid() N times; prints the calls made
 * With TREES_CTOR set, a constructor calls mid() first (before main).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#ifdef __clang__
#define TRACED __attribute__((noinline))
#else
#define TRACED __attribute__((noinline, noclone))
#endif
#define KEEP(x) __asm__ volatile("" : "+r"(x)) /* x is used after the call */

long n_calls;
int plain_fn(int x); /* plain.c, built without exit sites */

TRACED int leaf(int x)
{
	__atomic_fetch_add(&n_calls, 1, __ATOMIC_RELAXED);
	return x + 1;
}

TRACED int mid(int x)
{
	int r = leaf(x);

	n_calls++;
	KEEP(r);
	return r * 2;
}

TRACED int rec(int n)
{
	int r = n > 1 ? rec(n - 1) : leaf(n);

	KEEP(r);
	return r + 1;
}

static long n_deep;

TRACED long deep(long n)
{
	n_deep++;
	if (n <= 1)
		return 1;
	long r = deep(n - 1);

	KEEP(r);
	return r + 1;
}

TRACED void *worker(void *arg)
{
	long r = mid((int)(long)arg);

	KEEP(r);
	return (void *)r;
}

/* Exits from inside itself (not noreturn: it has an exit site). */
TRACED int child_side(int x)
{
	int r = mid(x);

	KEEP(r);
	if (x)
		exit(0); /* child_side is left open: unwound */
	return r;
}

/* Never returns: built with exit=1, it still has no exit site. */
TRACED void child_noreturn(void)
{
	int r = mid(6);

	KEEP(r);
	exit(0);
}

TRACED void on_usr1(int sig)
{
	int r = leaf(sig);

	KEEP(r);
}

TRACED int raiser(int x)
{
	raise(SIGUSR1);
	int r = leaf(x);

	KEEP(r);
	return r;
}

static jmp_buf jump;

TRACED int jl_d(int x)
{
	if (x >= 0)
		longjmp(jump, 1);
	return x;
}

TRACED int jl_c(int x)
{
	int r = jl_d(leaf(x));

	KEEP(r);
	return r;
}

TRACED int jl_b(int x)
{
	int r = jl_c(x);

	KEEP(r);
	return r;
}

TRACED int jl_a(int x)
{
	int r = jl_b(x);

	KEEP(r);
	return r;
}

TRACED int tail_target(int x)
{
	n_calls++;
	return x * 3;
}

int (*volatile tail_pointer)(int) = tail_target;

TRACED int tail_direct(int x)
{
	n_calls++;
	return tail_target(x + 1);
}

TRACED int tail_indirect(int x)
{
	n_calls++;
	return tail_pointer(x + 2);
}

static ucontext_t main_ctx, co_ctx;

TRACED void co_fn(void)
{
	int r = leaf(1);

	KEEP(r);
	swapcontext(&co_ctx, &main_ctx);
	r = leaf(2);
	KEEP(r);
}

TRACED void run_context(void)
{
	char stack[64 * 1024]; /* below this frame: co_fn nests under it */

	getcontext(&co_ctx);
	co_ctx.uc_stack.ss_sp = stack;
	co_ctx.uc_stack.ss_size = sizeof(stack);
	co_ctx.uc_link = &main_ctx;
	makecontext(&co_ctx, co_fn, 0);
	swapcontext(&main_ctx, &co_ctx);
	int r = mid(1);

	KEEP(r);
	swapcontext(&main_ctx, &co_ctx);
	r = leaf(3);
	KEEP(r);
}

__attribute__((constructor)) TRACED static void trees_ctor(void)
{
	if (getenv("TREES_CTOR")) {
		int r = mid(0);

		KEEP(r);
	}
}

TRACED static int run_dlopen(const char *path)
{
	void *lib = dlopen(path, RTLD_NOW);
	int (*fn)(int) = lib ? (int (*)(int))dlsym(lib, "lib_fn") : NULL;

	if (!fn) {
		fprintf(stderr, "trees: %s\n", dlerror());
		return 1;
	}
	int r = fn(1) + fn(2);

	KEEP(r);
	dlclose(lib);
	r = leaf(r);
	KEEP(r);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "rec";
	long r = 0;

	if (!strcmp(mode, "rec")) {
		r = rec(3);
	} else if (!strcmp(mode, "deep") && argc > 2) {
		r = deep(atol(argv[2]));
		printf("deep=%ld\n", n_deep);
	} else if (!strcmp(mode, "threads")) {
		for (long i = 0; i < 2; i++) {
			pthread_t t;

			pthread_create(&t, NULL, worker, (void *)i);
			pthread_join(t, NULL);
		}
	} else if (!strcmp(mode, "fork")) {
		int status;
		pid_t child = fork();

		if (!child)
			child_side(5);
		waitpid(child, &status, 0);
		r = leaf(WEXITSTATUS(status));
	} else if (!strcmp(mode, "fork-noreturn")) {
		int status;

		if (!fork())
			child_noreturn();
		wait(&status);
	} else if (!strcmp(mode, "exec")) {
		char *args[] = { argv[0], "rec", NULL };

		r = mid(1);
		KEEP(r);
		fflush(stdout);
		execv("/proc/self/exe", args);
		return 99;
	} else if (!strcmp(mode, "signal")) {
		signal(SIGUSR1, on_usr1);
		r = raiser(1);
	} else if (!strcmp(mode, "longjmp")) {
		if (!setjmp(jump))
			r = jl_a(1);
		r = leaf((int)r);
	} else if (!strcmp(mode, "tail")) {
		r = tail_direct(1);
		KEEP(r);
		r = tail_indirect(1);
	} else if (!strcmp(mode, "context")) {
		run_context();
	} else if (!strcmp(mode, "dlopen") && argc > 2) {
		return run_dlopen(argv[2]);
	} else if (!strcmp(mode, "noexit")) {
		r = plain_fn(1);
		KEEP(r);
		r = leaf((int)r);
	} else if (!strcmp(mode, "count") && argc > 2) {
		for (long i = atol(argv[2]); i > 0; i--) {
			int x = mid((int)i);

			KEEP(x);
		}
		printf("calls=%ld\n", n_calls);
		return 0;
	} else {
		fprintf(stderr, "trees: unknown mode '%s'\n", mode);
		return 2;
	}
	KEEP(r);
	return 0;
}
