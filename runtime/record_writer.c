/* SPDX-License-Identifier: MIT */
/*
 * record_writer.c - the recorder's writer thread, which puts the full
 * chunks in each thread's <image>/<tid>.events, and the other files of a
 * trace directory (docs/format.md "The trace directory"): info, each
 * image's image and sites, the shared --size count.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "record.h"

char dir[PATH_MAX];
char image[64];
uint64_t bytes_written;
pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_t writer;
int writer_running;
int sites_fd = -1;

/*
 * The trace directory, reached through a descriptor opened when the trace
 * starts: a program that chroots or changes its mount namespace still
 * writes its trace.  One that closed the descriptor (a daemon closes them
 * all) or has another file on its number gets it opened again by path;
 * the program's file is never used nor closed.
 */
static int dir_fd = -1;
static dev_t dir_dev;
static ino_t dir_ino;

static bool dir_fd_is_ours(void)
{
	struct stat st;

	return dir_fd >= 0 && !fstat(dir_fd, &st) && st.st_dev == dir_dev &&
	       st.st_ino == dir_ino && S_ISDIR(st.st_mode);
}

/* dir opened now (a trace starts), or again when the one held is lost. */
void open_trace_dir(void)
{
	struct stat st;
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (dir_fd_is_ours())
		close(dir_fd);
	dir_fd = -1;
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	dir_fd = fd, dir_dev = st.st_dev, dir_ino = st.st_ino;
}

static int trace_dir(void)
{
	if (!dir_fd_is_ours())
		open_trace_dir();
	return dir_fd;
}

/* rel, a path under the trace directory, opened. */
static int open_in_trace(const char *rel, int flags, mode_t mode)
{
	int d = trace_dir();

	return d < 0 ? -1 : openat(d, rel, flags, mode);
}

void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n, len -= n;
	}
}

static void open_events(struct rthread *t)
{
	char path[PATH_MAX + 96];
	struct ftpad_trace_thread_header h = {
		.magic = FTPAD_TRACE_MAGIC,
		.version = FTPAD_TRACE_VERSION,
		.header_size = sizeof(h),
		.event_size = sizeof(struct ftpad_event),
#if defined(__x86_64__)
		.arch = FTPAD_ARCH_X86_64,
#else
		.arch = FTPAD_ARCH_AARCH64,
#endif
		.pid = getpid(),
		.tid = t->tid,
	};

	memcpy(h.comm, t->comm, sizeof(h.comm));
	snprintf(path, sizeof(path), "%s/%d.events", image, t->tid);
	t->fd = open_in_trace(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (t->fd < 0) {
		ftpad_warn("ftpad: error: cannot create '%s/%s': %s; its events are lost\n", dir,
			   path, strerror(errno));
		return;
	}
	write_all(t->fd, &h, sizeof(h));
	bytes_written += sizeof(h);
}

/* Write every full chunk, oldest first, and free it. */
static void drain(void)
{
	struct chunk *c, *list = NULL;

	pthread_mutex_lock(&write_lock);
	c = __atomic_exchange_n(&full_head, NULL, __ATOMIC_ACQUIRE);
	while (c) { /* pushed newest first: reverse */
		struct chunk *next = c->next;

		c->next = list, list = c, c = next;
		__atomic_sub_fetch(&nfull, 1, __ATOMIC_RELAXED);
	}
	while ((c = list)) {
		size_t len = c->n * sizeof(struct ftpad_event);

		list = c->next;
		if (c->owner->fd < 0)
			open_events(c->owner);
		if (c->owner->fd >= 0) {
			write_all(c->owner->fd, c->ev, len);
			bytes_written += len;
		}
		__atomic_sub_fetch(reserved, chunk_events * sizeof(struct ftpad_event) - len,
				   __ATOMIC_RELAXED);
		put_free(c);
	}
	pthread_mutex_unlock(&write_lock);
}

/* Until the next look: the pause, or a wake_writer() (or a stop's). */
static void writer_pause(void)
{
	const struct timespec pause = { 0, 2000000 };

	__atomic_store_n(&writer_asleep, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&nfull, __ATOMIC_SEQ_CST) < nchunks / 8 &&
	    !__atomic_load_n(&stopping, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &writer_asleep, FUTEX_WAIT_PRIVATE, 1, &pause, NULL, 0);
	__atomic_store_n(&writer_asleep, 0, __ATOMIC_RELAXED);
}

static void *writer_main(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
		drain();
		writer_pause();
	}
	return NULL;
}

void start_writer(void)
{
	sigset_t all, old;

	ftpad_runtime_thread_mask(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	writer_running = !pthread_create(&writer, NULL, writer_main, NULL);
	if (writer_running) /* named before the start is answered */
		pthread_setname_np(writer, "ftpad-writer");
	else
		ftpad_warn("ftpad: error: cannot start the trace writer; events are written at exit\n");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Drops of a thread that got no chunk again (budget spent, no free chunk)
 * have no next event to precede: their LOST event ends its file, at the
 * time the drops began, so that every drop is in the trace (16 bytes a
 * thread beyond --size at most). */
static void write_last_lost(void)
{
	pthread_mutex_lock(&write_lock);
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
		struct ftpad_event e = { t->lost_since, ftpad_event_what(FTPAD_EVENT_LOST, 0),
					 (uint32_t)t->lost };

		if (!t->lost || t->cur)
			continue;
		if (t->fd < 0)
			open_events(t);
		if (t->fd >= 0) {
			write_all(t->fd, &e, sizeof(e));
			bytes_written += sizeof(e);
		}
		t->lost = 0;
	}
	pthread_mutex_unlock(&write_lock);
}

/* Every thread's events, written now (at exit, exec). */
void flush_all(void)
{
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next)
		hand_over(t);
	drain();
	write_last_lost();
}

