/* SPDX-License-Identifier: MIT */
/*
 * The program tests/attach/test_attach_lib.py attaches to, playing `ftpad attach`
 * itself: it calls ftpad_attach_start() on the test's command, on a thread
 * that is running the program's own work (as the tool's loader stub would
 * call it on an interrupted thread).  Built with the GCC plugin (exit=1);
 * with -DLINKED it is linked with libftpad, without it dlopens
 * $FTPAD_LIB_PATH (libftpad.so.1) at the attach, as the stub does.
 *
 * Commands, one per line on stdin, each answered by one line on stdout:
 *   run N        every worker calls work_a() and work_b() N times each,
 *                then parks: "ran a=A b=B" (the totals so far)
 *   attach HEX   ftpad_attach_start(the request's bytes): "ret R"
 *   attach2 HEX  the same twice in a row: "ret R1 R2"
 *   mask         this thread's signal mask and the SIGUSR1s handled:
 *                "mask M usr1=U"
 *   fork N HEX   a child calls work_a() N times, says "child PID a=N" on
 *                stdout itself, waits for SIGUSR2, calls ftpad_attach_start
 *                (HEX's request), says "child ret R", and waits for
 *                SIGTERM; "forked PID"
 *   exit         the workers end, the program exits 0: "bye"
 * Workers only call the padded functions between a "run" and its answer,
 * so the calls made while a session is on are exactly known.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef LINKED
#include <ftpad.h>
#endif

#define WORKERS 3
/* The harness itself is not traced: a session records work_a() and work_b()
 * (and on_usr1()), whose calls the program counts. */
#define HARNESS __attribute__((no_instrument_function))

static unsigned long calls_a, calls_b; /* atomic */
static volatile sig_atomic_t usr1;

__attribute__((noinline)) int work_b(int x)
{
	__atomic_add_fetch(&calls_b, 1, __ATOMIC_RELAXED);
	return x * 3 + 1;
}

__attribute__((noinline)) int work_a(int x)
{
	__atomic_add_fetch(&calls_a, 1, __ATOMIC_RELAXED);
	return x ^ 0x55;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned long round_no, per_round;
static int done, quit; /* workers done with this round */

HARNESS static void *worker(void *arg)
{
	unsigned long seen = 0;
	volatile int sink = 0;

	(void)arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		while (round_no == seen && !quit)
			pthread_cond_wait(&cond, &lock);
		if (quit)
			break;
		seen = round_no;
		pthread_mutex_unlock(&lock);
		for (unsigned long i = 0; i < per_round; i++)
			sink += work_a(work_b((int)i));
		pthread_mutex_lock(&lock);
		done++;
		pthread_cond_broadcast(&cond);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

HARNESS static void run_round(unsigned long n)
{
	pthread_mutex_lock(&lock);
	per_round = n;
	done = 0;
	round_no++;
	pthread_cond_broadcast(&cond);
	while (done < WORKERS)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
}

HARNESS static int attach(const char *hex, int times)
{
	size_t len = strlen(hex) / 2;
	char *request = calloc(len + 2, 1);
	int (*start)(const char *);

	for (size_t i = 0; i < len; i++)
		sscanf(hex + 2 * i, "%2hhx", &request[i]);
#ifdef LINKED
	start = ftpad_attach_start;
#else
	void *h = dlopen(getenv("FTPAD_LIB_PATH"), RTLD_NOW);

	start = h ? (int (*)(const char *))dlsym(h, "ftpad_attach_start") : NULL;
	if (!start) {
		fprintf(stderr, "prog: %s\n", dlerror());
		exit(3);
	}
#endif
	int ret = start(request);

	if (times == 2)
		printf("ret %d ", ret), ret = start(request);
	free(request); /* the library keeps its own copy */
	return ret;
}

static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

HARNESS static void fork_child(unsigned long n, const char *hex)
{
	pid_t pid;
	volatile int sink = 0;
	sigset_t usr2;
	int sig;

	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &usr2, NULL);
	pid = fork();

	if (pid < 0) {
		perror("fork");
		exit(4);
	}
	if (pid) {
		pthread_sigmask(SIG_UNBLOCK, &usr2, NULL);
		printf("forked %d\n", pid);
		return;
	}
	for (unsigned long i = 0; i < n; i++)
		sink += work_a((int)i);
	printf("child %d a=%lu\n", getpid(), n);
	fflush(stdout);
	sigwait(&usr2, &sig);
	printf("child ret %d\n", attach(hex, 1));
	fflush(stdout);
	for (;;)
		pause();
}

HARNESS int main(void)
{
	pthread_t threads[WORKERS];
	char line[1 << 16];

	signal(SIGUSR1, on_usr1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&threads[i], NULL, worker, NULL);
	run_round(0);
	printf("ready %d\n", getpid());
	while (fgets(line, sizeof(line), stdin)) {
		unsigned long n = 0;
		sigset_t mask;

		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "run %lu", &n) == 1) {
			run_round(n);
			printf("ran a=%lu b=%lu\n", calls_a, calls_b);
		} else if (!strncmp(line, "attach ", 7)) {
			printf("ret %d\n", attach(line + 7, 1));
		} else if (!strncmp(line, "attach2 ", 8)) {
			printf("%d\n", attach(line + 8, 2));
		} else if (!strcmp(line, "mask")) {
			pthread_sigmask(SIG_BLOCK, NULL, &mask);
			printf("mask %lx usr1=%d\n", *(unsigned long *)&mask, (int)usr1);
		} else if (sscanf(line, "fork %lu", &n) == 1 && strchr(line + 5, ' ')) {
			fork_child(n, strchr(line + 5, ' ') + 1);
		} else if (!strcmp(line, "exit")) {
			break;
		} else {
			printf("unknown %s\n", line);
		}
	}
	pthread_mutex_lock(&lock);
	quit = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(threads[i], NULL);
	printf("bye a=%lu b=%lu\n", calls_a, calls_b);
	return 0;
}
