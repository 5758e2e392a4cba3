/* SPDX-License-Identifier: MIT */
/*
 * ftpad attach PID: record a process that is already running
 * (docs/design.md, "Attaching to a running process"; docs/tracing.md says
 * who may attach to whom and what is written into the process).
 *
 * attach_target.c checks the process, attach_inject.c gets libftpad in
 * through the loader stub.  From then on the process runs free: the
 * session is driven over an abstract Unix socket whose end of file (this
 * tool exiting, however) ends it, so getting out needs no ptrace.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "attach.h"
#include "commands.h"
#include "ftpad_record.h"
#include "tracedir.h"

#define REPLY_TIMEOUT_MS 30000     /* the control thread's answers */
#define REQUEST_SIZE 16384         /* ours; libftpad takes up to FTPAD_ATTACH_REQUEST_MAX */
_Static_assert(REQUEST_SIZE <= FTPAD_ATTACH_REQUEST_MAX, "a request libftpad would refuse");

struct attach_opts {
	pid_t pid;
	struct dir_opts d;
	const char *library;
	double duration; /* seconds; 0: until Ctrl-C or the exit */
	bool graph;
};

/* ---- the session (struct session: attach.h) ---- */

int attach_open_socket(struct session *s)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	unsigned long long r = 0;
	socklen_t len;

	if (getrandom(&r, sizeof(r), 0) < 0)
		r = (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32);
	snprintf(s->name, sizeof(s->name), "ftpad-attach.%d.%016llx", getpid(), r);
	memcpy(a.sun_path + 1, s->name, strlen(s->name));
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(s->name));
	s->listen = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->listen < 0 || bind(s->listen, (struct sockaddr *)&a, len) || listen(s->listen, 4))
		return -1;
	return 0;
}

/* A connection from the process itself (SO_PEERCRED), if one waits. */
static int accept_peer(struct session *s, pid_t pid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd = accept4(s->listen, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return -1;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.pid != pid) {
		close(fd);
		return -1;
	}
	s->conn = fd;
	return 0;
}

static int wait_stub(struct target *t, struct session *s, int64_t *result, char *errtext)
{
	uint64_t deadline = attach_now_ms() + ATTACH_LOAD_TIMEOUT_MS;

	while (attach_now_ms() < deadline) {
		struct pollfd p = { s->listen, POLLIN, 0 };
		int r;

		if (s->conn < 0 && poll(&p, 1, 1) > 0)
			accept_peer(s, t->pid);
		else if (s->conn >= 0)
			usleep(1000);
		r = attach_poll_stub(t, result, errtext);
		if (r)
			return r < 0 ? (attach_gone(t->pid), -1) : 0;
	}
	if (!attach_alive(t->pid))
		return attach_gone(t->pid), -1;
	return attach_fail(t->pid, "its loader did not finish in %d s (dlopen blocked?); its stub "
			   "is left in place", ATTACH_LOAD_TIMEOUT_MS / 1000), -1;
}

static int load_error(struct target *t, int64_t result, const char *errtext)
{
	if (result == AB_RESULT_NO_DLOPEN)
		return attach_fail(t->pid, "dlopen of %s failed: %s", t->lib, errtext);
	if (result == AB_RESULT_NO_DLSYM)
		return attach_fail(t->pid, "%s has no " FTPAD_ATTACH_ENTRY ": %s", t->lib, errtext);
	if (result == -EBUSY)
		return attach_fail(t->pid, "it is already recording");
	return attach_fail(t->pid, FTPAD_ATTACH_ENTRY ": %s", strerror((int)-result));
}

/* One line from the control thread, its newline taken off; 0, or -1 on
 * end of file (the process exited), a timeout or a signal (*signalled). */
int attach_read_line(struct session *s, char *out, size_t size, int timeout_ms, bool *signalled)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : attach_now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		char *nl = memchr(s->buf, '\n', s->len);
		struct pollfd p[2] = { { s->conn, POLLIN, 0 }, { s->signals, POLLIN, 0 } };
		uint64_t now = attach_now_ms();
		ssize_t n;

		if (nl) {
			size_t l = (size_t)(nl - s->buf);

			snprintf(out, size, "%.*s", (int)l, s->buf);
			memmove(s->buf, nl + 1, s->len - l - 1);
			s->len -= l + 1;
			return 0;
		}
		if (now >= deadline)
			return -1;
		if (poll(p, signalled ? 2 : 1, deadline == UINT64_MAX ? -1 : (int)(deadline - now)) < 0)
			continue;
		if (signalled && (p[1].revents & POLLIN)) {
			*signalled = true;
			return -1;
		}
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		if (s->len == sizeof(s->buf))
			s->len = 0; /* an overlong line: dropped */
		n = read(s->conn, s->buf + s->len, sizeof(s->buf) - s->len);
		if (n <= 0)
			return -1;
		s->len += (size_t)n;
	}
}

