/* SPDX-License-Identifier: MIT */
/*
 * record_ring.c - --ring (FTPAD_RECORD_RING): the trace as a flight
 * recorder.  The hot path is the recorder's own, unchanged: threads fill
 * chunks and hand them over.  The writer, instead of writing the chunks
 * it drains, keeps them here, oldest first, and gives the oldest back to
 * the pool once the ring holds more than its size: what stays is the
 * newest events of every thread together, give or take the chunk each
 * thread is filling.  Each thread's kept events are the newest part of
 * its stream (its chunks go in the order it filled them), so a reader
 * finds a thread that starts mid-stack, as after an attach.
 *
 * The ring reaches the trace's files through the writer's put_events(),
 * as drained chunks do: at the end of the image (exit, a crash's signal,
 * an exec, a detach) into the trace itself; on a snapshot into
 * DIR/snapshot-<n>/, a complete trace of its own (info, the image's file
 * and sites, its events files), while recording goes on.  A snapshot is
 * asked for through DIR/.ring (ftpad_record.h): by `ftpad snapshot`, or by
 * a thread entering a --trigger function.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "record.h"

/* The drained chunks, oldest first, and how many (under write_lock). */
static struct chunk *ring_head, *ring_tail;
static size_t ring_held;

/* DIR/.ring, shared with the other processes of the trace and the tool. */
static struct ftpad_ring_control *control;
/* The snapshot numbers this process has written up to, and how many it
 * wrote (atomic: a trigger reads served). */
static uint64_t served, snapshots;

/*
 * --trigger: a hit asks for one snapshot, unless one asked for is not
 * written yet (then the hit is in it: the writer takes it at its next
 * look, within a few milliseconds, so the events just after the hit are
 * in it too).  A function hit in a loop (an error path) must not fill the
 * disk: past TRIGGER_MAX snapshots per process, hits are only counted.
 */
#define TRIGGER_MAX 16
static struct ftpad_ops trigger_ops;
static unsigned triggered;     /* atomic: snapshots the trigger asked for */
static uint64_t trigger_extra; /* atomic: hits past TRIGGER_MAX */

static uint64_t events_in(const struct chunk *c)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < c->n; i++)
		n += ftpad_event_kind(&c->ev[i]) != FTPAD_EVENT_LOST;
	return n;
}

static void free_chunk(struct chunk *c)
{
	__atomic_sub_fetch(reserved, chunk_events * sizeof(struct ftpad_event), __ATOMIC_RELAXED);
	put_free(c);
}

void ring_keep(struct chunk *c)
{
	c->next = NULL;
	if (ring_tail)
		ring_tail->next = c;
	else
		ring_head = c;
	ring_tail = c;
	ring_held++;
	while (ring_held > ring_chunks) {
		struct chunk *old = ring_head;

		ring_head = old->next;
		if (!ring_head)
			ring_tail = NULL;
		ring_held--;
		old->owner->overwritten += events_in(old);
		free_chunk(old);
	}
}

/* The ring into the files, oldest first.  A thread that has ended gets
 * its file closed right after its last chunk, as drain() does: a program
 * that ran many short threads has one such file open at a time, not one
 * per thread the ring still holds. */
void ring_write_out(void)
{
	struct chunk *c;

	for (c = ring_head; c; c = c->next)
		c->owner->last_chunk = c;
	while ((c = ring_head)) {
		struct rthread *t = c->owner;

		ring_head = c->next;
		put_events(t, c->ev, c->n);
		if (t->last_chunk == c) {
			t->last_chunk = NULL;
			if (t->gone)
				end_file(t);
		}
		free_chunk(c);
	}
	ring_tail = NULL;
	ring_held = 0;
}

void ring_forget(void)
{
	ring_head = ring_tail = NULL;
	ring_held = 0;
	snapshots = 0;
	__atomic_store_n(&triggered, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&trigger_extra, 0, __ATOMIC_RELAXED);
}

/* ---- snapshots ---- */

/* from (under the directory fd from_dir) copied to a new file to under
 * to_dir, cut after its last newline when whole_lines (the sites file may
 * be growing); nothing if to is there already (another process of the
 * trace made it).  extra, if any, is appended. */
