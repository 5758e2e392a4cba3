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
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "record.h"
#include "record_encode.h"

char dir[PATH_MAX];
char image[64];
uint64_t bytes_written;
pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_t writer;
int writer_running;
int sites_fd = -1;

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

/*
 * The program owns its descriptor numbers and its limits; the recorder's
 * files live among them:
 * - a daemon closes every descriptor above 2 and opens files of its own,
 *   which take the numbers ours had.  So each file is held as libftpad
 *   holds its own (fd.c: a high number, known by device and inode, checked
 *   before each write, never closed once it is no longer ours), and
 *   reopened by name when the program took it;
 * - a thread's file is closed once the thread has ended and its events
 *   are written, so that the files open do not grow with the threads that
 *   ever lived;
 * - a pid or a tid comes back (a new process, a new thread): each gets a
 *   file of its own (O_EXCL, and the next name), never the one before it;
 * - RLIMIT_FSIZE binds every write of the process, ours too: past it the
 *   kernel sends SIGXFSZ to the writing thread, whose default action ends
 *   the program.  The writes run with it blocked, get EFBIG instead, and
 *   the signal they caused is taken back;
 * - a full disk, a quota, an I/O error: the events a write could not put
 *   in the file are counted as dropped (unwritten), with the cause, which
 *   the image's end says (append_unwritten()).
 */
static const char *errno_name(int err)
{
	switch (err) {
	case ENOSPC: return "ENOSPC";
	case EFBIG: return "EFBIG";
	case EIO: return "EIO";
	case EDQUOT: return "EDQUOT";
	case EMFILE: return "EMFILE";
	case ENFILE: return "ENFILE";
	case EROFS: return "EROFS";
	case EACCES: return "EACCES";
	case ENOENT: return "ENOENT";
	case ESTALE: return "ESTALE";
	case EEXIST: return "EEXIST";
	default: return "EIO";
	}
}

static sigset_t xfsz_only;
static bool xfsz_pending_before, xfsz_caused;

/* Under write_lock, around the writes of events. */
void hold_xfsz(sigset_t *old)
{
	sigset_t pending;

	sigemptyset(&xfsz_only);
	sigaddset(&xfsz_only, SIGXFSZ);
	pthread_sigmask(SIG_BLOCK, &xfsz_only, old);
	xfsz_pending_before = !sigpending(&pending) && sigismember(&pending, SIGXFSZ);
	xfsz_caused = false;
}

void release_xfsz(const sigset_t *old)
{
	if (xfsz_caused && !xfsz_pending_before)
		sigtimedwait(&xfsz_only, NULL, &(struct timespec){ 0, 0 });
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* One whole unit (the header, a block) of len bytes into fd: 0, or the
 * errno of the write that stopped, the file cut back to where the unit
 * began. */
static int write_unit(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	size_t done = 0;
	int err;

	while (done < len) {
		ssize_t n = write(fd, p + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0) {
			done += n;
			continue;
		}
		err = n < 0 ? errno : EIO;
		xfsz_caused |= err == EFBIG;
		if (done) {
			off_t end = lseek(fd, 0, SEEK_END);

			if (end >= (off_t)done && ftruncate(fd, end - done)) {
				/* a stray piece at the end: a reader reads to the last whole block */
			}
		}
		return err;
	}
	return 0;
}

/*
 * The encoder of the blocks (record_encode.h), the writer's alone, under
 * write_lock: its memory is taken as the trace starts (setup_encoder()),
 * so that a flush from a signal handler allocates nothing.  A forked
 * child has its own copy, and each block starts the compressor afresh, so
 * a block the parent's writer was making when the fork came is no harm.
 * Without that memory, blocks of a few events, varint-coded, in a buffer
 * of its own.
 */
#define RECORD_ZSTD_LEVEL 1
#define SMALL_BLOCK_EVENTS 64
static struct ftpad_block_encoder encoder;
static void *encoder_mem;
static size_t encoder_mem_size;
/* The columns, and the block with room for zstd's bound on them. */
static uint64_t small_encoder_mem[(SMALL_BLOCK_EVENTS * FTPAD_TRACE_BLOCK_EVENT_MAX_BYTES * 3 +
				   sizeof(struct ftpad_trace_block) + 512) / 8];

void setup_encoder(void)
{
	size_t events = chunk_events < FTPAD_TRACE_BLOCK_EVENTS_MAX ? chunk_events
								     : FTPAD_TRACE_BLOCK_EVENTS_MAX;
	size_t size = ftpad_block_encoder_size(events, RECORD_ZSTD_LEVEL);

	if (encoder_mem && size != encoder_mem_size) {
		munmap(encoder_mem, encoder_mem_size);
		encoder_mem = NULL;
	}
	if (!encoder_mem) {
		encoder_mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				   -1, 0);
		encoder_mem_size = size;
		if (encoder_mem == MAP_FAILED)
			encoder_mem = NULL;
	}
	if (!encoder_mem ||
	    ftpad_block_encoder_init(&encoder, encoder_mem, size, events, RECORD_ZSTD_LEVEL))
		ftpad_block_encoder_init(&encoder, small_encoder_mem, sizeof(small_encoder_mem),
					 SMALL_BLOCK_EVENTS, RECORD_ZSTD_LEVEL);
}