/* This thread's events and the full chunks, written now (an exec): the
 * other threads keep their current chunks, which they still write. */
void flush_thread(struct rthread *t)
{
	if (t)
		hand_over(t);
	drain();
}

void count_totals(struct ftpad_record_totals *tot)
{
	tot->events = tot->dropped = tot->fast = 0;
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
		tot->events += t->events + t->fast_events, tot->dropped += t->dropped;
		tot->fast += t->fast_events;
	}
	pthread_mutex_lock(&write_lock);
	tot->bytes = bytes_written;
	pthread_mutex_unlock(&write_lock);
}

/* ---- the other files ---- */

void append_file(const char *name, const char *text)
{
	int fd = open_in_trace(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	if (fd < 0)
		return;
	write_all(fd, text, strlen(text));
	close(fd);
}

/* info begins with format=: written by `ftpad record`, or here when the
 * program was started with FTPAD_RECORD alone (a static aarch64 program
 * under qemu, say), so that the viewers read that directory too. */
void create_info(void)
{
	int fd = open_in_trace("info", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	if (fd < 0)
		return; /* there already, or the appends below will say nothing either */
	write_all(fd, "format=1\n", 9);
	close(fd);
}

void append_image(const char *text)
{
	char name[96];

	snprintf(name, sizeof(name), "%s/image", image);
	append_file(name, text);
}

void clock_sync(void)
{
	char line[96];

	ftpad_clock_sync_line(line, sizeof(line));
	append_file("info", line);
}

static void read_cmdline(char *out, size_t size)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? 0 : read(fd, out, size - 1);

	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	for (ssize_t i = 0; i < n; i++)
		if (!out[i] || out[i] == '\n')
			out[i] = i == n - 1 ? 0 : ' ';
	out[n] = 0;
}

/* <pid>.<n>/ with its image file; sites copied from parent_sites if set. */
int make_image(const char *how, const char *from)
{
	char path[PATH_MAX + 96], text[PATH_MAX * 2 + 256], exe[PATH_MAX] = "", argv[2048];
	ssize_t n;

	if ((trace_dir() < 0 || mkdirat(dir_fd, image, 0755)) && errno != EEXIST) {
		ftpad_warn("ftpad: error: cannot create '%s/%s': %s; not recording\n", dir, image,
			   strerror(errno));
		return -1;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	read_cmdline(argv, sizeof(argv));
	snprintf(text, sizeof(text), "pid=%d\nppid=%d\nexe=%s\nargv=%s\n%s%s%s", getpid(),
		 getppid(), exe, argv, how ? how : "", how ? from : "", how ? "\n" : "");
	append_image(text);
	snprintf(path, sizeof(path), "%s/sites", image);
	if (sites_fd >= 0)
		close(sites_fd);
	sites_fd = open_in_trace(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	/* An exec continues `ftpad record`'s trace; an attach session's ends
	 * there (nor would setenv() on its thread be safe for the program). */
	if (!request)
		setenv(FTPAD_ENV_RECORD_IMAGE, image, 1);
	return sites_fd < 0 ? -1 : 0;
}

void copy_sites(const char *from_image)
{
	char path[PATH_MAX + 96], buf[65536];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/sites", from_image);
	fd = open_in_trace(path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		write_all(sites_fd, buf, n);
	close(fd);
}

/* The trace's shared count of reserved bytes (record_buffer.c's
 * reserved); fresh: this is the trace's first image, which zeroes it. */
void map_budget(bool fresh)
{
	char path[PATH_MAX + 16];
	void *p = MAP_FAILED;
	int fd;

	if (reserved != &own_reserved)
		munmap(reserved, sizeof(*reserved));
	reserved = &own_reserved;
	own_reserved = 0;
	snprintf(path, sizeof(path), "%s/.budget", dir);
	fd = open_in_trace(".budget", O_RDWR | O_CREAT | O_CLOEXEC | (fresh ? O_TRUNC : 0), 0644);
	if (fd >= 0 && !ftruncate(fd, sizeof(*reserved)))
		p = mmap(NULL, sizeof(*reserved), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p != MAP_FAILED)
		reserved = p;
	else
		ftpad_warn("ftpad: warning: cannot map '%s': %s; --size counts this process's "
			   "events only\n", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* The files of a trace that ended, closed, so that the next session's
 * trace gets its own. */
void close_trace_files(void)
{
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next)
		if (t->fd >= 0)
			close(t->fd), t->fd = -1;
	if (sites_fd >= 0)
		close(sites_fd), sites_fd = -1;
	if (dir_fd_is_ours())
		close(dir_fd);
	dir_fd = -1;
}
