/* SPDX-License-Identifier: MIT */
/*
 * server.c - a long-running, server-like program for tests/attach/test_attach_e2e.py
 * to attach `ftpad attach` to.  Built with the GCC plugin (exit sites on),
 * NOT linked with libftpad: attach must bring it in.
 *
 *   server SOCKET [SPIN]
 *
 * Its threads sit where a real server's sit, so that attach meets every
 * kind of stopped thread:
 *   - one blocked in accept() on the Unix socket SOCKET; each client writes
 *     a line and gets "pong N\n" back, N counting from 1;
 *   - one blocked in read() on a pipe, fed a sequence number every 5 ms by
 *     a thread that sleeps between writes;
 *   - one in a nanosleep() loop (10 ms each);
 *   - a pair handing a turn back and forth through two condition variables
 *     (futexes), each side checking the sequence it is handed;
 *   - HOT threads in hot loops over the work_* functions and spare_fn, each
 *     function counting its own calls (SPIN: busy steps between rounds).
 * Every system call's result is checked: an unexpected EINTR, a short read
 * or write, any error is a failure, printed to stderr and counted; so is a
 * nanosleep() that returned early or a turn handed out of sequence.
 *
 * Commands, one per line on stdin, each answered with one line on stdout:
 *   status  "status errors=E accepts=A reads=R sleeps=S trips=T"
 *   pause   the hot threads park outside the counted functions;
 *           "paused work_add=N ... spare_fn=N": their exact call counts
 *   resume  "resumed"
 *   quit    (or end of input) every thread stops and is joined; "final
 *           errors=E ..." and the exit status is 0 only when E is 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { HOT = 3 };
enum { WORK_ADD, WORK_NEST, WORK_TAIL, WORK_LEAF, SPARE_FN, NFUNCS };
static const char *const func_names[NFUNCS] = {
	"work_add", "work_nest", "work_tail", "work_leaf", "spare_fn",
};

struct hot {
	pthread_t thread;
	long calls[NFUNCS];	/* written by its thread, read while it is parked */
};

static struct hot hot[HOT];
static long spin_steps = 200;
static int stopping;		/* atomic: quit was asked */
static long errors, accepts, reads, sleeps, trips;	/* atomic */

static void fail(const char *what, long got, int err)
{
	__atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
	fprintf(stderr, "server: FAIL %s: got %ld (%s)\n", what, got, err ? strerror(err) : "-");
}

static int stop_asked(void)
{
	return __atomic_load_n(&stopping, __ATOMIC_ACQUIRE);
}

/* The counted functions.  noinline and noclone: each keeps its name and its
 * pad; work_nest nests a call, work_tail ends in a tail call (a tail-exit
 * site). */
__attribute__((noinline, noclone)) long work_add(struct hot *h, long x)
{
	h->calls[WORK_ADD]++;
	return x + 3;
}

__attribute__((noinline, noclone)) long work_nest(struct hot *h, long x)
{
	h->calls[WORK_NEST]++;
	return work_add(h, x) * 2;
}

__attribute__((noinline, noclone)) long work_leaf(struct hot *h, long x)
{
	h->calls[WORK_LEAF]++;
	return x ^ 0x55;
}

__attribute__((noinline, noclone)) long work_tail(struct hot *h, long x)
{
	h->calls[WORK_TAIL]++;
	return work_leaf(h, x + 1);
}

__attribute__((noinline, noclone)) long spare_fn(struct hot *h, long x)
{
	h->calls[SPARE_FN]++;
	return x - 1;
}

/* Pausing: the hot threads park here, between rounds, so that no counted
 * function is running and every counter is final while main reads them. */
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int pause_asked, parked;