/*
 * The trace directory, reached through a descriptor opened when the trace
 * starts, so that a program that chroots or changes its mount namespace
 * still writes its trace: every file is opened relative to it.  The
 * descriptor has libftpad's own protection (fd.c): a program that closed
 * it (a daemon closes them all) or put another file on its number gets it
 * opened again by path, and the program's file is never used nor closed.
 */
static struct ftpad_own_fd dir_own = { .fd = -1 };

/* dir opened now (a trace starts), or again when the one held is lost. */
void open_trace_dir(void)
{
	int fd;

	if (dir_own.fd >= 0 && ftpad_own_fd_valid(&dir_own, dir_own.fd))
		close(dir_own.fd);
	fd = ftpad_own_fd_open(&dir_own, dir, O_PATH | O_DIRECTORY, 0, false);
	dir_own.fd = fd < 0 ? -1 : fd;
}

int trace_dir(void)
{
	if (dir_own.fd < 0 || !ftpad_own_fd_valid(&dir_own, dir_own.fd))
		open_trace_dir();
	return dir_own.fd;
}

/* rel, a path under the trace directory, opened; -1 with errno. */
static int open_in_trace(const char *rel, int flags, mode_t mode)
{
	int d = trace_dir();

	if (d < 0) {
		errno = ENOENT;
		return -1;
	}
	return openat(d, rel, flags | O_CLOEXEC, mode);
}

/* The same, as one of the recorder's own descriptors (fd.c); -errno. */
static int own_in_trace(struct ftpad_own_fd *o, const char *rel, int flags, mode_t mode,
			bool same_file)
{
	int d = trace_dir();

	return d < 0 ? -ENOENT : ftpad_own_fd_openat(o, d, rel, flags, mode, same_file);
}

/* --ring's snapshots: the events files go under another directory. */
static int events_dir = -1;

void set_events_dir(int fd)
{
	events_dir = fd;
}

static int events_base(void)
{
	return events_dir >= 0 ? events_dir : trace_dir();
}

/* t's events file's name under the trace directory. */
static void events_path(char *path, size_t size, const struct rthread *t, uint32_t file)
{
	if (file == 1)
		snprintf(path, size, "%s/%d.events", image, t->tid);
	else
		snprintf(path, size, "%s/%d.%u.events", image, t->tid, file - 1);
}

static int write_header(struct rthread *t)
{
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
	int err;

	memcpy(h.comm, t->comm, sizeof(h.comm));
	err = write_unit(t->fd.fd, &h, sizeof(h));
	if (!err)
		bytes_written += sizeof(h);
	return err;
}

/* t's events file made, under the first name no thread before it took,
 * with its header; or, made before, opened again by name (the program
 * took the descriptor, or the thread's file was closed at its end).  0 or
 * an errno. */
static int open_events(struct rthread *t)
{
	char path[PATH_MAX + 96];
	int fd, err;

	if (t->file) {
		events_path(path, sizeof(path), t, t->file);
		fd = ftpad_own_fd_openat(&t->fd, events_base(), path, O_WRONLY | O_APPEND, 0, true);
		t->fd.fd = fd < 0 ? -1 : fd;
		return fd < 0 ? -fd : 0;
	}
	for (uint32_t file = 1; file < 100000; file++) {
		events_path(path, sizeof(path), t, file);
		fd = ftpad_own_fd_openat(&t->fd, events_base(), path,
					 O_WRONLY | O_APPEND | O_CREAT | O_EXCL, 0644, false);
		if (fd == -EEXIST)
			continue;
		if (fd < 0)
			return -fd;
		t->fd.fd = fd;
		t->file = file;
		err = write_header(t);
		if (err) { /* no file rather than a headerless one: made again later */
			close(fd);
			unlinkat(events_base(), path, 0);
			t->fd.fd = -1;
			t->file = 0;
		}
		return err;
	}
	return EEXIST;
}

