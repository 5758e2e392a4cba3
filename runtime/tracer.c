/* SPDX-License-Identifier: MIT */
/*
 * tracer.c - the built-in printing tracer, started from the environment:
 *
 *   FTPAD_FILTER=globs   trace the functions matching these (comma-separated)
 *   FTPAD_OUTPUT=file    append the trace to file (default: stderr)
 *
 * One line per call, as ftrace's function tracer prints it:
 *   <comm>-<tid> <function> <-<caller>
 * and at exit one summary line:
 *   ftpad: <N> sites found, <M> sites enabled, <K> calls seen
 * With FTPAD_EARLY=1, the calls very early tracing recorded come first
 * (early.c), in the same format.
 *
 * Each line is a single write(2) of a buffer on the callback's own stack,
 * with the file opened O_APPEND, so threads and processes sharing the file
 * never interleave within a line and no stdio lock is taken in a callback.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "internal.h"

#define TLS __thread __attribute__((tls_model("initial-exec")))

/* Where lines go: stderr, or FTPAD_OUTPUT's file, which the program may
 * close (closefrom) and reopen another file on: checked before each line. */
static int out_fd = -1;                   /* atomic */
static struct ftpad_own_fd out_file;      /* FTPAD_OUTPUT's file, fixed at start */
static bool out_named;                    /* out_fd is FTPAD_OUTPUT's */
static char out_path[4096];
static int out_lost;                      /* atomic: its loss was reported */
static unsigned long calls;   /* atomic */
static int stopped;           /* atomic: the summary has been written */
static struct ftpad_ops tracer_ops;

/* The thread's name and id, read once per thread (and again after fork). */
static TLS char comm[17];
static TLS pid_t tid;

static void forget_thread(void)
{
	tid = 0;
}

static void name_caller(uintptr_t addr, char *buf, size_t size)
{
	const struct ftpad_sym *sym = ftpad_symbol_of(addr);

	if (sym) {
		snprintf(buf, size, "%s", sym->name);
		return;
	}
	/* dladdr's dynamic symbols, then the address, with its +offset dropped. */
	ftpad_lookup_symbol(addr, buf, size);
	if (buf[0] != '0')
		buf[strcspn(buf, "+")] = 0;
}

/*
 * The descriptor to write to: stderr, or FTPAD_OUTPUT's file if out_fd
 * still holds it.  If not (the program closed the number, and may have
 * opened a file of its own on it), the file is opened again; a file that
 * is no longer the one named at start (removed, replaced) gets nothing:
 * -1, reported once.
 */
static int output(void)
{
	int fd = __atomic_load_n(&out_fd, __ATOMIC_ACQUIRE), now;

	if (!out_named || ftpad_own_fd_valid(&out_file, fd))
		return fd;
	now = ftpad_own_fd_open(&out_file, out_path, O_WRONLY | O_APPEND, 0, true);
	if (now < 0) {
		if (!__atomic_exchange_n(&out_lost, 1, __ATOMIC_RELAXED))
			ftpad_warn("ftpad: error: FTPAD_OUTPUT '%s' was closed, and cannot be "
				   "opened again: %s; trace lines are dropped\n", out_path,
				   strerror(-now));
		return -1;
	}
	/* Another thread may have opened it again first: then use its. */
	if (!__atomic_compare_exchange_n(&out_fd, &fd, now, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		close(now);
		now = fd;
	}
	return now;
}

static void write_out(const char *line, int len)
{
	int fd = output();

	while (fd >= 0 && write(fd, line, len) < 0 && errno == EINTR)
		;
}

/* One line, in one write(2). */
static void write_line(const char *who, int id, unsigned long ip, unsigned long parent_ip)
{
	char line[1024], caller[512];
	const char *name = ftpad_lookup_name(ip);
	int len;

	name_caller(parent_ip, caller, sizeof(caller));
	len = name ? snprintf(line, sizeof(line), "%s-%d %s <-%s\n", who, id, name, caller)
		   : snprintf(line, sizeof(line), "%s-%d %#lx <-%s\n", who, id, ip, caller);
	if (len >= (int)sizeof(line)) {
		len = sizeof(line) - 1;
		line[len - 1] = '\n';
	}
	write_out(line, len);
}

static void trace_call(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		       struct ftpad_regs *regs)
{
	(void)ops, (void)regs;
	__atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&stopped, __ATOMIC_RELAXED))
		return;
	if (!tid) {
		prctl(PR_GET_NAME, comm);
		tid = gettid();
	}
	write_line(comm, tid, ip, parent_ip);
}

