/* SPDX-License-Identifier: MIT */
/*
 * attach.c - libftpad's side of `ftpad attach` (docs/design.md "Attaching
 * to a running process"): ftpad_attach_start(), which the tool's loader
 * stub calls on a thread it interrupted anywhere, and the control thread
 * that runs the session.
 *
 * On the interrupted thread only what cannot wait: the request is checked
 * and copied (into mmap'ed memory: that thread may be inside malloc), the
 * session is claimed, and a detached thread is created with the runtime
 * threads' signal mask given through its attributes, so that the caller's
 * own mask is never touched.  Everything else is the control thread's:
 *
 *   connect to the tool's abstract socket (its owner must be root or us)
 *   the recorder starts the trace, patches ->  "started sites=N enabled=M"
 *                                          or "error ERRNO MESSAGE"
 *   read until the line "stop", or end of file (the tool is gone)
 *   the recorder stops: sites off, buffers ->  "stopped events=E dropped=D bytes=B"
 *
 * The messages that the start would print (ftpad_warn()) go to the tool in
 * the error line instead of into the program's stderr.  A forked child has
 * no control thread: record_session.c takes it out of the session, and
 * here it forgets the socket and the request, so it can be attached to
 * itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"
#include "livepatch.h"

/* A request longer than this is taken for one without its end. */
#define MAX_REQUEST FTPAD_ATTACH_REQUEST_MAX

/* The names a request may set; every other is refused. */
static const char *const known_settings[] = {
	FTPAD_ENV_ATTACH_SOCKET, FTPAD_ENV_RECORD, FTPAD_ENV_RECORD_EXITS,
	FTPAD_ENV_RECORD_FILTER, FTPAD_ENV_RECORD_NOTRACE, FTPAD_ENV_RECORD_SIZE,
	FTPAD_ENV_RECORD_CHUNK, FTPAD_ENV_RECORD_CHUNKS, FTPAD_ENV_RECORD_DEPTH,
	FTPAD_ENV_RECORD_TIME_FILTER, FTPAD_ENV_RECORD_RING,
	FTPAD_ENV_RECORD_TRIGGER, FTPAD_ENV_PATCH_OP, FTPAD_ENV_PATCH_FILE,
	FTPAD_ENV_PATCH_CHECK,
};

/* The session: claimed by ftpad_attach_start(), given up by its control
 * thread when it ends (atomic). */
static int session_claimed;
static char *session_request;  /* the copy, the control thread's */
static int session_fd = -1;    /* the control socket */

static bool known_setting(const char *entry, size_t name_len)
{
	for (size_t i = 0; i < sizeof(known_settings) / sizeof(known_settings[0]); i++)
		if (strlen(known_settings[i]) == name_len &&
		    !strncmp(entry, known_settings[i], name_len))
			return true;
	return false;
}

/* The size of a well-formed request (its final NUL included), or 0: known
 * names, each once, each with '='; the list ended within MAX_REQUEST. */
static size_t request_size(const char *request)
{
	const char *p = request;

	while (*p) {
		size_t len = strnlen(p, MAX_REQUEST - (p - request));
		const char *eq = memchr(p, '=', len);

		if (p + len >= request + MAX_REQUEST - 1 || !eq || !known_setting(p, eq - p))
			return 0;
		for (const char *q = request; q < p; q += strlen(q) + 1)
			if (!strncmp(q, p, eq - p + 1))
				return 0;
		p += len + 1;
	}
	return p - request + 1;
}

/* What the settings must say: a socket name that fits, an absolute trace
 * directory (the process's working directory is not the tool's), exits
 * given as 0 or 1. */