void close_events(struct rthread *t)
{
	if (t->fd.fd >= 0 && ftpad_own_fd_valid(&t->fd, t->fd.fd))
		close(t->fd.fd);
	t->fd.fd = -1;
}

/* n events of t into its file, encoded in blocks, or counted as unwritten
 * with the cause. */
void put_events(struct rthread *t, const struct ftpad_event *ev, size_t n)
{
	size_t done = 0;
	int err = 0;

	if (t->fd.fd >= 0 && !ftpad_own_fd_valid(&t->fd, t->fd.fd))
		t->fd.fd = -1; /* the program's number now: left to it */
	if (t->fd.fd < 0)
		err = open_events(t);
	if (!err && !encoder.max_events)
		err = ENOMEM; /* no encoder: not a trace started by begin() */
	while (!err && done < n) {
		size_t k = n - done < encoder.max_events ? n - done : encoder.max_events;
		size_t len = ftpad_block_encode(&encoder, ev + done, k);

		err = write_unit(t->fd.fd, encoder.out, len);
		if (!err) {
			bytes_written += len;
			done += k;
		}
	}
	if (!err)
		return;
	/* LOST events carry counts already dropped: not events themselves */
	for (size_t i = done; i < n; i++)
		t->unwritten += ftpad_event_kind(&ev[i]) != FTPAD_EVENT_LOST;
	if (!t->unwritten_err) {
		t->unwritten_err = err;
		t->unwritten_since = ftpad_trace_clock();
	}
}

/* Drops of a thread that got no chunk again (budget spent, no free chunk)
 * have no next event to precede: their LOST event ends its file, at the
 * time the drops began, so that every drop is in the trace (16 bytes a
 * thread beyond --size at most). */
static void write_lost_tail(struct rthread *t)
{
	_Alignas(struct chunk) char room[sizeof(struct chunk) +
					 FTPAD_LOST_CAUSES * sizeof(struct ftpad_event)];
	struct chunk *tail = (struct chunk *)room;

	if (t->cur)
		return;
	for (;;) { /* a count beyond UINT32_MAX takes more than one */
		tail->n = 0;
		put_lost(t, tail, FTPAD_LOST_CAUSES);
		if (!tail->n)
			return;
		put_events(t, tail->ev, tail->n);
	}
}

/* A thread that ended, its events written: the last LOST count, and its
 * file closed. */
void end_file(struct rthread *t)
{
	t->ending = 0;
	write_lost_tail(t);
	close_events(t);
}

/* Write every full chunk, oldest first, and free it.  The threads that
 * ended before the chunks were taken have their last ones among them: each
 * one's file is closed right after its last chunk, so that a program that
 * runs many short threads has one such file open at a time. */
/*
 * More than half the pool waits to be written: the threads fill it faster
 * than zstd goes (a tight loop makes an event every 10 ns, and zstd takes
 * about 8 an event), so the writer writes the varint columns alone, about
 * four times the bytes at a fraction of the time, until it has caught up.
 * Without this, the pool runs out and events are dropped instead.
 */
static bool falling_behind(const struct chunk *rest)
{
	size_t waiting = __atomic_load_n(&nfull, __ATOMIC_RELAXED);

	for (; rest && waiting <= nchunks / 2; rest = rest->next)
		waiting++;
	return waiting > nchunks / 2;
}

