/* SPDX-License-Identifier: MIT */
/*
 * The trace directory's life, shared by `ftpad record` and `ftpad attach`
 * (tracedir.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blocks.h"
#include "ftpad_clock.h"
#include "ftpad_record.h"
#include "ftpad_trace.h"
#include "reader.h"
#include "tracedir.h"

#ifndef FTPAD_INSTALL_LIBDIR
#define FTPAD_INSTALL_LIBDIR "lib"
#endif
/* Where the build tree keeps libftpad.so, from the tool's directory:
 * build/bin/ftpad, or build/runtime/aarch64/bin/ftpad for the aarch64 one. */
#ifndef FTPAD_BUILD_LIB
#define FTPAD_BUILD_LIB "../runtime/libftpad.so"
#endif

/* libftpad.so beside the tool: in the build tree, then as installed (the
 * runtime package of a distribution has only the soname's file). */
int find_library(char *out, size_t size)
{
	const char *env = getenv("FTPAD_LIB");
	char self[PATH_MAX], *dir;
	ssize_t n;
	static const char *const rel[] = { FTPAD_BUILD_LIB,
					   "../" FTPAD_INSTALL_LIBDIR "/libftpad.so",
					   "../" FTPAD_INSTALL_LIBDIR "/libftpad.so.1" };

	if (env && *env) {
		if (access(env, R_OK)) {
			fprintf(stderr, "ftpad: error: FTPAD_LIB '%s': %s\n", env, strerror(errno));
			return -1;
		}
		snprintf(out, size, "%s", env);
		return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0) {
		fprintf(stderr, "ftpad: error: /proc/self/exe: %s\n", strerror(errno));
		return -1;
	}
	self[n] = 0;
	dir = dirname(self);
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", dir, rel[i]);
		if (!access(path, R_OK) && realpath(path, out))
			return 0;
	}
	fprintf(stderr, "ftpad: error: cannot find libftpad.so as %s/%s or in %s/../%s; "
		"set FTPAD_LIB\n", dir, FTPAD_BUILD_LIB, dir, FTPAD_INSTALL_LIBDIR);
	return -1;
}

/* Whether path is the working directory or one of its parents: a trace
 * put there would replace the directory the user stands in. */
static bool holds_cwd(const char *path)
{
	char real[PATH_MAX], cwd[PATH_MAX];
	size_t n;

	if (!realpath(path, real) || !getcwd(cwd, sizeof(cwd)))
		return false;
	n = strlen(real);
	if (n == 1) /* "/" */
		return true;
	return !strncmp(cwd, real, n) && (cwd[n] == '/' || !cwd[n]);
}

/* An image directory's name: <pid>.<n>. */
static bool image_name(const char *name)
{
	size_t digits = strspn(name, "0123456789");

	return digits && name[digits] == '.' && name[digits + 1] &&
	       strspn(name + digits + 1, "0123456789") == strlen(name + digits + 1);
}

/* snapshot-<n>: a snapshot of --ring, a trace in the trace. */
static bool is_snapshot_name(const char *name)
{
	size_t len = strlen("snapshot-");

	return !strncmp(name, "snapshot-", len) && name[len] &&
	       strspn(name + len, "0123456789") == strlen(name + len);
}

/* Whether the directory dir (not a link) is an ftpad trace, which --force
 * may replace: an info whose first line is format=..., and beside it only
 * what a recorder writes (.budget, .ring, <pid>.<n> and snapshot-<n>
 * directories).  Anything
 * else, a user's own folder most likely, is left alone. */
static bool is_trace_dir(const char *dir)
{
	int fd = open_trace_dir(dir), info;
	DIR *entries = fd < 0 ? NULL : fdopendir(fd);
	char head[8] = "";
	bool shaped = true;
	struct dirent *d;

	if (!entries) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	info = openat(fd, "info", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (info < 0 || read(info, head, 7) != 7 || strncmp(head, "format=", 7))
		shaped = false;
	if (info >= 0)
		close(info);
	while (shaped && (d = readdir(entries))) {
		struct stat st;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..") ||
		    !strcmp(d->d_name, "info") || !strcmp(d->d_name, ".budget") ||
		    !strcmp(d->d_name, FTPAD_RING_CONTROL) || is_snapshot_name(d->d_name))
			continue;
		shaped = image_name(d->d_name) &&
			 !fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISDIR(st.st_mode);
	}
	closedir(entries);
	return shaped;
}

