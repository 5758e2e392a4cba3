/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for libftpad's side of attach, for tests/attach/test_attach.py: what
 * docs/design.md's contract asks of ftpad_attach_start and its control
 * thread, with no recorder behind it.  It lets the injection be tested on
 * its own (`ftpad attach --library`).  A second session while one runs
 * gets -EBUSY, as from the real one; -F fail gets an error line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static atomic_int busy;
static char socket_name[108];
static int refuse; /* -F fail: answer as libftpad does when it cannot start */

static const char *setting(const char *request, const char *name)
{
	size_t len = strlen(name);

	for (const char *p = request; *p; p += strlen(p) + 1)
		if (!strncmp(p, name, len) && p[len] == '=')
			return p + len + 1;
	return NULL;
}

static void *control(void *arg)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char buf[64];
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t n;

	(void)arg;
	memcpy(a.sun_path + 1, socket_name, strlen(socket_name));
	if (fd >= 0 && !connect(fd, (struct sockaddr *)&a,
				offsetof(struct sockaddr_un, sun_path) + 1 + strlen(socket_name))) {
		static const char started[] = "started sites=7 enabled=3\n";
		static const char stopped[] = "stopped events=11 dropped=0 bytes=176\n";

		static const char error[] = "error 22 no function matches 'fail'\n";

		if (refuse) {
			write(fd, error, sizeof(error) - 1);
			close(fd);
			busy = 0;
			return NULL;
		}
		write(fd, started, sizeof(started) - 1);
		while ((n = read(fd, buf, sizeof(buf))) > 0 && !memchr(buf, '\n', (size_t)n))
			;
		if (n > 0)
			write(fd, stopped, sizeof(stopped) - 1);
	}
	if (fd >= 0)
		close(fd);
	busy = 0;
	return NULL;
}

__attribute__((visibility("default"))) int ftpad_attach_start(const char *request)
{
	const char *name = setting(request, "FTPAD_ATTACH_SOCKET");
	const char *dir = setting(request, "FTPAD_RECORD");
	sigset_t all, old;
	pthread_t t;
	int err;

	if (!name || !dir || strlen(name) >= sizeof(socket_name))
		return -EINVAL;
	if (atomic_exchange(&busy, 1))
		return -EBUSY;
	strcpy(socket_name, name);
	refuse = setting(request, "FTPAD_RECORD_FILTER") &&
		 !strcmp(setting(request, "FTPAD_RECORD_FILTER"), "fail");
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&t, NULL, control, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		busy = 0;
		return -err;
	}
	pthread_detach(t);
	return 0;
}