/* Until Ctrl-C/SIGTERM, the duration, or the process's end (end of file
 * on the socket).  true: the session still runs (stop it). */
static bool wait_session(struct session *s, double duration)
{
	uint64_t deadline = duration > 0 ? attach_now_ms() + (uint64_t)(duration * 1000) : UINT64_MAX;

	for (;;) {
		struct pollfd p[2] = { { s->conn, POLLIN, 0 }, { s->signals, POLLIN, 0 } };
		uint64_t now = attach_now_ms();
		char c;

		if (now >= deadline)
			return true;
		if (poll(p, 2, deadline == UINT64_MAX ? -1 : (int)(deadline - now)) < 0)
			continue;
		if (p[1].revents & POLLIN)
			return true;
		if (p[0].revents && recv(s->conn, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0)
			return false; /* the process ended its session: it exited */
		if (p[0].revents & POLLIN)
			return true; /* an unexpected line: stop, and read it below */
	}
}

struct results {
	unsigned long long sites, enabled, events, dropped, bytes;
	bool started, stopped;
};

/* FTPAD_ATTACH_ERROR_FMT: libftpad could not start the session. */
static int start_error(struct target *t, const char *line)
{
	int err, at = 0;

	if (sscanf(line, FTPAD_ATTACH_ERROR_SCAN, &err, &at) == 1 && at)
		return attach_fail(t->pid, "libftpad cannot record: %s (%s)", line + at,
				   strerror(err));
	return attach_fail(t->pid, "libftpad says: %s", line);
}

static bool send_stop(struct session *s)
{
	static const char line[] = FTPAD_ATTACH_STOP "\n";

	return send(s->conn, line, sizeof(line) - 1, MSG_NOSIGNAL) == sizeof(line) - 1;
}

/* The start's answer.  Ctrl-C before it (a signal that came while getting
 * in, or before): "stop" is sent at once, so that the control thread, which
 * reads its socket only once started, stops the session then, with the
 * trace directory still there to finish, rather than patching and creating
 * files in a directory the tool would be removing. */
static int read_start(struct target *t, struct session *s, char *line, size_t size,
		      bool *stop_sent)
{
	bool signalled = false;

	if (!attach_read_line(s, line, size, REPLY_TIMEOUT_MS, &signalled))
		return 0;
	if (signalled && (*stop_sent = send_stop(s)) &&
	    !attach_read_line(s, line, size, REPLY_TIMEOUT_MS, NULL))
		return 0;
	if (!attach_alive(t->pid)) /* end of file: it died before its start */
		return attach_gone(t->pid);
	return attach_fail(t->pid, "no answer from libftpad's control thread");
}

static int run_session(struct target *t, struct session *s, const struct attach_opts *o,
		       struct results *r)
{
	char line[512];
	bool stop_sent = false;

	if (read_start(t, s, line, sizeof(line), &stop_sent))
		return 1;
	if (sscanf(line, FTPAD_ATTACH_STARTED_SCAN, &r->sites, &r->enabled) != 2)
		return start_error(t, line);
	r->started = true;
	fprintf(stderr, "ftpad: attached to process %d: %llu sites, %llu enabled%s\n", t->pid,
		r->sites, r->enabled,
		stop_sent ? "; interrupted, detaching" : o->duration > 0 ? "" : "; Ctrl-C to detach");
	if ((stop_sent || (wait_session(s, o->duration) && send_stop(s))) &&
	    !attach_read_line(s, line, sizeof(line), REPLY_TIMEOUT_MS, NULL)) {
		if (sscanf(line, FTPAD_ATTACH_STOPPED_SCAN, &r->events,
			   &r->dropped, &r->bytes) != 3)
			return attach_fail(t->pid, "libftpad says: %s", line);
		r->stopped = true;
	} else if (attach_alive(t->pid)) {
		return attach_fail(t->pid, "libftpad's control thread did not stop in %d s",
			    REPLY_TIMEOUT_MS / 1000);
	}
	return 0;
}

/* The request (ftpad_record.h): NAME=VALUE settings, each ended by a
 * NUL, then an empty one.  --depth and --time-filter need the exits (where a frame ends), as
 * `ftpad record` always has them: either one turns --graph on. */
static size_t build_request(const struct attach_opts *o, const char *tmp, const char *socket,
			    char *out, size_t size)
{
	char line[8192], bytes[32], depth[32], time_filter[32], ring[32];
	bool exits = o->graph || o->d.depth || o->d.time_filter_ns;
	size_t len = 0;
	const char *settings[][2] = {
		{ FTPAD_ENV_RECORD, tmp },
		{ FTPAD_ENV_RECORD_EXITS, exits ? "1" : "0" },
		{ FTPAD_ENV_RECORD_FILTER, o->d.filter },
		{ FTPAD_ENV_RECORD_NOTRACE, o->d.notrace },
		{ FTPAD_ENV_RECORD_SIZE, o->d.size_mb ? bytes : "" },
		{ FTPAD_ENV_RECORD_DEPTH, o->d.depth ? depth : "" },
		{ FTPAD_ENV_RECORD_TIME_FILTER, o->d.time_filter_ns ? time_filter : "" },
		{ FTPAD_ENV_RECORD_RING, ring },
		{ FTPAD_ENV_RECORD_TRIGGER, o->d.trigger },
		{ FTPAD_ENV_ATTACH_SOCKET, socket },
	};

	snprintf(bytes, sizeof(bytes), "%llu", o->d.size_mb << 20);
	snprintf(depth, sizeof(depth), "%llu", o->d.depth);
	snprintf(time_filter, sizeof(time_filter), "%llu", o->d.time_filter_ns);
	ring_setting(&o->d, ring, sizeof(ring));
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
		int n;

		if (!*settings[i][1])
			continue;
		n = snprintf(line, sizeof(line), "%s=%s", settings[i][0], settings[i][1]);
		if (n < 0 || len + (size_t)n + 2 > size)
			return 0;
		memcpy(out + len, line, (size_t)n + 1);
		len += (size_t)n + 1;
	}
	out[len++] = 0;
	return len;
}

