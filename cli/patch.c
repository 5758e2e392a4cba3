/* SPDX-License-Identifier: MIT */
/*
 * ftpad patch PID PATCH.so: live-patch the padded functions of a running
 * process (docs/livepatch.md).  libftpad gets in as for `ftpad attach`
 * (attach_target.c's checks, attach_inject.c's loader stub); its control
 * thread loads and resolves the patch, names the code that no thread may
 * be running when the functions switch, and waits.  This tool then stops
 * every other thread with ptrace, unwinds their stacks with elfutils'
 * libdw, and says go only when none is in that code; else it lets them
 * run a millisecond and looks again, and gives up after a while naming
 * the function and the thread.  --immediate skips the check.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>

#include "attach.h"
#include "commands.h"
#include "ftpad_record.h"
#include "tracedir.h"

#define ANSWER_TIMEOUT_MS 30000
/* As libpulp's `ulp trigger` (100 tries, 1 ms apart), with time for
 * the unwinding itself. */
#define CHECK_TRIES 100
#define CHECK_PAUSE_US 1000
#define MAX_RANGES 64
#define MAX_STOPPED 4096
#define STOP_TIMEOUT_MS 2000

struct patch_opts {
	pid_t pid;
	const char *file;
	bool revert, list, immediate, verbose;
};

struct range {
	unsigned long long lo, hi;
	char what[256];
};

struct stopped {
	pid_t tid;
	int sig; /* a signal it stopped for, given back when let go */
};

/* What the stack check found in the way. */
struct busy {
	const struct range *r;
	pid_t tid;
};

/* ---- the patch file ---- */

/* Only root or the process's owner may have written what it will run. */
static bool safe_owner(const struct stat *st, uid_t owner)
{
	return (st->st_uid == 0 || st->st_uid == owner) && !(st->st_mode & S_IWOTH) &&
	       (!(st->st_mode & S_IWGRP) || st->st_gid == 0);
}

static int check_file(const char *file, uid_t owner, char *real)
{
	struct stat st;
	char dir[PATH_MAX];
	char *slash;

	if (!realpath(file, real)) {
		fprintf(stderr, "ftpad: error: %s: %s\n", file, strerror(errno));
		return -1;
	}
	if (stat(real, &st) || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "ftpad: error: %s: not a regular file\n", real);
		return -1;
	}
	if (!safe_owner(&st, owner)) {
		fprintf(stderr, "ftpad: error: %s is writable by others than root and the "
			"process's owner: refused\n", real);
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s", real);
	slash = strrchr(dir, '/');
	*(slash == dir ? slash + 1 : slash) = 0;
	if (stat(dir, &st) || !safe_owner(&st, owner)) {
		fprintf(stderr, "ftpad: error: the folder %s is writable by others than root and "
			"the process's owner: %s refused\n", dir, real);
		return -1;
	}
	return 0;
}

/* ---- stopping the threads ---- */

static bool have(const struct stopped *s, size_t n, pid_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (s[i].tid == tid)
			return true;
	return false;
}

/* Whether thread tid of pid is gone or on its way out (a zombie: the
 * kernel refuses to trace it, with EPERM). */
static bool exiting(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *paren;
	FILE *f;
	bool gone = true;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return true;
	if (fgets(buf, sizeof(buf), f) && (paren = strrchr(buf, ')')) && paren[1] == ' ')
		gone = paren[2] == 'Z' || paren[2] == 'X';
	fclose(f);
	return gone;
}

/* Seize and interrupt tid: 1 done (its stop is to be waited for), 0
 * gone, -1 refused.  A thread that is ending (the previous patch
 * session's control thread, say) is gone. */
static int interrupt_one(pid_t pid, pid_t tid)
{
	if (ptrace(PTRACE_SEIZE, tid, 0, 0))
		return errno == ESRCH || (errno == EPERM && exiting(pid, tid)) ? 0 : -1;
	return ptrace(PTRACE_INTERRUPT, tid, 0, 0) ? 0 : 1;
}

/* The stop of interrupted thread tid: 1 stopped (into out), 0 gone, -1 it
 * neither stopped nor ended by deadline (it was on its way out when
 * seized): bounded, so that it cannot hang the tool.  Polled finely: the
 * threads stopped before it wait meanwhile. */