static void copy_file(int from_dir, const char *from, int to_dir, const char *to,
		      bool whole_lines, const char *extra)
{
	int in = openat(from_dir, from, O_RDONLY | O_CLOEXEC), out;
	struct stat st;
	void *map = MAP_FAILED;
	size_t len = 0;

	out = openat(to_dir, to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (out < 0)
		goto out;
	if (in >= 0 && !fstat(in, &st) && st.st_size > 0) {
		len = (size_t)st.st_size;
		map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, in, 0);
	}
	if (map != MAP_FAILED) {
		const char *end = whole_lines ? memrchr(map, '\n', len) : NULL;

		write_all(out, map, whole_lines ? (end ? (size_t)(end - (char *)map) + 1 : 0) : len);
		munmap(map, len);
	}
	if (extra)
		write_all(out, extra, strlen(extra));
	close(out);
out:
	if (in >= 0)
		close(in);
}

static void append_at(int dir, const char *name, const char *text)
{
	int fd = openat(dir, name, O_WRONLY | O_APPEND | O_CLOEXEC);

	if (fd < 0)
		return;
	write_all(fd, text, strlen(text));
	close(fd);
}

/*
 * The events of the snapshot, into the events files under snap: every
 * thread's chunks in the ring, then what it has in its current chunk but
 * for the last slot, which the fast path may be writing (it takes the
 * slot first).  Each thread's files are the snapshot's own: its state
 * for the trace's files is put aside meanwhile.  Returns the events
 * written.
 */
static uint64_t snapshot_events(int snap)
{
	struct rthread *t, *all = __atomic_load_n(&threads, __ATOMIC_ACQUIRE);
	uint64_t n = 0, bytes = bytes_written; /* the trace's, which bytes= sums */

	for (t = all; t; t = t->next) {
		t->ring_saved.fd = t->fd, t->ring_saved.file = t->file;
		t->ring_saved.unwritten = t->unwritten, t->ring_saved.err = t->unwritten_err;
		t->fd.fd = -1, t->file = 0;
	}
	set_events_dir(snap);
	for (const struct chunk *c = ring_head; c; c = c->next) {
		put_events(c->owner, c->ev, c->n);
		n += events_in(c);
	}
	for (t = all; t; t = t->next) {
		struct chunk *c = __atomic_load_n(&t->cur, __ATOMIC_ACQUIRE);
		uint32_t k = c ? __atomic_load_n(&c->n, __ATOMIC_ACQUIRE) : 0;

		if (k-- > 1) {
			put_events(t, c->ev, k);
			for (uint32_t i = 0; i < k; i++)
				n += ftpad_event_kind(&c->ev[i]) != FTPAD_EVENT_LOST;
		}
	}
	set_events_dir(-1);
	for (t = all; t; t = t->next) {
		n -= t->unwritten - t->ring_saved.unwritten;
		close_events(t);
		t->fd = t->ring_saved.fd, t->file = t->ring_saved.file;
		t->unwritten = t->ring_saved.unwritten, t->unwritten_err = t->ring_saved.err;
	}
	bytes_written = bytes;
	return n;
}

/* DIR/snapshot-<k>/: info, this process's image (its file, its sites,
 * its events).  Under write_lock. */