/* ---- the command ---- */

static const char attach_usage[] =
	"usage: ftpad attach PID [-F GLOB]... [-N GLOB]... [--graph] [--depth N]\n"
	"                        [--time-filter DUR] [-o DIR] [--duration SECONDS]\n"
	"                        [--size MB | --ring MB [--trigger GLOB]...] [--force]\n"
	"                        [--library PATH]\n"
	"       ftpad record -p PID [same options]\n"
	"\n"
	"Record the padded functions of a running process into DIR (default\n"
	"ftpad.data) until Ctrl-C, the duration or the process's exit; the process\n"
	"keeps running, its text as it was (docs/tracing.md, \"Attaching to a\n"
	"running process\").  -F/-N: record only/never functions matching GLOB;\n"
	"--graph: exits too (call graphs, durations), else entries only; --depth N:\n"
	"only frames up to depth N of each thread; --time-filter DUR (500ns, 10us,\n"
	"1ms): drop calls shorter than DUR with no recorded call inside (both as\n"
	"`ftpad record`'s, and both turn --graph on); --size MB: cap the events'\n"
	"bytes (default: while 10% of DIR's file system stays free); --ring MB:\n"
	"keep only the newest MB of events, in memory, written at the detach and\n"
	"on 'ftpad snapshot PID' (DIR/snapshot-N); --trigger GLOB: a snapshot when\n"
	"a function matching GLOB is entered; --library: the libftpad.so to load.\n";

static int parse_pid(const char *text, pid_t *pid)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || !*text || *end || v <= 0 || v > INT_MAX)
		return usage_error("attach: '%s' is not a process id", text);
	*pid = (pid_t)v;
	return 0;
}