static void drain(void)
{
	struct chunk *c, *list = NULL;
	struct rthread *ended, *t;
	sigset_t old;

	pthread_mutex_lock(&write_lock);
	hold_xfsz(&old);
	ended = __atomic_exchange_n(&ended_threads, NULL, __ATOMIC_ACQUIRE);
	for (t = ended; t; t = t->ended_next)
		t->ending = 1;
	c = __atomic_exchange_n(&full_head, NULL, __ATOMIC_ACQUIRE);
	while (c) { /* pushed newest first: reverse; the first seen is each thread's last */
		struct chunk *next = c->next;

		c->next = list, list = c, c = next;
		__atomic_sub_fetch(&nfull, 1, __ATOMIC_RELAXED);
	}
	for (c = list; c; c = c->next)
		c->owner->last_chunk = c;
	while (ring_chunks && (c = list)) { /* kept in memory; the files are written at the end */
		list = c->next;
		c->owner->last_chunk = NULL;
		ring_keep(c);
	}
	while ((c = list)) {
		size_t len = c->n * sizeof(struct ftpad_event);

		list = c->next;
		t = c->owner;
		encoder.plain = falling_behind(list);
		put_events(t, c->ev, c->n);
		__atomic_sub_fetch(reserved, chunk_events * sizeof(struct ftpad_event) - len,
				   __ATOMIC_RELAXED);
		if (t->last_chunk == c) {
			t->last_chunk = NULL;
			if (t->ending)
				end_file(t);
		}
		put_free(c);
	}
	encoder.plain = 0;
	for (t = ended; t; t = t->ended_next) {
		if (t->ending && !ring_chunks) /* no chunk left to write */
			end_file(t);
		else
			t->ending = 0;
		t->gone |= ring_chunks != 0;
	}
	release_xfsz(&old);
	pthread_mutex_unlock(&write_lock);
}

/*
 * A thread's end (thread_key's destructor): its last chunk handed over,
 * then written here, on the ending thread, with whatever else waits, and
 * its file closed.  A program that runs a short thread per request would
 * otherwise keep a chunk per ended thread from the pool until the writer
 * looks, and drop the events of the threads after, on a busy machine.
 */
void end_thread(void *arg)
{
	forget_thread_at_exit(arg);
	if (__atomic_load_n(&writer_running, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&stopping, __ATOMIC_SEQ_CST))
		drain();
}

/* Until the next look: the pause, or a wake_writer() (or a stop's). */
static void writer_pause(void)
{
	const struct timespec pause = { 0, 2000000 };

	__atomic_store_n(&writer_asleep, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&nfull, __ATOMIC_SEQ_CST) < wake_at &&
	    !__atomic_load_n(&stopping, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &writer_asleep, FUTEX_WAIT_PRIVATE, 1, &pause, NULL, 0);
	__atomic_store_n(&writer_asleep, 0, __ATOMIC_RELAXED);
}

/*
 * The default cap (no --size): a trace nobody ends must not fill its
 * disk.  The writer looks at the trace's file system a few times a second
 * (statvfs: far too slow per event) and turns the room left above the
 * share kept free into a limit on the reserved count, which new_chunk()
 * checks as it does --size.  The events reserved but not written yet are
 * not in the free space: the whole pool is counted as such.  Every
 * process of the trace looks for itself, so between two looks they may
 * take that room once each: the share kept free absorbs it.
 */
void check_free_space(void)
{
	struct statvfs fs;
	int d = trace_dir();
	uint64_t pool_bytes = nchunks * chunk_events * sizeof(struct ftpad_event);
	uint64_t keep, avail, limit;

	if (size_capped() || d < 0 || fstatvfs(d, &fs) || !fs.f_blocks)
		return;
	keep = (uint64_t)fs.f_blocks * min_free_percent / 100;
	avail = fs.f_bavail > keep ? ((uint64_t)fs.f_bavail - keep) * fs.f_frsize : 0;
	/* Reserved but not written yet, at most the pool: not in f_bavail */
	avail = avail > pool_bytes ? avail - pool_bytes : 0;
	limit = __atomic_load_n(reserved, __ATOMIC_RELAXED) + avail;
	__atomic_store_n(&space_limit, limit, __ATOMIC_RELAXED);
}

static uint64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Between drains, a few times a second: the free space the default cap
 * keeps (check_free_space()), and a clock point into info, so that a
 * viewer of a trace still being written (ftpad live) converts its times
 * from the first second on: every second for the first minute, then
 * every minute (the clock's rate is known well by then, and info stays
 * small).
 */
static void writer_chores(uint64_t start, uint64_t *next_space, uint64_t *next_sync)
{
	uint64_t now = monotonic_ms();

	if (now >= *next_space) {
		check_free_space();
		*next_space = now + 250;
	}
	if (now >= *next_sync) {
		clock_sync();
		*next_sync = now + (now - start < 60000 ? 1000 : 60000);
	}
}