static bool request_complete(const char *request)
{
	const char *socket = ftpad_request_value(request, FTPAD_ENV_ATTACH_SOCKET);
	const char *dir = ftpad_request_value(request, FTPAD_ENV_RECORD);
	const char *exits = ftpad_request_value(request, FTPAD_ENV_RECORD_EXITS);
	const char *op = ftpad_request_value(request, FTPAD_ENV_PATCH_OP);
	const char *file = ftpad_request_value(request, FTPAD_ENV_PATCH_FILE);

	if (!socket || !*socket || strlen(socket) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return false;
	if (op) /* a patch request: none of the recorder's settings */
		return !dir && !exits && (!strcmp(op, "list") ||
					  ((!strcmp(op, "apply") || !strcmp(op, "revert")) &&
					   file && file[0] == '/'));
	return dir && dir[0] == '/' && (!exits || !strcmp(exits, "0") || !strcmp(exits, "1"));
}

/* ---- the control thread ---- */

static void send_line(int fd, const char *line)
{
	size_t len = strlen(line);

	while (len) {
		ssize_t n = send(fd, line, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		line += n, len -= n;
	}
}

/* The peer listening on an abstract name could be anyone's: only root's
 * or our own user's tool is answered. */
static bool peer_trusted(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		return false;
	return cred.uid == 0 || cred.uid == getuid() || cred.uid == geteuid();
}

static int connect_control(const char *name)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memcpy(addr.sun_path + 1, name, len); /* abstract: a leading NUL */
	if (connect(fd, (struct sockaddr *)&addr, offsetof(struct sockaddr_un, sun_path) + 1 + len) ||
	    !peer_trusted(fd)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Until the line "stop", end of file, or an error of the socket. */
static void wait_for_stop(int fd)
{
	char line[64];
	size_t have = 0;

	for (;;) {
		ssize_t n = read(fd, line + have, sizeof(line) - have);
		char *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		have += n;
		while ((nl = memchr(line, '\n', have))) {
			*nl = 0;
			if (!strcmp(line, FTPAD_ATTACH_STOP))
				return;
			have -= nl + 1 - line;
			memmove(line, nl + 1, have);
		}
		if (have == sizeof(line)) /* a line too long to be "stop" */
			have = 0;
	}
}

/* The start's warnings, kept for the error line, one line. */
static char start_messages[1024];

static void keep_message(const char *text)
{
	size_t used = strlen(start_messages);

	if (used && used + 2 < sizeof(start_messages))
		strcat(start_messages, "; "), used += 2;
	snprintf(start_messages + used, sizeof(start_messages) - used, "%s", text);
	for (char *p = start_messages; *p; p++)
		if (*p == '\n')
			*p = ' ';
}

/* The session is over: a new attach may come as soon as the tool has
 * read the last line, before this thread has closed its socket. */
static void release_session(char *request)
{
	session_request = NULL;
	ftpad_free(request);
	__atomic_store_n(&session_claimed, 0, __ATOMIC_RELEASE);
}

static void run_session(int fd, char *request)
{
	struct ftpad_record_totals tot;
	char line[sizeof(start_messages) + 64];
	unsigned long enabled = 0;
	unsigned sites = 0;
	int err;

	start_messages[0] = 0;
	ftpad_log_capture(keep_message);
	err = ftpad_record_session_start(request, &sites, &enabled);
	ftpad_log_capture(NULL);
	if (!err && *start_messages) /* a start with warnings: the program's log */
		ftpad_warn("%s\n", start_messages);
	if (err) {
		snprintf(line, sizeof(line), FTPAD_ATTACH_ERROR_FMT, -err,
			 *start_messages ? start_messages : ftpad_strerror(err));
		release_session(request);
		send_line(fd, line);
		return;
	}
	snprintf(line, sizeof(line), FTPAD_ATTACH_STARTED_FMT, sites, enabled);
	send_line(fd, line);
	wait_for_stop(fd);
	ftpad_record_session_stop(&tot);
	snprintf(line, sizeof(line), FTPAD_ATTACH_STOPPED_FMT, tot.events,
		 tot.dropped, tot.bytes);
	release_session(request);
	send_line(fd, line);
}

/* ---- patch sessions (livepatch.c) ---- */

static void release_patch_session(char *request);

/* The tool's go, once it has been told the ranges and stopped the other
 * threads: 0, or -ECANCELED. */
struct patch_go {
	int fd;
	const struct ftpad_patch_prep *prep;
	bool went; /* the tool said go: it waits, threads stopped, for "switched" */
};

static int await_go(void *arg)
{
	struct patch_go *g = arg;
	struct ftpad_patch_range r[64];
	size_t n = ftpad_patch_ranges(g->prep, r, sizeof(r) / sizeof(r[0]));
	char line[PATH_MAX + 64];
	ssize_t got;
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		snprintf(line, sizeof(line), FTPAD_PATCH_RANGE_FMT, (unsigned long)r[i].lo,
			 (unsigned long)r[i].hi, r[i].what);
		send_line(g->fd, line);
	}
	snprintf(line, sizeof(line), FTPAD_PATCH_READY_FMT, (int)gettid());
	send_line(g->fd, line);
	while (len < sizeof(line) - 1 && (got = read(g->fd, line + len, 1)) == 1 &&
	       line[len] != '\n')
		len++;
	line[len] = 0;
	g->went = !strcmp(line, FTPAD_PATCH_GO);
	return g->went ? 0 : -ECANCELED;
}

static void send_error(int fd, int err, const char *msg)
{
	char line[1024];

	snprintf(line, sizeof(line), FTPAD_ATTACH_ERROR_FMT, -err, *msg ? msg : ftpad_strerror(err));
	send_line(fd, line);
}

static void run_patch_session(int fd, const char *request)
{
	const char *op = ftpad_request_value(request, FTPAD_ENV_PATCH_OP);
	const char *file = ftpad_request_value(request, FTPAD_ENV_PATCH_FILE);
	const char *check = ftpad_request_value(request, FTPAD_ENV_PATCH_CHECK);
	bool checked = check && !strcmp(check, "1");
	struct ftpad_patch_prep prep;
	char msg[512] = "";
	int err;

	if (!strcmp(op, "list")) {
		char list[8192], line[sizeof(list) + 16];

		ftpad_patch_list(list, sizeof(list));
		for (char *p = list, *nl; *p; p = nl + 1) {
			nl = strchr(p, '\n');
			if (!nl) /* cut short: the list was longer than list[] */
				break;
			*nl = 0;
			snprintf(line, sizeof(line), FTPAD_PATCH_APPLIED_FMT "\n", p);
			send_line(fd, line);
		}
		send_line(fd, FTPAD_PATCH_DONE "\n");
		return;
	}
	ftpad_log_capture(keep_message);
	start_messages[0] = 0;
	err = !strcmp(op, "apply") ? ftpad_patch_prepare(file, &prep, msg, sizeof(msg))
				   : ftpad_patch_prepare_revert(file, &prep, msg, sizeof(msg));
	if (err) {
		ftpad_log_capture(NULL);
		send_error(fd, err, *msg ? msg : start_messages);
		return;
	}
	struct patch_go go = { .fd = fd, .prep = &prep };

	err = ftpad_patch_commit(&prep, checked ? await_go : NULL, &go, msg, sizeof(msg));
	ftpad_log_capture(NULL);
	if (err == -ECANCELED)
		snprintf(msg, sizeof(msg), "the tool gave up");
	/* The tool holds the threads stopped until it hears the switch is
	 * over, and the unload may wait for them: it hears that first.  The
	 * last answer only once the patch is unloaded, so that the next
	 * patch does not come while a dlclose runs. */
	if (go.went)
		send_line(fd, FTPAD_PATCH_SWITCHED "\n");
	ftpad_patch_finish(&prep, checked);
	if (err)
		send_error(fd, err, *msg ? msg : start_messages);
	else
		send_line(fd, FTPAD_PATCH_DONE "\n");
}

/* The forked child of an attached process: no control thread here, and
 * the tool must see end of file when the parent's socket closes.  The
 * request stays mapped (record_session.c's own fork handler may still look). */
static void forget_session_in_child(void)
{
	if (session_fd >= 0)
		close(session_fd);
	session_fd = -1;
	session_request = NULL;
	__atomic_store_n(&session_claimed, 0, __ATOMIC_RELEASE);
}

static void install_fork_handler(void)
{
	pthread_atfork(NULL, NULL, forget_session_in_child);
}

static void *control_main(void *arg)
{
	static pthread_once_t fork_handler = PTHREAD_ONCE_INIT;
	char *request = arg;
	int fd;

	prctl(PR_SET_NAME, "ftpad-attach");
	pthread_once(&fork_handler, install_fork_handler);
	fd = connect_control(ftpad_request_value(request, FTPAD_ENV_ATTACH_SOCKET));
	if (fd < 0) {
		ftpad_info("ftpad: attach: cannot connect to the tool's socket: %s\n",
			   strerror(errno));
		if (ftpad_request_value(request, FTPAD_ENV_PATCH_OP))
			release_patch_session(request);
		else
			release_session(request);
		return NULL;
	}
	if (ftpad_request_value(request, FTPAD_ENV_PATCH_OP)) {
		/* Not the recording's session: its socket stays its own. */
		run_patch_session(fd, request);
		release_patch_session(request);
		close(fd);
		return NULL;
	}
	__atomic_store_n(&session_fd, fd, __ATOMIC_RELEASE);
	run_session(fd, request);
	/* Unless a new session's socket took its place already. */
	__atomic_compare_exchange_n(&session_fd, &(int){ fd }, -1, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_RELAXED);
	close(fd);
	return NULL;
}

static int start_control_thread(char *request)
{
	pthread_t thread;

	return ftpad_runtime_thread_start(&thread, control_main, request, true);
}

/* Patch sessions run beside a recording one and beside each other: the
 * previous one may still be unloading its patch when the tool, answered,
 * sends the next; livepatch.c serialises them. */
static void release_patch_session(char *request)
{
	ftpad_free(request);
}

static int start_patch_session(const char *request, size_t size)
{
	char *copy = ftpad_alloc(size);
	int err;

	if (!copy)
		return -ENOMEM;
	memcpy(copy, request, size);
	err = start_control_thread(copy);
	if (err)
		ftpad_free(copy);
	return err;
}

int ftpad_attach_start(const char *request)
{
	size_t size = request ? request_size(request) : 0;
	char *copy;
	int err;

	if (!size || !request_complete(request))
		return -EINVAL;
	if (ftpad_request_value(request, FTPAD_ENV_PATCH_OP))
		return start_patch_session(request, size);
	if (__atomic_exchange_n(&session_claimed, 1, __ATOMIC_ACQ_REL))
		return -EBUSY;
	if (ftpad_record_busy()) {
		err = -EBUSY;
		goto give_up;
	}
	copy = ftpad_alloc(size);
	if (!copy) {
		err = -ENOMEM;
		goto give_up;
	}
	memcpy(copy, request, size);
	session_request = copy;
	err = start_control_thread(copy);
	if (!err)
		return 0;
	session_request = NULL;
	ftpad_free(copy);
give_up:
	__atomic_store_n(&session_claimed, 0, __ATOMIC_RELEASE);
	return err;
}