static void park_if_asked(void)
{
	if (!__atomic_load_n(&pause_asked, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&gate);
	parked++;
	pthread_cond_broadcast(&gate_cv);
	while (pause_asked)
		pthread_cond_wait(&gate_cv, &gate);
	parked--;
	pthread_mutex_unlock(&gate);
}

static void *hot_loop(void *arg)
{
	struct hot *h = arg;
	volatile long sink = 0;

	while (!stop_asked()) {
		park_if_asked();
		long x = sink;
		x = work_add(h, x);
		x = work_nest(h, x);
		x = work_tail(h, x);
		x = spare_fn(h, x);
		for (long i = 0; i < spin_steps; i++)
			sink = sink + i;
		sink = x;
	}
	return NULL;
}

static void set_pause(int on)
{
	pthread_mutex_lock(&gate);
	__atomic_store_n(&pause_asked, on, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&gate_cv);
	while (on && parked < HOT)
		pthread_cond_wait(&gate_cv, &gate);
	pthread_mutex_unlock(&gate);
}

/* accept(): one line in, "pong N\n" out. */
static int listen_fd;
static char socket_path[108];

static void serve_one(int fd, long n)
{
	char buf[64];
	ssize_t got = read(fd, buf, sizeof(buf));

	if (got <= 0)
		fail("read from a client", got, got < 0 ? errno : 0);
	int len = snprintf(buf, sizeof(buf), "pong %ld\n", n);
	ssize_t put = write(fd, buf, len);
	if (put != len)
		fail("write to a client", put, put < 0 ? errno : 0);
	if (close(fd))
		fail("close of a client", -1, errno);
}

static void *accept_loop(void *arg)
{
	(void)arg;
	for (long n = 1;; n++) {
		int fd = accept(listen_fd, NULL, NULL);
		if (fd < 0) {
			fail("accept", fd, errno);
			continue;
		}
		if (stop_asked()) {
			close(fd);
			return NULL;
		}
		serve_one(fd, n);
		__atomic_fetch_add(&accepts, 1, __ATOMIC_RELAXED);
	}
}

/* Sleep with nanosleep(), checking that it slept at least that long. */
static long now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts))
		fail("clock_gettime", -1, errno);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void sleep_ns(long ns)
{
	struct timespec req = { ns / 1000000000L, ns % 1000000000L }, rem;
	long start = now_ns();
	int r = nanosleep(&req, &rem);

	if (r)
		fail("nanosleep", r, errno);
	else if (now_ns() - start < ns)
		fail("nanosleep returned early, after ns", now_ns() - start, 0);
}

static void *sleep_loop(void *arg)
{
	(void)arg;
	while (!stop_asked()) {
		sleep_ns(10 * 1000000L);
		__atomic_fetch_add(&sleeps, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* The pipe: sequence numbers 1, 2, 3... then 0 to end. */
static int pipe_fd[2];

static void *feed_loop(void *arg)
{
	(void)arg;
	for (uint64_t seq = 1;; seq++) {
		uint64_t v = stop_asked() ? 0 : seq;
		ssize_t put = write(pipe_fd[1], &v, sizeof(v));
		if (put != sizeof(v))
			fail("write to the pipe", put, put < 0 ? errno : 0);
		if (!v)
			return NULL;
		sleep_ns(5 * 1000000L);
	}
}

static void *read_loop(void *arg)
{
	(void)arg;
	for (uint64_t want = 1;; want++) {
		uint64_t v;
		ssize_t got = read(pipe_fd[0], &v, sizeof(v));
		if (got != sizeof(v)) {
			fail("read from the pipe", got, got < 0 ? errno : 0);
			continue;
		}
		if (!v)
			return NULL;
		if (v != want)
			fail("pipe sequence out of order", (long)v, 0);
		__atomic_fetch_add(&reads, 1, __ATOMIC_RELAXED);
	}
}

/* The ping-pong pair: side S waits for turn == S, checks the sequence
 * number it is handed, bumps it and hands the turn over. */
static pthread_mutex_t pair_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pair_cv[2] = { PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER };
static int turn;
static long pair_seq;

static void *pair_loop(void *arg)
{
	int side = (int)(long)arg;

	pthread_mutex_lock(&pair_lock);
	for (long want = side;; want += 2) {
		while (turn != side && !stop_asked()) {
			int r = pthread_cond_wait(&pair_cv[side], &pair_lock);
			if (r)
				fail("pthread_cond_wait", r, r);
		}
		if (stop_asked())
			break;
		if (pair_seq != want)
			fail("ping-pong sequence", pair_seq, 0);
		pair_seq = want + 1;
		if (side)
			__atomic_fetch_add(&trips, 1, __ATOMIC_RELAXED);
		turn = !side;
		pthread_cond_signal(&pair_cv[!side]);
	}
	pthread_mutex_unlock(&pair_lock);
	return NULL;
}

static void print_counts(const char *what)
{
	printf("%s", what);
	for (int f = 0; f < NFUNCS; f++) {
		long sum = 0;
		for (int t = 0; t < HOT; t++)
			sum += hot[t].calls[f];
		printf(" %s=%ld", func_names[f], sum);
	}
	printf("\n");
}

static void print_status(const char *what)
{
	printf("%s errors=%ld accepts=%ld reads=%ld sleeps=%ld trips=%ld\n", what,
	       __atomic_load_n(&errors, __ATOMIC_RELAXED),
	       __atomic_load_n(&accepts, __ATOMIC_RELAXED),
	       __atomic_load_n(&reads, __ATOMIC_RELAXED),
	       __atomic_load_n(&sleeps, __ATOMIC_RELAXED),
	       __atomic_load_n(&trips, __ATOMIC_RELAXED));
}

static void open_listener(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "server: %s: socket path too long\n", path);
		exit(2);
	}
	strcpy(sa.sun_path, path);
	strcpy(socket_path, path);
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(listen_fd, 16)) {
		fprintf(stderr, "server: %s: %s\n", path, strerror(errno));
		exit(2);
	}
}