static int wait_stopped(pid_t pid, pid_t tid, uint64_t deadline, struct stopped *out)
{
	int st;

	for (;;) {
		pid_t r = waitpid(tid, &st, __WALL | WNOHANG);

		if (r == tid)
			break;
		if (r < 0 || attach_now_ms() > deadline)
			return r < 0 || exiting(pid, tid) ? 0 : -1;
		usleep(20);
	}
	if (!WIFSTOPPED(st))
		return 0;
	out->tid = tid;
	/* A signal-delivery stop keeps its signal for the detach. */
	out->sig = (st >> 16) == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(st);
	return 1;
}

static void let_go(struct stopped *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ptrace(PTRACE_DETACH, s[i].tid, 0, (void *)(long)s[i].sig);
}

/* Every thread of pid but keep stopped, new ones included; their count,
 * or -1 (all let go again).  Each listing's threads are all interrupted
 * first, then waited for: a thread stays stopped for the slowest one's
 * stop, not for the sum of them. */
static long stop_all(pid_t pid, pid_t keep, struct stopped *s)
{
	static pid_t asked[MAX_STOPPED];
	char path[64];
	size_t n = 0;
	bool more = true;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	while (more) {
		DIR *d = opendir(path);
		struct dirent *e;
		size_t nasked = 0;
		uint64_t deadline;

		if (!d)
			return let_go(s, n), -1;
		while ((e = readdir(d))) {
			pid_t tid = (pid_t)atoi(e->d_name);
			int r;

			if (tid <= 0 || tid == keep || have(s, n, tid))
				continue;
			if (n + nasked == MAX_STOPPED)
				return closedir(d), let_go(s, n), -1;
			r = interrupt_one(pid, tid);
			if (r < 0)
				return closedir(d), let_go(s, n), -1;
			if (r)
				asked[nasked++] = tid;
		}
		closedir(d);
		deadline = attach_now_ms() + STOP_TIMEOUT_MS;
		more = false;
		for (size_t i = 0; i < nasked; i++) {
			int r = wait_stopped(pid, asked[i], deadline, &s[n]);

			if (r < 0)
				return let_go(s, n), -1;
			n += (size_t)r;
			/* List again if one was stopped: it may have made new
			 * ones.  Not for one that is gone, which the list may
			 * show until its process is reaped: that would loop. */
			more |= r > 0;
		}
	}
	return (long)n;
}

/* The thread's name (its comm), for a refusal. */
static void thread_name(pid_t pid, pid_t tid, char *out, size_t size)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	snprintf(out, size, "?");
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(out, (int)size, f))
		out[strcspn(out, "\n")] = 0;
	fclose(f);
}

/* ---- the stack check ---- */

struct frames {
	const struct range *r;
	size_t nr;
	const struct range *hit;
	size_t seen; /* frames */
};

static int frame_cb(Dwfl_Frame *f, void *arg)
{
	struct frames *fr = arg;
	Dwarf_Addr pc;
	bool activation;

	fr->seen++;
	if (!dwfl_frame_pc(f, &pc, &activation))
		return DWARF_CB_ABORT;
	if (!activation)
		pc--; /* a return address: the call is the byte before */
	for (size_t i = 0; i < fr->nr; i++) {
		if (pc >= fr->r[i].lo && pc < fr->r[i].hi) {
			fr->hit = &fr->r[i];
			return DWARF_CB_ABORT;
		}
	}
	return DWARF_CB_OK;
}

/* Whether a stopped thread is in one of the ranges (*b says which), or
 * its stack could not be read (b->r NULL): both refuse. */
static bool in_ranges(Dwfl *dwfl, const struct stopped *s, size_t n, const struct range *r,
		      size_t nr, struct busy *b)
{
	for (size_t i = 0; i < n; i++) {
		struct frames fr = { r, nr, NULL, 0 };

		dwfl_getthread_frames(dwfl, s[i].tid, frame_cb, &fr);
		/* Not even its pc: nothing says where it is. */
		if (fr.hit || !fr.seen) {
			*b = (struct busy){ fr.hit, s[i].tid };
			return true;
		}
	}
	return false;
}

static Dwfl *open_dwfl(pid_t pid)
{
	static const Dwfl_Callbacks cb = {
		.find_elf = dwfl_linux_proc_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
	};
	Dwfl *d = dwfl_begin(&cb);

	if (!d)
		return NULL;
	if (dwfl_linux_proc_report(d, pid) || dwfl_report_end(d, NULL, NULL) ||
	    dwfl_linux_proc_attach(d, pid, true)) {
		dwfl_end(d);
		return NULL;
	}
	return d;
}