/* What very early tracing saw, ahead of everything else (early.c). */
static void write_early(void)
{
	size_t n, dropped;
	const struct ftpad_early_entry *e = ftpad_early_stop(&n, &dropped);
	char line[160];
	int len;

	for (size_t i = 0; i < n; i++)
		if (!e[i].exit_site)
			write_line(e[i].comm, e[i].tid, e[i].ip, e[i].parent_ip);
	__atomic_fetch_add(&calls, n + dropped, __ATOMIC_RELAXED);
	if (dropped) {
		len = snprintf(line, sizeof(line),
			       "ftpad: %zu early calls not recorded: the early buffer was full\n",
			       dropped);
		write_out(line, len);
	}
}

static void write_summary(void)
{
	struct ftpad_stats st = { .sz = sizeof(st) };
	char line[160];
	int len;

	if (__atomic_exchange_n(&stopped, 1, __ATOMIC_ACQ_REL))
		return;
	ftpad_get_stats(&st);
	len = snprintf(line, sizeof(line), "ftpad: %lu sites found, %lu sites enabled, %lu calls seen\n",
		       st.sites, st.enabled, __atomic_load_n(&calls, __ATOMIC_RELAXED));
	write_out(line, len);
}

/* After every other destructor of the program and of the libraries it uses. */
__attribute__((destructor(101))) static void tracer_stop(void)
{
	/* Tracing early, and main never came (starthook.c): the trace now. */
	if (out_fd < 0 && ftpad_early_active())
		ftpad_tracer_start();
	if (out_fd >= 0)
		write_summary();
}

static int open_output(void)
{
	const char *path = getenv(FTPAD_ENV_OUTPUT);
	int fd;

	if (!path || !*path)
		return STDERR_FILENO;
	if (strlen(path) >= sizeof(out_path)) {
		ftpad_warn("ftpad: error: FTPAD_OUTPUT is too long; tracing to stderr\n");
		return STDERR_FILENO;
	}
	/* Appending: the children of a traced program share the file. */
	fd = ftpad_own_fd_open(&out_file, path, O_WRONLY | O_CREAT | O_APPEND, 0644, false);
	if (fd < 0) {
		ftpad_warn("ftpad: error: cannot open FTPAD_OUTPUT '%s': %s; tracing to stderr\n",
			   path, strerror(-fd));
		return STDERR_FILENO;
	}
	strcpy(out_path, path);
	out_named = true;
	return fd;
}

void ftpad_tracer_start(void)
{
	const char *filter = getenv(FTPAD_ENV_FILTER);
	int err;

	ftpad_record_start(); /* record_session.c: FTPAD_RECORD */
	if (!filter || out_fd >= 0)
		return;
	out_fd = open_output();
	pthread_atfork(NULL, NULL, forget_thread);
	/* Callers are named from the callback: every symbol table is read
	 * when its module is, outside callbacks (before register patches). */
	ftpad_load_symbols_eagerly();
	tracer_ops.func = trace_call;
	/* It calls only libc and libftpad, but a program may trace anything. */
	tracer_ops.flags = FTPAD_OPS_FL_RECURSION;
	write_early();
	err = ftpad_set_filter(&tracer_ops, filter, 1);
	if (!err)
		err = ftpad_register_ops(&tracer_ops);
	if (err)
		ftpad_warn("ftpad: error: cannot start tracing FTPAD_FILTER='%s': %s\n", filter,
			   ftpad_strerror(err));
}