int create_trace_dir(const char *dir, bool force, char *abs)
{
	if (holds_cwd(dir)) {
		fprintf(stderr, "ftpad: error: '%s' is the current directory or holds it: name a "
			"directory for the trace alone (default ftpad.data)\n", dir);
		return -1;
	}
	if (!force && !access(dir, F_OK)) {
		fprintf(stderr, "ftpad: error: '%s' exists; remove it or use --force\n", dir);
		return -1;
	}
	if (force && !access(dir, F_OK) && !is_trace_dir(dir)) {
		fprintf(stderr, "ftpad: error: '%s' is not an ftpad trace (an 'info' starting "
			"with 'format=', and only <pid>.<n> directories beside it): --force "
			"replaces only a trace; left as it is\n", dir);
		return -1;
	}
	if (force && !access(dir, F_OK) && trace_state(dir) == TRACE_STATE_RECORDING) {
		fprintf(stderr, "ftpad: error: '%s' is being recorded (its info names the ftpad "
			"that writes it, still running): --force replaces only a finished trace\n",
			dir);
		return -1;
	}
	/* The old trace goes now: the new one has its name from the start,
	 * so that it can be followed while it is written (ftpad live). */
	if (force && !access(dir, F_OK))
		remove_tree(dir);
	if (mkdir(dir, 0755) || !realpath(dir, abs)) {
		fprintf(stderr, "ftpad: error: cannot create '%s': %s\n", dir, strerror(errno));
		return -1;
	}
	return 0;
}