static bool send_line(struct session *s, const char *line)
{
	size_t len = strlen(line);

	return send(s->conn, line, len, MSG_NOSIGNAL) == (ssize_t)len;
}

/*
 * With every other thread stopped and none in the ranges: go, and the
 * answer read while they are stopped (the switch happens then).  0 done,
 * -1 after the message.
 */
static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* --verbose: how long the threads were held, and what for. */
static void say_held(pid_t pid, long n, int tries, const double at[3], double end)
{
	fprintf(stderr, "ftpad: process %d: %ld threads stopped for %.3f ms (stopping %.3f, "
		"stack check %.3f, switch %.3f), at try %d\n", pid, n, end - at[0], at[1] - at[0],
		at[2] - at[1], end - at[2], tries + 1);
}

static int check_and_go(struct target *t, struct session *s, const struct range *r, size_t nr,
			pid_t control, bool verbose, char *line, size_t size)
{
	static struct stopped st[MAX_STOPPED];
	struct busy b = { 0 };
	char name[32];
	double at[3];

	/* The modules read once, before any thread is stopped: none can be
	 * loaded or unloaded meanwhile, since the control thread holds the
	 * loader's lock until it hears from us; and what libdw reads of them
	 * (their CFI) is read once for every try. */
	Dwfl *dwfl = open_dwfl(t->pid);

	for (int tries = 0; tries < CHECK_TRIES; tries++) {
		long n;
		bool in;

		at[0] = now_ms();
		n = stop_all(t->pid, control, st);
		at[1] = now_ms();

		if (n < 0) {
			if (dwfl)
				dwfl_end(dwfl);
			send_line(s, FTPAD_PATCH_ABORT "\n");
			return attach_fail(t->pid, "cannot stop its threads: %s", strerror(errno)),
			       -1;
		}
		in = !dwfl || in_ranges(dwfl, st, (size_t)n, r, nr, &b);
		at[2] = now_ms();
		if (!in) {
			int err = !send_line(s, FTPAD_PATCH_GO "\n") ||
				  attach_read_line(s, line, size, ANSWER_TIMEOUT_MS, NULL);

			let_go(st, (size_t)n);
			if (verbose)
				say_held(t->pid, n, tries, at, now_ms());
			dwfl_end(dwfl);
			if (err || strcmp(line, FTPAD_PATCH_SWITCHED))
				return attach_fail(t->pid, "no answer after the go from libftpad's "
						  "control thread"), -1;
			/* The final answer follows, once the threads run. */
			return attach_read_line(s, line, size, ANSWER_TIMEOUT_MS, NULL)
				       ? (attach_fail(t->pid, "no answer from libftpad's control "
						     "thread"), -1)
				       : 0;
		}
		let_go(st, (size_t)n);
		if (!dwfl)
			break;
		usleep(CHECK_PAUSE_US);
	}
	if (dwfl)
		dwfl_end(dwfl);
	send_line(s, FTPAD_PATCH_ABORT "\n");
	attach_read_line(s, line, size, ANSWER_TIMEOUT_MS, NULL);
	if (!b.r)
		return attach_fail(t->pid, "cannot read the stack of thread %d (libdw: %s)", b.tid,
				   dwfl_errmsg(-1)), -1;
	thread_name(t->pid, b.tid, name, sizeof(name));
	return attach_fail(t->pid, "%s is running on thread %d (%s); tried %d times: nothing "
			   "changed (--immediate switches anyway)", b.r->what, b.tid, name,
			   CHECK_TRIES), -1;
}

/* ---- the conversation ---- */

static int answer(struct target *t, const struct patch_opts *o, const char *line)
{
	int err, at = 0;

	if (!strcmp(line, FTPAD_PATCH_DONE))
		return 0;
	if (sscanf(line, FTPAD_ATTACH_ERROR_SCAN, &err, &at) == 1 && at)
		return attach_fail(t->pid, "%s", line + at);
	(void)o;
	return attach_fail(t->pid, "libftpad says: %s", line);
}

static int converse(struct target *t, struct session *s, const struct patch_opts *o)
{
	static struct range r[MAX_RANGES];
	char line[PATH_MAX + 128];
	size_t nr = 0;

	for (;;) {
		int at = 0, control;

		if (attach_read_line(s, line, sizeof(line), ANSWER_TIMEOUT_MS, NULL))
			return attach_fail(t->pid, "no answer from libftpad's control thread");
		if (o->list && !strncmp(line, "patch ", 6)) {
			printf("%s\n", line + 6);
			continue;
		}
		if (nr < MAX_RANGES &&
		    sscanf(line, FTPAD_PATCH_RANGE_SCAN, &r[nr].lo, &r[nr].hi, &at) == 2 && at) {
			snprintf(r[nr].what, sizeof(r[nr].what), "%s", line + at);
			nr++;
			continue;
		}
		if (sscanf(line, FTPAD_PATCH_READY_SCAN, &control) == 1) {
			if (check_and_go(t, s, r, nr, control, o->verbose, line, sizeof(line)))
				return 1;
		}
		return answer(t, o, line);
	}
}