/* Wake accept() at quit: connect once more. */
static void wake_acceptor(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, socket_path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		fail("connect to wake accept", fd, errno);
	close(fd);
}

/* The next command; false at the end of input.  A read error (EINTR
 * included) is a failure, and reading goes on. */
static int read_command(char *line, int size)
{
	for (;;) {
		if (fgets(line, size, stdin))
			return 1;
		if (!ferror(stdin))
			return 0;
		fail("read of a command", -1, errno);
		clearerr(stdin);
	}
}

static void start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int r = pthread_create(t, NULL, fn, arg);

	if (r) {
		fprintf(stderr, "server: pthread_create: %s\n", strerror(r));
		exit(2);
	}
}

static void join(pthread_t t)
{
	int r = pthread_join(t, NULL);

	if (r)
		fail("pthread_join", r, r);
}

int main(int argc, char **argv)
{
	pthread_t acceptor, sleeper, feeder, reader, pair[2];
	char line[64];

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: server SOCKET [SPIN]\n");
		return 2;
	}
	if (argc == 3)
		spin_steps = atol(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	open_listener(argv[1]);
	if (pipe2(pipe_fd, O_CLOEXEC)) {
		perror("server: pipe2");
		return 2;
	}
	start(&acceptor, accept_loop, NULL);
	start(&sleeper, sleep_loop, NULL);
	start(&reader, read_loop, NULL);
	start(&feeder, feed_loop, NULL);
	for (long s = 0; s < 2; s++)
		start(&pair[s], pair_loop, (void *)s);
	for (int t = 0; t < HOT; t++)
		start(&hot[t].thread, hot_loop, &hot[t]);
	printf("ready pid=%d\n", (int)getpid());

	while (read_command(line, sizeof(line)) && strcmp(line, "quit\n")) {
		if (!strcmp(line, "status\n"))
			print_status("status");
		else if (!strcmp(line, "pause\n")) {
			set_pause(1);
			print_counts("paused");
		} else if (!strcmp(line, "resume\n")) {
			set_pause(0);
			printf("resumed\n");
		} else
			printf("unknown command %s", line);
	}

	set_pause(0);
	__atomic_store_n(&stopping, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&pair_lock);
	pthread_cond_broadcast(&pair_cv[0]);
	pthread_cond_broadcast(&pair_cv[1]);
	pthread_mutex_unlock(&pair_lock);
	wake_acceptor();
	pthread_t all[] = { acceptor, sleeper, feeder, reader, pair[0], pair[1] };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		join(all[i]);
	for (int t = 0; t < HOT; t++)
		join(hot[t].thread);
	print_counts("counts");
	print_status("final");
	unlink(socket_path);
	return errors ? 1 : 0;
}