static void write_snapshot(uint64_t k)
{
	char name[64], path[sizeof(image) + 16], text[256], sync[96];
	int d = trace_dir(), snap;
	uint64_t events, dropped = 0;

	snprintf(name, sizeof(name), FTPAD_RING_SNAPSHOT_FMT, (unsigned long long)k);
	if (d < 0 || (mkdirat(d, name, 0755) && errno != EEXIST) ||
	    (snap = openat(d, name, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		ftpad_warn("ftpad: error: cannot make '%s/%s': %s; no snapshot\n", dir, name,
			   strerror(errno));
		return;
	}
	/* The program goes on: frames open at the end are running.  And the
	 * snapshot is whole, though the trace it is taken from goes on. */
	copy_file(d, "info", snap, "info", false,
		  "snapshot=1\n" FTPAD_INFO_STATE "=" FTPAD_INFO_FINISHED "\n");
	ftpad_clock_sync_line(sync, sizeof(sync));
	append_at(snap, "info", sync);
	if (mkdirat(snap, image, 0755) && errno != EEXIST) {
		close(snap);
		return;
	}
	snprintf(path, sizeof(path), "%s/sites", image);
	copy_file(d, path, snap, path, true, NULL);
	snprintf(path, sizeof(path), "%s/image", image);
	copy_file(d, path, snap, path, true, NULL);
	events = snapshot_events(snap);
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next)
		dropped += t->dropped;
	snprintf(text, sizeof(text), "snapshot=%llu\nevents=%llu\ndropped=%llu\n",
		 (unsigned long long)k, (unsigned long long)events, (unsigned long long)dropped);
	append_at(snap, path, text);
	close(snap);
}

void ring_serve(void)
{
	uint64_t asked, w;
	sigset_t old;

	if (!control)
		return;
	asked = __atomic_load_n(&control->requested, __ATOMIC_ACQUIRE);
	if (asked <= __atomic_load_n(&served, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&write_lock);
	hold_xfsz(&old);
	while (served < asked) {
		write_snapshot(served + 1);
		__atomic_store_n(&served, served + 1, __ATOMIC_RELEASE);
		snapshots++;
		w = __atomic_load_n(&control->written, __ATOMIC_RELAXED);
		while (w < served && !__atomic_compare_exchange_n(&control->written, &w, served, true,
								 __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
	}
	release_xfsz(&old);
	pthread_mutex_unlock(&write_lock);
}

/* ---- the trigger ---- */

static void trigger_hit(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
			struct ftpad_regs *regs)
{
	uint64_t asked;

	(void)ip, (void)parent_ip, (void)ops, (void)regs;
	if (!control || __atomic_load_n(&stopping, __ATOMIC_RELAXED))
		return;
	asked = __atomic_load_n(&control->requested, __ATOMIC_ACQUIRE);
	if (asked > __atomic_load_n(&served, __ATOMIC_ACQUIRE))
		return; /* one is asked for and not written yet: this hit is in it */
	if (__atomic_load_n(&triggered, __ATOMIC_RELAXED) >= TRIGGER_MAX) {
		__atomic_add_fetch(&trigger_extra, 1, __ATOMIC_RELAXED);
		return;
	}
	/* Two threads hitting at once ask for one snapshot. */
	if (__atomic_compare_exchange_n(&control->requested, &asked, asked + 1, false,
					__ATOMIC_RELEASE, __ATOMIC_RELAXED))
		__atomic_add_fetch(&triggered, 1, __ATOMIC_RELAXED);
}

int ring_register_trigger(void)
{
	const char *globs = setting(FTPAD_ENV_RECORD_TRIGGER);
	int err;

	if (!ring_chunks || !globs || !*globs)
		return 0;
	trigger_ops.func = trigger_hit;
	trigger_ops.exit_func = NULL;
	trigger_ops.flags = 0;
	err = ftpad_set_filter(&trigger_ops, globs, 1);
	if (!err)
		err = ftpad_register_ops(&trigger_ops);
	if (err)
		ftpad_warn("ftpad: error: cannot set the trigger '%s': %s\n", globs,
			   ftpad_strerror(err));
	return err;
}

/* ---- the trace's start and end ---- */

void ring_start(bool fresh)
{
	int d = trace_dir(), fd;
	void *p = MAP_FAILED;

	ring_forget();
	if (control)
		munmap(control, sizeof(*control));
	control = NULL;
	fd = d < 0 ? -1
		   : openat(d, FTPAD_RING_CONTROL, O_RDWR | O_CREAT | O_CLOEXEC | (fresh ? O_TRUNC : 0),
			    0644);
	if (fd >= 0 && !ftruncate(fd, sizeof(*control)))
		p = mmap(NULL, sizeof(*control), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd >= 0)
		close(fd);
	if (p == MAP_FAILED) {
		ftpad_warn("ftpad: warning: cannot map '%s/%s': %s; no snapshots\n", dir,
			   FTPAD_RING_CONTROL, strerror(errno));
		return;
	}
	control = p;
	/* An exec's image serves the snapshots asked for from now on. */
	__atomic_store_n(&served, __atomic_load_n(&control->requested, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
}

void ring_stop(void)
{
	if (trigger_ops.flags & FTPAD_OPS_FL_ENABLED)
		ftpad_unregister_ops(&trigger_ops);
	if (control)
		munmap(control, sizeof(*control));
	control = NULL;
}

void ring_append_totals(void)
{
	char text[160];
	uint64_t overwritten = 0;

	pthread_mutex_lock(&write_lock);
	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next)
		overwritten += t->overwritten;
	pthread_mutex_unlock(&write_lock);
	snprintf(text, sizeof(text), "ring=%llu\noverwritten=%llu\nsnapshots=%llu\n",
		 (unsigned long long)(ring_chunks * chunk_events * sizeof(struct ftpad_event)),
		 (unsigned long long)overwritten, (unsigned long long)snapshots);
	append_image(text);
	if (__atomic_load_n(&trigger_extra, __ATOMIC_RELAXED)) {
		snprintf(text, sizeof(text), "trigger_ignored=%llu\n",
			 (unsigned long long)__atomic_load_n(&trigger_extra, __ATOMIC_RELAXED));
		append_image(text);
	}
}