/* ---- the command ---- */

static const char patch_usage[] =
	"usage: ftpad patch PID PATCH.so [--immediate] [-v]\n"
	"       ftpad patch PID --revert PATCH.so [--immediate] [-v]\n"
	"       ftpad patch PID --list\n"
	"\n"
	"Replace functions of a running process with those of PATCH.so, a shared\n"
	"object built with <ftpad_patch.h> (docs/livepatch.md), or put them back\n"
	"(--revert), or list the patches applied.  Returns once every call that\n"
	"starts afterwards runs the new code.  A function switches only while no\n"
	"thread runs it (the threads are stopped and their stacks read, a few\n"
	"times if needed); --immediate skips that check.  -v, --verbose says how\n"
	"long the threads were held stopped, and what for.  PATCH.so and its\n"
	"folder must be writable by root or the process's owner only.\n";

static int parse_patch(int argc, char **argv, struct patch_opts *o)
{
	static const struct option longopts[] = {
		{ "revert", no_argument, NULL, 'r' },
		{ "list", no_argument, NULL, 'l' },
		{ "immediate", no_argument, NULL, 'i' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	long v;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': o->revert = true; break;
		case 'l': o->list = true; break;
		case 'i': o->immediate = true; break;
		case 'v': o->verbose = true; break;
		case 'h': fputs(patch_usage, stdout); exit(0);
		default: return usage_error("patch: unknown option");
		}
	}
	if (optind >= argc)
		return usage_error("patch: missing PID");
	errno = 0;
	v = strtol(argv[optind], &end, 10);
	if (errno || !*argv[optind] || *end || v <= 0 || v > INT_MAX)
		return usage_error("patch: '%s' is not a process id", argv[optind]);
	o->pid = (pid_t)v;
	o->file = optind + 1 < argc ? argv[optind + 1] : NULL;
	if (optind + 2 < argc || (o->list && (o->file || o->revert)) || (!o->list && !o->file))
		return usage_error("patch: give PID and PATCH.so, or PID --list");
	return 0;
}

static size_t build_request(const struct patch_opts *o, const char *socket, const char *file,
			    char *out, size_t size)
{
	int n = snprintf(out, size, "%s=%s%c%s=%s%c", FTPAD_ENV_ATTACH_SOCKET, socket, 0,
			 FTPAD_ENV_PATCH_OP, o->list ? "list" : o->revert ? "revert" : "apply", 0);

	if (!o->list)
		n += snprintf(out + n, size - (size_t)n, "%s=%s%c%s=%s%c", FTPAD_ENV_PATCH_FILE,
			      file, 0, FTPAD_ENV_PATCH_CHECK, o->immediate ? "0" : "1", 0);
	if (n < 0 || (size_t)n + 1 >= size)
		return 0;
	out[n] = 0;
	return (size_t)n + 1;
}

int cmd_patch(int argc, char **argv)
{
	struct patch_opts o = { 0 };
	struct target t = { .mem = -1 };
	struct session s = { .listen = -1, .conn = -1, .signals = -1 };
	char real[PATH_MAX] = "", request[PATH_MAX + 512];
	size_t len;
	int err = parse_patch(argc, argv, &o);

	if (err)
		return err;
	t.pid = o.pid;
	attach_name_command("patch", "patching");
	if (attach_check_target(&t))
		return 1;
	if (o.file && check_file(o.file, t.uid, real))
		return 1;
	if (!t.lib[0] && !t.start && find_library(t.lib, sizeof(t.lib)))
		return 1;
	if (attach_open_socket(&s))
		return attach_fail(t.pid, "cannot open the control socket: %s", strerror(errno));
	len = build_request(&o, s.name, real, request, sizeof(request));
	if (!len)
		return attach_fail(t.pid, "the request is too long");
	if (attach_load_library(&t, &s, request, len))
		return 1;
	err = converse(&t, &s, &o);
	close(s.conn);
	return err ? 1 : 0;
}