static void *writer_main(void *arg)
{
	uint64_t start = monotonic_ms(), next_space = start, next_sync = start + 1000;

	(void)arg;
	while (!__atomic_load_n(&stopping, __ATOMIC_RELAXED)) {
		drain();
		writer_chores(start, &next_space, &next_sync);
		if (ring_chunks)
			ring_serve();
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

/* The LOST counts that end threads' files (write_lost_tail()). */
static void write_last_lost(void)
{
	sigset_t old;

	pthread_mutex_lock(&write_lock);
	hold_xfsz(&old);
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next)
		write_lost_tail(t);
	release_xfsz(&old);
	pthread_mutex_unlock(&write_lock);
}

/* --ring: what the ring holds, into the trace's files (its end, an exec). */
static void write_ring(void)
{
	sigset_t old;

	if (!ring_chunks)
		return;
	pthread_mutex_lock(&write_lock);
	hold_xfsz(&old);
	ring_write_out();
	release_xfsz(&old);
	pthread_mutex_unlock(&write_lock);
}

/* Every thread's events, written now (at exit, exec). */
void flush_all(void)
{
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next)
		hand_over(t);
	drain();
	write_ring();
	write_last_lost();
}

/* This thread's events and the full chunks, written now (an exec): the
 * other threads keep their current chunks, which they still write. */
void flush_thread(struct rthread *t)
{
	if (t)
		hand_over(t);
	drain();
	write_ring();
}

void count_totals(struct ftpad_record_totals *tot)
{
	tot->events = tot->dropped = tot->fast = 0;
	pthread_mutex_lock(&write_lock);
	/* events: those in the files; an event no write could put there is
	 * dropped */
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
		tot->events += t->events + t->fast_events - t->unwritten - t->overwritten;
		tot->dropped += t->dropped + t->unwritten;
		tot->fast += t->fast_events;
	}
	tot->bytes = bytes_written;
	pthread_mutex_unlock(&write_lock);
}

/* ---- the other files ---- */

void append_file(const char *name, const char *text)
{
	int fd = open_in_trace(name, O_WRONLY | O_CREAT | O_APPEND, 0644);

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
	int fd = open_in_trace("info", O_WRONLY | O_CREAT | O_EXCL, 0644);

	if (fd < 0)
		return; /* there already, or the appends below will say nothing either */
	write_all(fd, "format=2\n", 9);
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

/* The image's directory, made by this process: named image, or, when a
 * process before it with the same pid took that name, <pid>.<n> with the
 * next n free (the image file's keys, not the name, say what it
 * continues). */
static int make_image_dir(void)
{
	int pid, n, d = trace_dir();

	if (sscanf(image, "%d.%d", &pid, &n) != 2)
		return -1;
	errno = ENOENT;
	for (int tries = 0; d >= 0 && tries < 100000; tries++, n++) {
		snprintf(image, sizeof(image), "%d.%d", pid, n);
		if (!mkdirat(d, image, 0755))
			return 0;
		if (errno != EEXIST)
			break;
	}
	ftpad_warn("ftpad: error: cannot create '%s/%s': %s; not recording\n", dir, image,
		   strerror(errno));
	return -1;
}

/* Room kept in the image file for its end (totals, unwritten events), so
 * that a full disk does not take the count of what it took. */
static void reserve_image_end(void)
{
	char path[PATH_MAX + 96];
	int fd;

	snprintf(path, sizeof(path), "%s/image", image);
	fd = open_in_trace(path, O_WRONLY, 0);
	if (fd < 0)
		return;
	/* Not every file system can: the end may then find no room. */
	fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 16384);
	close(fd);
}

/* sites_fd, still ours, or opened again by name (the program closed it):
 * before each write of the sites file. */
static struct ftpad_own_fd sites_own = { .fd = -1 };

void check_sites_fd(void)
{
	char path[PATH_MAX + 96];

	if (sites_fd >= 0 && ftpad_own_fd_valid(&sites_own, sites_fd))
		return;
	snprintf(path, sizeof(path), "%s/sites", image);
	sites_fd = own_in_trace(&sites_own, path, O_WRONLY | O_APPEND, 0, sites_fd >= 0);
	if (sites_fd < 0)
		sites_fd = -1;
}