int open_trace_dir(const char *abs)
{
	return open(abs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int create_info(int dir)
{
	return openat(dir, "info", O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
		      0666);
}

int write_info_head_fd(int fd, char *const *argv, const char *extra)
{
	int copy = dup(fd);
	FILE *f = copy < 0 ? NULL : fdopen(copy, "a");

	if (!f) {
		if (copy >= 0)
			close(copy);
		return -1;
	}
	/* One write, at the fflush: a viewer that reads info meanwhile (ftpad
	 * live) finds it empty, or with its head and state= whole. */
	setvbuf(f, NULL, _IOFBF, 65536);
	fprintf(f, "format=%d\ncommand=", FTPAD_TRACE_VERSION);
	for (char *const *a = argv; *a; a++) {
		fputc('\'', f);
		for (const char *p = *a; *p; p++)
			fputs(*p == '\'' ? "'\\''" : (char[2]){ *p, 0 }, f);
		fputs(a[1] ? "' " : "'", f);
	}
	fputc('\n', f);
	if (extra)
		fputs(extra, f);
	/* Being recorded, by this process (state=finished ends the summary). */
	fprintf(f, TRACE_STATE_KEY "=" TRACE_RECORDING "\nrecorder=%d %llu\n", getpid(),
		trace_process_start(getpid()));
	/* Room for the lines still to come (clock points, the summary): a
	 * trace that filled its disk keeps them.  Not every file system can,
	 * and a trace is still made without. */
	if (!fflush(f))
		fallocate(fileno(f), FALLOC_FL_KEEP_SIZE, 0, 16384);
	return fclose(f);
}

/* cause added to the comma-separated list, once. */
static void add_cause(char *list, size_t size, const char *cause)
{
	size_t len = strlen(list), n = strlen(cause);

	for (const char *p = list; (p = strstr(p, cause)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return;
	snprintf(list + len, size - len, "%s%s", len ? "," : "", cause);
}

int write_info_head(const char *tmp, char *const *argv, const char *extra)
{
	char path[PATH_MAX + 16];
	int fd, err;

	snprintf(path, sizeof(path), "%s/info", tmp);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
	if (fd < 0)
		return -1;
	err = write_info_head_fd(fd, argv, extra);
	return close(fd) || err ? -1 : 0;
}

/* Why an image ended without its totals, from its process's end. */
static void cut_short_cause(const char *name, const struct proc_ends *ends, char *why,
			    size_t size)
{
	pid_t pid = atoi(name);

	for (size_t i = 0; ends && i < ends->n; i++) {
		const struct proc_end *e = &ends->v[ends->n - 1 - i]; /* the last, if reused */
		const char *abbrev;

		if (e->pid != pid)
			continue;
		if (e->running) {
			snprintf(why, size, "still running when the trace was finished");
		} else if (WIFSIGNALED(e->status)) {
			abbrev = sigabbrev_np(WTERMSIG(e->status));
			snprintf(why, size, "killed by signal %d (SIG%s)%s", WTERMSIG(e->status),
				 abbrev ? abbrev : "?",
				 WTERMSIG(e->status) == SIGKILL ? "" : ", which the recorder did not catch");
		} else {
			snprintf(why, size, "exited with status %d without the recorder's exit "
				 "path: a raw exit_group system call, most likely",
				 WEXITSTATUS(e->status));
		}
		return;
	}
	snprintf(why, size, "killed by SIGKILL, or ended by a raw exit_group system call, "
		 "most likely");
}

/* NAME in the directory dir, for reading, or NULL: no link followed,
 * nothing but a regular file (a FIFO would block), and in a trace
 * directory top that is not ours only its owner's files (a hard link to a
 * file of ours is not). */
static FILE *open_trace_file(int dir, const char *name, const struct stat *top)
{
	int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	FILE *f = NULL;

	if (fd < 0)
		return NULL;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) &&
	    (top->st_uid == geteuid() || st.st_uid == top->st_uid))
		f = fdopen(fd, "r");
	if (!f)
		close(fd);
	return f;
}

/* n drops for cause, the first at the clock's first, added to sum. */
static void add_drop(struct summary *sum, unsigned cause, unsigned long long n,
		     unsigned long long first)
{
	if (!n)
		return;
	if (!sum->dropped_by[cause] || first < sum->first_drop[cause])
		sum->first_drop[cause] = first;
	sum->dropped_by[cause] += n;
}

/* dropped_by=CAUSE COUNT TICKS: into by (the last line of a cause counts);
 * false for another line. */
static bool parse_dropped_by(const char *line, struct summary *by)
{
	char name[32];
	unsigned long long n, first;

	if (sscanf(line, "dropped_by=%31s %llu %llu", name, &n, &first) != 3)
		return false;
	for (unsigned c = 0; c < FTPAD_LOST_CAUSES; c++)
		if (!strcmp(name, ftpad_lost_cause_name(c)))
			by->dropped_by[c] = n, by->first_drop[c] = first;
	return true;
}

static void count_event(const struct ftpad_event *e, struct summary *image)
{
	if (ftpad_event_kind(e) == FTPAD_EVENT_LOST) {
		unsigned cause = ftpad_event_site(e);

		image->dropped += e->sp;
		if (cause < FTPAD_LOST_CAUSES)
			add_drop(image, cause, e->sp, e->time);
	} else {
		image->events++;
	}
}

/* A version 1 file's events, after its header. */
static void count_raw(FILE *f, struct summary *image)
{
	struct ftpad_event e;

	while (fread(&e, sizeof(e), 1, f) == 1) {
		count_event(&e, image);
		image->bytes += sizeof(e);
	}
}

/* A version 2 file's events, in its whole blocks; a spoiled block ends
 * the count there, as a cut one does. */
static void count_blocks(FILE *f, struct summary *image)
{
	const size_t header = sizeof(struct ftpad_trace_thread_header);
	struct trace_block_reader r;
	struct trace_blocks b;
	struct stat st;
	char why[256];
	uint8_t *map;
	long n;

	if (fstat(fileno(f), &st) || (size_t)st.st_size <= header)
		return;
	map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fileno(f), 0);
	if (map == MAP_FAILED)
		return;
	if (!trace_blocks_scan(map + header, st.st_size - header, &b, why, sizeof(why)) &&
	    !trace_block_reader_open(&r, map + header, &b)) {
		while ((n = trace_block_read(&r, why, sizeof(why))) > 0)
			for (long i = 0; i < n; i++)
				count_event(&r.ev[i], image);
		image->bytes += header + r.at; /* the blocks read */
		trace_block_reader_close(&r);
	}
	munmap(map, st.st_size);
}

/* What an image's writer had written: its events and its LOST counts
 * (docs/format.md), for an image that could not say its totals.  Read as
 * open_image() reads: through no link, regular files only, and in a
 * directory another user owns only that user's files. */
static void count_written(int dir, const struct stat *top, const char *name,
			  struct summary *image)
{
	int sub = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *entries = sub < 0 ? NULL : fdopendir(sub);
	struct dirent *d;

	if (!entries) {
		if (sub >= 0)
			close(sub);
		return;
	}
	while ((d = readdir(entries))) {
		struct ftpad_trace_thread_header h;
		FILE *f;

		if (!strstr(d->d_name, ".events"))
			continue;
		if (!(f = open_trace_file(sub, d->d_name, top)))
			continue;
		if (fread(&h, sizeof(h), 1, f) == 1)
			(h.version == FTPAD_TRACE_VERSION_RAW ? count_raw : count_blocks)(f, image);
		fclose(f);
	}
	closedir(entries);
}

/* An image's totals, added to sum: the last of each key, since an image
 * whose exec failed went on and appended later totals (docs/format.md).
 * An image without them was cut short: said, with its cause, and counted
 * from what its writer had written. */
static void add_image_stats(FILE *f, int dir, const struct stat *top, const char *name,
			    struct summary *sum, bool first, const struct proc_ends *ends)
{
	struct summary image = { 0 };
	bool ended = false;
	char line[8192], cause[16], why[160];

	while (fgets(line, sizeof(line), f)) {
		ended |= !strncmp(line, "events=", 7);
		if (parse_dropped_by(line, &image))
			continue;
		if (sscanf(line, "lost_write=%*s %*u %15s", cause) == 1) {
			add_cause(sum->causes, sizeof(sum->causes), cause);
			continue;
		}
		if (sscanf(line, "events=%llu", &image.events) == 1 ||
		    sscanf(line, "unwritten=%llu", &image.unwritten) == 1 ||
		    sscanf(line, "dropped=%llu", &image.dropped) == 1 ||
		    sscanf(line, "bytes=%llu", &image.bytes) == 1 ||
		    sscanf(line, "sites=%llu", &image.sites) == 1)
			continue;
		sscanf(line, "enabled=%llu", &image.enabled);
	}
	if (!ended) {
		count_written(dir, top, name, &image);
		cut_short_cause(name, ends, why, sizeof(why));
		fprintf(stderr, "ftpad: warning: process image %s ended without its totals (%s): "
			"the events it still held are lost, and not counted (the %llu it had "
			"written are)\n", name, why, image.events);
	}
	sum->events += image.events, sum->dropped += image.dropped, sum->bytes += image.bytes;
	sum->unwritten += image.unwritten;
	for (unsigned c = 0; c < FTPAD_LOST_CAUSES; c++)
		add_drop(sum, c, image.dropped_by[c], image.first_drop[c]);
	if (first)
		sum->sites = image.sites, sum->enabled = image.enabled;
}

/* NAME/image under the trace directory dir, for reading, or NULL.  The
 * directory may belong to the traced process's user (attach as root):
 * no link is followed, nothing but a regular file is read (a FIFO would
 * block), and in a directory that is not ours only its owner's files are
 * (a hard link to a file of ours is not). */
static FILE *open_image(int dir, const struct stat *top, const char *name)
{
	int sub = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	FILE *f = sub < 0 ? NULL : open_trace_file(sub, "image", top);

	if (sub >= 0)
		close(sub);
	return f;
}

/* info's first clock point, from which the summary dates the drops. */
static void read_first_sync(int dir, const struct stat *top, struct summary *sum)
{
	FILE *f = open_trace_file(dir, "info", top);
	char line[512];

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "clock_sync=%llu %llu", &sum->sync_ticks, &sum->sync_ns) == 2)
			break;
	if (f)
		fclose(f);
}

