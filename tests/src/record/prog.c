/* SPDX-License-Identifier: MIT */
/*
 * prog.c - what tests/trace/test_record.py records.  It counts its own calls and
 * prints the counts, so the test compares the trace against the program.
 *   prog count N    mid() N times (each calls leaf() once); exit status 7
 *   prog threads    three threads call leaf() 10, 110 and 210 times
 *   prog fork       the child calls mid() 5 times, the parent 3 times
 *   prog forks K N  K children at once, each calls mid() N times; then the
 *                   parent, once they have exited, N times
 *   prog exec       mid() twice, then execv itself as "prog count 4"
 *   prog execfail   mid() twice, an execv that fails, mid() twice more
 *   prog _exit N    mid() N times, then _exit(5): no destructor runs
 *   prog _Exit N    the same with _Exit(6)
 *   prog vfork      mid() 3 times, a vfork child that calls _exit(0) at
 *                   once, then mid() twice more
 *   prog dlopen LIB lib_fn() of LIB 6 times, then dlclose
 *   prog deep N     deep() recursing N frames deep
 *   prog crash segv|abort N
 *                   mid() N times, prints its counts, then crash() dies by
 *                   a write through NULL (SIGSEGV) or by abort()
 *   prog spin       calls mid() until a signal ends it, and prints "ready"
 *                   after the first 1000 calls
 *   prog dflquery   prints whether SIGTERM's action is the default, sets
 *                   SIGINT's to the default and prints whether a query
 *                   says so, calls mid() 3 times, then raises SIGINT
 *   prog signal     a SA_SIGINFO handler of SIGUSR1 (leaf() 3 times) and a
 *                   signal() handler of SIGUSR2 (mid() once), raised from
 *                   mid(); prints whether each handler saw its arguments
 * With PROG_CTOR=N in the environment, a constructor calls mid() N times
 * first (before main: recorded with --early only).
 */
#include <dlfcn.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long n_leaf, n_mid;

__attribute__((noinline)) int leaf(int x)
{
	__atomic_fetch_add(&n_leaf, 1, __ATOMIC_RELAXED);
	return x + 1;
}

__attribute__((noinline)) int mid(int x)
{
	n_mid++;
	return leaf(x) * 2;
}

static void *thread_main(void *arg)
{
	long n = (long)arg, s = 0;

	for (long i = 0; i < n; i++)
		s += leaf(i);
	return (void *)s;
}

__attribute__((constructor)) static void before_main(void)
{
	const char *n = getenv("PROG_CTOR");

	for (int i = 0; n && i < atoi(n); i++)
		mid(i);
}

static long n_deep;

__attribute__((noinline)) long deep(long n)
{
	n_deep++;
	if (n <= 1)
		return 1;
	long r = deep(n - 1);

	__asm__ volatile("" : "+r"(r)); /* a real call, not a loop */
	return r + 1;
}

static int usr1_ok;

static void on_usr1(int sig, siginfo_t *info, void *context)
{
	usr1_ok = sig == SIGUSR1 && info && info->si_signo == SIGUSR1 && context;
	for (int i = 0; i < 3; i++)
		leaf(i);
}

static void on_usr2(int sig)
{
	if (sig == SIGUSR2)
		mid(sig);
}

static void report(void)
{
	printf("leaf=%ld mid=%ld\n", n_leaf, n_mid);
}

/* NULL, read through volatile: GCC cannot see it, so it writes there
 * rather than trap (SIGILL). */
static int *volatile nowhere;

__attribute__((noinline)) void crash(const char *how)
{
	if (!strcmp(how, "abort"))
		abort();
	*nowhere = 1;
}