/* <pid>.<n>/ with its image file; sites copied from parent_sites if set. */
int make_image(const char *how, const char *from)
{
	char path[PATH_MAX + 96], text[PATH_MAX * 2 + 256], exe[PATH_MAX] = "", argv[2048];
	ssize_t n;

	if (make_image_dir())
		return -1;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	read_cmdline(argv, sizeof(argv));
	snprintf(text, sizeof(text), "pid=%d\nppid=%d\nexe=%s\nargv=%s\n%s%s%s", getpid(),
		 getppid(), exe, argv, how ? how : "", how ? from : "", how ? "\n" : "");
	append_image(text);
	reserve_image_end();
	snprintf(path, sizeof(path), "%s/sites", image);
	if (sites_fd >= 0 && ftpad_own_fd_valid(&sites_own, sites_fd))
		close(sites_fd);
	sites_fd = own_in_trace(&sites_own, path, O_WRONLY | O_CREAT | O_APPEND, 0644, false);
	if (sites_fd < 0)
		errno = -sites_fd, sites_fd = -1;
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
	fd = open_in_trace(path, O_RDONLY, 0);
	if (fd < 0)
		return;
	check_sites_fd();
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
	fd = open_in_trace(".budget", O_RDWR | O_CREAT | (fresh ? O_TRUNC : 0), 0644);
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
		close_events(t);
	if (sites_fd >= 0 && ftpad_own_fd_valid(&sites_own, sites_fd))
		close(sites_fd);
	sites_fd = -1;
	if (dir_own.fd >= 0 && ftpad_own_fd_valid(&dir_own, dir_own.fd))
		close(dir_own.fd);
	dir_own.fd = -1;
}

/* The image's end, after its totals: per events file, the events no write
 * could put in it, with the first cause (lost_write=FILE COUNT CAUSE),
 * then their sum (unwritten=), which dropped= includes. */
void append_unwritten(void)
{
	char line[128], path[PATH_MAX + 96];
	uint64_t sum = 0;

	pthread_mutex_lock(&write_lock);
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
		if (!t->unwritten)
			continue;
		events_path(path, sizeof(path), t, t->file ? t->file : 1);
		snprintf(line, sizeof(line), "lost_write=%s %llu %s %llu\n", strrchr(path, '/') + 1,
			 (unsigned long long)t->unwritten, errno_name(t->unwritten_err),
			 (unsigned long long)t->unwritten_since);
		append_image(line);
		sum += t->unwritten;
	}
	pthread_mutex_unlock(&write_lock);
	if (sum) {
		snprintf(line, sizeof(line), "unwritten=%llu\n", (unsigned long long)sum);
		append_image(line);
	}
}

/* A write's errno as a cause of drops. */
static unsigned write_cause(int err)
{
	return err == ENOSPC || err == EDQUOT || err == EFBIG ? FTPAD_LOST_DISK_FULL
							     : FTPAD_LOST_WRITE_ERROR;
}

static void add_drops(uint64_t *count, uint64_t *first, unsigned cause, uint64_t n,
		      uint64_t since)
{
	if (!n)
		return;
	if (!count[cause] || since < first[cause])
		first[cause] = since;
	count[cause] += n;
}

/* The image's end, after its totals: its drops per cause, with the clock
 * at the first of each (dropped_by=CAUSE COUNT TICKS), whose counts add
 * up to dropped=.  held: events other threads held at an exec, dropped
 * then, at the clock's held_at. */
void append_drops(uint64_t held, uint64_t held_at)
{
	uint64_t count[FTPAD_LOST_CAUSES] = { 0 }, first[FTPAD_LOST_CAUSES] = { 0 };
	char line[128];

	pthread_mutex_lock(&write_lock);
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
		for (unsigned c = 0; c < FTPAD_LOST_CAUSES; c++)
			add_drops(count, first, c, t->dropped_by[c], t->first_drop[c]);
		add_drops(count, first, write_cause(t->unwritten_err), t->unwritten,
			  t->unwritten_since);
	}
	pthread_mutex_unlock(&write_lock);
	add_drops(count, first, FTPAD_LOST_FOREIGN_CLONE,
		  __atomic_load_n(&foreign_drops, __ATOMIC_RELAXED),
		  __atomic_load_n(&foreign_first, __ATOMIC_RELAXED));
	add_drops(count, first, FTPAD_LOST_CUT, held, held_at);
	for (unsigned c = 0; c < FTPAD_LOST_CAUSES; c++) {
		if (!count[c])
			continue;
		snprintf(line, sizeof(line), "dropped_by=%s %llu %llu\n", ftpad_lost_cause_name(c),
			 (unsigned long long)count[c], (unsigned long long)first[c]);
		append_image(line);
	}
}