void summarize_at(int dir, pid_t pid, struct summary *sum, const struct proc_ends *ends)
{
	int own = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* its own offset */
	DIR *entries = own < 0 ? NULL : fdopendir(own);
	char first[64];
	struct dirent *d;
	struct stat top;

	if (!entries || fstat(dir, &top)) {
		if (entries)
			closedir(entries);
		else if (own >= 0)
			close(own);
		return;
	}
	snprintf(first, sizeof(first), "%d.0", pid);
	read_first_sync(dir, &top, sum);
	while ((d = readdir(entries))) {
		FILE *f;

		if (d->d_name[0] == '.' || !strchr(d->d_name, '.'))
			continue;
		f = open_image(dir, &top, d->d_name);
		if (!f)
			continue;
		add_image_stats(f, dir, &top, d->d_name, sum, !strcmp(d->d_name, first), ends);
		fclose(f);
	}
	closedir(entries);
}

void summarize(const char *tmp, pid_t pid, struct summary *sum, const struct proc_ends *ends)
{
	int dir = open_trace_dir(tmp);

	if (dir < 0)
		return;
	summarize_at(dir, pid, sum, ends);
	close(dir);
}

void append_summary_fd(int info, const char *head, const struct summary *sum)
{
	char sync[96];
	int copy = dup(info);
	FILE *f = copy < 0 ? NULL : fdopen(copy, "a");

	if (!f) {
		if (copy >= 0)
			close(copy);
		return;
	}
	/* A last clock point, read here once every process is done: one that
	 * was killed wrote only its first (the clock counts the same in every
	 * process of the machine). */
	ftpad_clock_sync_line(sync, sizeof(sync));
	fputs(sync, f);
	fprintf(f, "%ssites=%llu\nenabled=%llu\nevents=%llu\ndropped=%llu\nbytes=%llu\n", head,
		sum->sites, sum->enabled, sum->events, sum->dropped, sum->bytes);
	if (sum->unwritten)
		fprintf(f, "unwritten=%llu %s\n", sum->unwritten, sum->causes);
	for (unsigned c = 0; c < FTPAD_LOST_CAUSES; c++)
		if (sum->dropped_by[c])
			fprintf(f, "dropped_by=%s %llu %llu\n", ftpad_lost_cause_name(c),
				sum->dropped_by[c], sum->first_drop[c]);
	/* Last: a trace without it was not finished (its recording killed). */
	fputs(TRACE_STATE_KEY "=" TRACE_FINISHED "\n", f);
	fclose(f);
}