static int is_default(int sig)
{
	struct sigaction old;

	return !sigaction(sig, NULL, &old) && old.sa_handler == SIG_DFL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "count";
	long s = 0;

	if (!strcmp(mode, "count")) {
		long n = argc > 2 ? atol(argv[2]) : 1000;

		for (long i = 0; i < n; i++)
			s += mid(i);
		report();
		return 7;
	}
	if (!strcmp(mode, "threads")) {
		pthread_t t[3];

		for (long i = 0; i < 3; i++)
			pthread_create(&t[i], NULL, thread_main, (void *)(i * 100 + 10));
		for (int i = 0; i < 3; i++)
			pthread_join(t[i], NULL);
		report();
		return 0;
	}
	if (!strcmp(mode, "fork")) {
		pid_t child = fork();
		int status;

		for (int i = 0; i < (child ? 3 : 5); i++)
			s += mid(i);
		if (!child) {
			report();
			fflush(stdout);
			exit(0);
		}
		waitpid(child, &status, 0);
		report();
		return WEXITSTATUS(status);
	}
	if (!strcmp(mode, "forks") && argc > 3) {
		int k = atoi(argv[2]), status, failed = 0;
		long n = atol(argv[3]);

		for (int c = 0; c < k; c++) {
			if (fork() == 0) {
				for (long i = 0; i < n; i++)
					s += mid(i);
				report();
				fflush(stdout);
				exit(0);
			}
		}
		for (int c = 0; c < k; c++)
			failed |= wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status);
		for (long i = 0; i < n; i++)
			s += mid(i);
		report();
		return failed;
	}
	if (!strcmp(mode, "crash") && argc > 3) {
		for (long i = 0; i < atol(argv[3]); i++)
			s += mid(i);
		report();
		fflush(stdout);
		crash(argv[2]);
		return 0;
	}
	if (!strcmp(mode, "spin")) {
		for (long i = 0;; i++) {
			if (i == 1000) {
				printf("ready\n");
				fflush(stdout);
			}
			s += mid(i);
		}
	}
	if (!strcmp(mode, "dflquery")) {
		printf("term_default=%d", is_default(SIGTERM));
		signal(SIGINT, SIG_DFL);
		printf(" int_default=%d\n", is_default(SIGINT));
		for (int i = 0; i < 3; i++)
			s += mid(i);
		report();
		fflush(stdout);
		raise(SIGINT);
		return 0;
	}
	if (!strcmp(mode, "execfail")) {
		char *args[] = { "/nonexistent/prog", NULL };

		s += mid(1) + mid(2);
		execv(args[0], args);
		s += mid(3) + mid(4);
		report();
		return 0;
	}
	if (!strcmp(mode, "exec")) {
		char *args[] = { argv[0], "count", "4", NULL };

		s += mid(1) + mid(2);
		report();
		fflush(stdout);
		execv("/proc/self/exe", args);
		return 99;
	}
	if ((!strcmp(mode, "_exit") || !strcmp(mode, "_Exit")) && argc > 2) {
		for (long i = 0; i < atol(argv[2]); i++)
			s += mid(i);
		report();
		fflush(stdout);
		if (mode[1] == 'e')
			_exit(5);
		_Exit(6);
	}
	if (!strcmp(mode, "vfork")) {
		pid_t child;
		int status;

		for (int i = 0; i < 3; i++)
			s += mid(i);
		child = vfork();
		if (!child)
			_exit(0);
		waitpid(child, &status, 0);
		s += mid(3) + mid(4);
		report();
		return WEXITSTATUS(status);
	}
	if (!strcmp(mode, "deep") && argc > 2) {
		long r = deep(atol(argv[2]));

		printf("deep=%ld result=%ld\n", n_deep, r);
		return 0;
	}
	if (!strcmp(mode, "signal")) {
		struct sigaction sa = { .sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO }, old, old2;

		sigaction(SIGUSR1, &sa, NULL);
		signal(SIGUSR2, on_usr2);
		raise(SIGUSR1);
		raise(SIGUSR2);
		sigaction(SIGUSR1, NULL, &old);
		sigaction(SIGUSR2, NULL, &old2);
		printf("usr1_ok=%d query_ok=%d\n", usr1_ok,
		       old.sa_sigaction == on_usr1 && (old.sa_flags & SA_SIGINFO) &&
			       old2.sa_handler == on_usr2 && !(old2.sa_flags & SA_SIGINFO));
		report();
		return 0;
	}
	if (!strcmp(mode, "dlopen") && argc > 2) {
		void *h = dlopen(argv[2], RTLD_NOW);
		int (*fn)(int) = h ? (int (*)(int))dlsym(h, "lib_fn") : NULL;

		if (!fn)
			return 98;
		for (int i = 0; i < 6; i++)
			s += fn(i);
		dlclose(h);
		report();
		return 0;
	}
	return 2;
}