static int parse_attach(int argc, char **argv, struct attach_opts *o)
{
	static const struct option longopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "graph", no_argument, NULL, 'g' },
		{ "output", required_argument, NULL, 'o' },
		{ "duration", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 's' },
		{ "ring", required_argument, NULL, 'R' },
		{ "trigger", required_argument, NULL, 'G' },
		{ "force", no_argument, NULL, 'r' },
		{ "depth", required_argument, NULL, 'D' },
		{ "time-filter", required_argument, NULL, 'T' },
		{ "library", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c, err;

	o->d.command = "attach";
	o->d.dir = "ftpad.data";
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":F:N:o:p:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if ((err = parse_pid(optarg, &o->pid)))
				return err;
			break;
		case 'g':
			o->graph = true;
			break;
		case 'd':
			errno = 0;
			o->duration = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->duration > 0) || o->duration > 1e7)
				return usage_error("attach: --duration takes seconds > 0, not '%s'",
						   optarg);
			break;
		case 'l':
			o->library = optarg;
			break;
		case 'h':
			fputs(attach_usage, stdout);
			exit(0);
		case ':':
			return usage_error("attach: option '%s' needs an argument", argv[optind - 1]);
		default:
			err = dir_option(c, argv[optind - 2], optarg, &o->d);
			if (err >= 0) {
				if (err)
					return err;
				break;
			}
			return usage_error("attach: unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc && !o->pid && (err = parse_pid(argv[optind++], &o->pid)))
		return err;
	if (optind < argc)
		return usage_error("attach: unexpected argument '%s'", argv[optind]);
	if (!o->pid)
		return usage_error("attach: missing %s", "PID: the process to attach to");
	return dir_options_check(&o->d);
}

/* The trace directory while attached, held by descriptors: once it is
 * handed to the process's user, root goes through no path inside it. */
struct trace_tmp {
	char path[PATH_MAX];
	int dir, info;
};

/* info's head (format=2, the process's command line, attach=PID) and, for
 * a process of another user, the directory handed over to that user, who
 * writes the trace.  info is changed first and the directory last, both
 * through descriptors: until then no one else can put anything in it, and
 * from then on the user may put anything there, which is never followed. */
static int write_attach_info(const struct target *t, struct trace_tmp *tmp)
{
	char path[64], buf[8192], *argv[512], extra[64];
	size_t n = 0, argc = 0;
	int fd;
	ssize_t got;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", t->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	got = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	n = got > 0 ? (size_t)got : 0;
	buf[n] = 0;
	for (size_t i = 0; i < n && argc < 511; i += strlen(buf + i) + 1)
		argv[argc++] = buf + i;
	argv[argc] = NULL;
	snprintf(extra, sizeof(extra), "attach=%d\n", t->pid);
	tmp->dir = open_trace_dir(tmp->path);
	tmp->info = tmp->dir < 0 ? -1 : create_info(tmp->dir);
	if (tmp->info < 0 || write_info_head_fd(tmp->info, argv, extra))
		return -1;
	if ((t->uid != geteuid() || t->gid != getegid()) &&
	    (fchown(tmp->info, t->uid, t->gid) || fchown(tmp->dir, t->uid, t->gid)))
		return -1;
	return 0;
}

/* info is still the file the summary went to: its user may have put
 * something else there meanwhile. */
static void check_info(const struct trace_tmp *tmp, const char *dir)
{
	struct stat ours, there;

	if (fstat(tmp->info, &ours) ||
	    fstatat(tmp->dir, "info", &there, AT_SYMLINK_NOFOLLOW) || ours.st_dev != there.st_dev ||
	    ours.st_ino != there.st_ino)
		fprintf(stderr, "ftpad: warning: %s/info is not the file ftpad attach made: "
			"replaced during the session; its summary is not there\n", dir);
}

static void finish_trace(const struct target *t, struct trace_tmp *tmp, const char *dir,
			 const struct results *r)
{
	struct summary sum = { 0 };

	summarize_at(tmp->dir, t->pid, &sum, NULL);
	if (!sum.sites) {
		sum.sites = r->sites;
		sum.enabled = r->enabled;
	}
	if (r->stopped && !sum.events && !sum.dropped && !sum.bytes) {
		sum.events = r->events;
		sum.dropped = r->dropped;
		sum.bytes = r->bytes;
	}
	append_summary_fd(tmp->info, "", &sum);
	check_info(tmp, dir);
	print_summary(&sum, dir);
}

/* The control thread's connection, which a process that dies first never
 * makes: looked for every 10 ms, the process with it. */