void append_summary(const char *tmp, const char *head, const struct summary *sum)
{
	char info[PATH_MAX + 16];
	int fd;

	snprintf(info, sizeof(info), "%s/info", tmp);
	fd = open(info, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	append_summary_fd(fd, head, sum);
	close(fd);
}

/* Everything under the directory dir removed (dir closed), never through
 * a link: each entry is unlinked by name in its directory, and a
 * subdirectory entered by a descriptor opened with O_NOFOLLOW from its
 * parent's, so that one swapped for a symlink meanwhile is unlinked, not
 * followed (the tree may belong to another user: attach as root). */
static void empty_dir(int dir, int depth)
{
	DIR *entries = fdopendir(dir);
	struct dirent *d;

	if (!entries) {
		close(dir);
		return;
	}
	while ((d = readdir(entries))) {
		int sub;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..") ||
		    !unlinkat(dir, d->d_name, 0) || errno != EISDIR)
			continue;
		sub = openat(dir, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0 && depth < 32)
			empty_dir(sub, depth + 1);
		else if (sub >= 0)
			close(sub);
		unlinkat(dir, d->d_name, AT_REMOVEDIR);
	}
	closedir(entries);
}

void remove_tree(const char *path)
{
	int dir = open_trace_dir(path);

	if (dir < 0) {
		unlink(path); /* a file or a link: itself, not what it leads to */
		return;
	}
	empty_dir(dir, 0);
	rmdir(path);
}

/* The clock's ticks as seconds from the trace's first clock point: the
 * rate from that point to now (the clock counts the same in every
 * process of the machine). */
static double seconds_in(const struct summary *sum, unsigned long long ticks)
{
	struct timespec ts;
	uint64_t now = ftpad_trace_clock(), ns;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (!sum->sync_ticks || now <= sum->sync_ticks || ns <= sum->sync_ns)
		return 0;
	return ((double)ticks - (double)sum->sync_ticks) * (double)(ns - sum->sync_ns) /
	       (double)(now - sum->sync_ticks) / 1e9;
}