static int wait_control(struct target *t, struct session *s)
{
	uint64_t deadline = attach_now_ms() + REPLY_TIMEOUT_MS;

	while (s->conn < 0) {
		struct pollfd p = { s->listen, POLLIN, 0 };

		if (poll(&p, 1, 10) > 0)
			accept_peer(s, t->pid);
		else if (!attach_alive(t->pid))
			return attach_gone(t->pid);
		else if (attach_now_ms() >= deadline)
			return attach_fail(t->pid, "libftpad's control thread never connected");
	}
	return 0;
}

/* Getting in, and the stub out of the way again: 0 once the control
 * thread is connected. */
int attach_load_library(struct target *t, struct session *s, const char *request,
			size_t request_len)
{
	char errtext[AB_ERRTEXT_SIZE];
	int64_t result = 0;
	int err;

	if (attach_get_in(t, request, request_len))
		return -1;
	/* Not done: the process is gone, or the thread may still be in
	 * the stub or below it, and the stub is left in place. */
	err = wait_stub(t, s, &result, errtext);
	if (!err && attach_left_stub(t))
		attach_restore_slack(t);
	else if (!err)
		fprintf(stderr, "ftpad: warning: process %d: its thread %d stays in the loader "
			"stub; the stub's bytes are left at %#llx\n", t->pid, t->chosen,
			(unsigned long long)t->slack);
	attach_guardian_done(t);
	if (err)
		return -1;
	if (result)
		return load_error(t, result, errtext);
	return wait_control(t, s);
}

/* Ctrl-C or SIGTERM already: not worth getting in only to get out. */
static bool interrupted(pid_t pid)
{
	sigset_t pending;

	if (sigpending(&pending) || (!sigismember(&pending, SIGINT) && !sigismember(&pending, SIGTERM)))
		return false;
	fprintf(stderr, "ftpad: interrupted before attaching to process %d; nothing done\n", pid);
	return true;
}

int cmd_attach(int argc, char **argv)
{
	struct attach_opts o = { 0 };
	struct target t = { .mem = -1 };
	struct session s = { .listen = -1, .conn = -1, .signals = -1 };
	struct results r = { 0 };
	struct trace_tmp tmp = { .dir = -1, .info = -1 };
	char request[REQUEST_SIZE];
	size_t request_len;
	sigset_t stop_signals;
	int err, code = 0;

	/* Ctrl-C and SIGTERM end the session (signalfd); getting in is not
	 * cut short by them.  Blocked first of all: one that came before
	 * would kill the tool, harmlessly, but in a job started with `&` from
	 * a script SIGINT is ignored until blocked, and one lost then left
	 * the tool waiting for it, and the process recording, for ever. */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop_signals, NULL);
	err = parse_attach(argc, argv, &o);
	if (err)
		return err;
	t.pid = o.pid;
	if (attach_check_target(&t))
		return 1;
	if (!t.lib[0] && !t.start && (o.library ? !realpath(o.library, t.lib)
					       : find_library(t.lib, sizeof(t.lib)))) {
		if (o.library)
			fprintf(stderr, "ftpad: error: --library '%s': %s\n", o.library,
				strerror(errno));
		return 1;
	}
	s.signals = signalfd(-1, &stop_signals, SFD_CLOEXEC | SFD_NONBLOCK);
	if (s.signals < 0 || attach_open_socket(&s))
		return attach_fail(t.pid, "cannot open the control socket: %s", strerror(errno));
	if (create_trace_dir(o.d.dir, o.d.force, tmp.path))
		return 1;
	if (write_attach_info(&t, &tmp)) {
		fprintf(stderr, "ftpad: error: cannot write '%s/info': %s\n", tmp.path,
			strerror(errno));
		remove_tree(tmp.path);
		return 1;
	}
	request_len = build_request(&o, tmp.path, s.name, request, sizeof(request));
	if (!request_len || interrupted(t.pid) ||
	    attach_load_library(&t, &s, request, request_len)) {
		if (!request_len)
			attach_fail(t.pid, "the request is too long");
		remove_tree(tmp.path);
		return 1;
	}
	if (run_session(&t, &s, &o, &r))
		code = 1;
	close(s.conn);
	if (!r.started) { /* nothing was recorded: no trace */
		remove_tree(tmp.path);
		return 1;
	}
	finish_trace(&t, &tmp, o.d.dir, &r);
	return code;
}