void print_summary(const struct summary *sum, const char *dir)
{
	fprintf(stderr, "ftpad: %llu sites, %llu enabled, %llu events, %llu dropped, "
		"%llu bytes in %s\n", sum->sites, sum->enabled, sum->events, sum->dropped,
		sum->bytes, dir);
	if (sum->unwritten)
		fprintf(stderr, "ftpad: %llu event%s not written (%s): counted as dropped\n",
			sum->unwritten, sum->unwritten == 1 ? "" : "s", sum->causes);
	for (unsigned c = 0; c < FTPAD_LOST_CAUSES; c++)
		if (sum->dropped_by[c])
			fprintf(stderr, "ftpad: %llu dropped: %s, first at %.3f s\n",
				sum->dropped_by[c], ftpad_lost_cause_text(c),
				seconds_in(sum, sum->first_drop[c]));
}

int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ftpad: error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'ftpad --help'.\n");
	return EXIT_USAGE;
}

int add_glob(const char *command, char *list, size_t size, const char *opt, const char *glob)
{
	size_t len = strlen(list);

	if (!*glob || strchr(glob, ','))
		return usage_error("%s: option '%s' takes one glob, not empty nor with ','", command,
				   opt);
	if (len + strlen(glob) + 2 > size)
		return usage_error("%s: too many globs for '%s'", command, opt);
	snprintf(list + len, size - len, "%s%s", len ? "," : "", glob);
	return 0;
}


/* "500ns", "10us", "1.5ms", "2s" (a bare number: ns) -> ns >= 1. */
static int parse_duration(const char *text, unsigned long long *ns)
{
	static const struct { const char *unit; double ns; } units[] = {
		{ "", 1 }, { "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 },
	};
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	if (errno || end == text || !(v > 0))
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (!strcmp(end, units[i].unit) && v * units[i].ns >= 1 && v * units[i].ns < 1e18) {
			*ns = (unsigned long long)(v * units[i].ns);
			return 0;
		}
	}
	return -1;
}

int dir_option(int c, const char *opt, const char *arg, struct dir_opts *d)
{
	char *end;

	switch (c) {
	case 'F':
	case 'N':
		return add_glob(d->command, c == 'F' ? d->filter : d->notrace, sizeof(d->filter), opt,
				arg);
	case 'o':
		d->dir = arg;
		return *arg ? 0
			    : usage_error("%s: option '%s' needs a directory name", d->command, opt);
	case 's':
		errno = 0;
		d->size_mb = strtoull(arg, &end, 10);
		if (errno || !*arg || *end || !d->size_mb || d->size_mb > (1ull << 40))
			return usage_error("%s: --size takes a number of MB >= 1, not '%s'",
					   d->command, arg);
		return 0;
	case 'r':
		d->force = true;
		return 0;
	case 'D':
		errno = 0;
		d->depth = strtoull(arg, &end, 10);
		if (errno || !*arg || *end || !d->depth || d->depth > (1u << 20))
			return usage_error("%s: --depth takes a depth from 1 to 1048576, not '%s'",
					   d->command, arg);
		return 0;
	case 'R':
		errno = 0;
		d->ring_mb = strtoull(arg, &end, 10);
		if (errno || !*arg || *end || !d->ring_mb || d->ring_mb > (1ull << 20))
			return usage_error("%s: --ring takes a number of MB >= 1, not '%s'",
					   d->command, arg);
		return 0;
	case 'G':
		return add_glob(d->command, d->trigger, sizeof(d->trigger), opt, arg);
	case 'T':
		if (parse_duration(arg, &d->time_filter_ns))
			return usage_error("%s: --time-filter takes a duration such as 500ns, 10us, "
					   "1ms or 2s, not '%s'", d->command, arg);
		return 0;
	}
	return -1;
}

int dir_options_check(const struct dir_opts *d)
{
	if (*d->trigger && !d->ring_mb)
		return usage_error("%s: --trigger takes a snapshot of the ring: it needs %s",
				   d->command, "--ring MB");
	if (d->ring_mb && d->size_mb)
		return usage_error("%s: --size caps a trace written as it goes; the ring's size "
				   "caps each write of --ring: %s", d->command, "use one of them");
	return 0;
}

void ring_setting(const struct dir_opts *d, char *ring, size_t size)
{
	if (d->ring_mb)
		snprintf(ring, size, "%llu", d->ring_mb << 20);
	else
		snprintf(ring, size, "%s", "");
}
