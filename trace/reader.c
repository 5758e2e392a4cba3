/* SPDX-License-Identifier: MIT */
/*
 * reader.c - opens a trace directory as docs/format.md "The trace
 * directory" describes it.  The events files are mapped, never copied: a
 * viewer walks a 1 GB trace in place.
 */
#define _GNU_SOURCE
#include "reader.h"
#include "ftpad_clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void trace_warn(struct trace *t, const char *fmt, ...)
{
	va_list ap;

	t->warnings++;
	fputs("ftpad: warning: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void trace_fatal(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("ftpad: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static int trace_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int trace_error(const char *fmt, ...)
{
	va_list ap;

	fputs("ftpad: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		fputs("ftpad: error: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;

	return memcpy(xrealloc(NULL, n), s, n);
}

/* A key given twice keeps its last value, and does not leak the first. */
static void replace_str(char **to, const char *v)
{
	free(*to);
	*to = xstrdup(v);
}

static char *path_join(const char *a, const char *b)
{
	char *p;

	if (asprintf(&p, "%s/%s", a, b) < 0)
		exit(1);
	return p;
}

/*
 * Opens a file of the trace for reading, if it is a regular file: a FIFO
 * would block every viewer (O_NONBLOCK lets the open itself return, then
 * fstat() refuses it), a symbolic link could name /dev/zero or any file of
 * the machine, and a device never ends.  Returns the descriptor, or -1
 * with *why saying what is wrong (errno is kept for the caller's ENOENT).
 */
int trace_open_file(const char *path, struct stat *st, const char **why)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);

	if (fd < 0) {
		*why = errno == ELOOP ? "a symbolic link: a trace holds regular files only"
				      : strerror(errno);
		return -1;
	}
	if (fstat(fd, st)) {
		*why = strerror(errno);
		close(fd);
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		*why = S_ISFIFO(st->st_mode)  ? "a FIFO: a trace holds regular files only"
		       : S_ISDIR(st->st_mode) ? "a directory: a trace holds regular files only"
					      : "not a regular file: a trace holds regular files only";
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

char *trace_slurp(const char *path, size_t *len, const char **why)
{
	struct stat st;
	int fd = trace_open_file(path, &st, why);
	size_t size, got = 0;
	char *buf;

	if (fd < 0)
		return NULL;
	/* What fstat() saw: a file still being written (live) is read as far
	 * as it was, and nothing larger than the file is ever allocated. */
	size = (size_t)st.st_size;
	buf = xrealloc(NULL, size + 1);
	while (got < size) {
		ssize_t n = read(fd, buf + got, size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*why = strerror(errno);
			free(buf);
			close(fd);
			return NULL;
		}
		if (n == 0)
			break; /* cut short since fstat(): what is there is all */
		got += (size_t)n;
	}
	close(fd);
	buf[got] = 0;
	if (len)
		*len = got;
	return buf;
}

/* --- interning: open addressing over indexes, grown at half full --- */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static void hash_grow(struct trace_hash *h, size_t n, uint64_t (*key)(const struct trace *, uint32_t),
		      const struct trace *t)
{
	size_t size = h->slots ? (h->mask + 1) * 2 : 64, i;

	if (h->slots && (n + 1) * 2 <= h->mask + 1)
		return; /* room for one more */
	free(h->slots);
	h->slots = xrealloc(NULL, size * sizeof(*h->slots));
	memset(h->slots, 0, size * sizeof(*h->slots));
	h->mask = size - 1;
	for (i = 0; i < n; i++) {
		size_t j = key(t, (uint32_t)i) & h->mask;

		while (h->slots[j])
			j = (j + 1) & h->mask;
		h->slots[j] = (uint32_t)i + 1;
	}
}

static uint64_t sym_key(const struct trace *t, uint32_t i)
{
	return hash_str(t->syms[i]);
}

uint32_t trace_sym(struct trace *t, const char *name)
{
	size_t j;

	hash_grow(&t->sym_hash, t->nsyms, sym_key, t);
	for (j = hash_str(name) & t->sym_hash.mask; t->sym_hash.slots[j]; j = (j + 1) & t->sym_hash.mask)
		if (!strcmp(t->syms[t->sym_hash.slots[j] - 1], name))
			return t->sym_hash.slots[j] - 1;
	if (t->nsyms == t->syms_cap)
		t->syms = xrealloc(t->syms, (t->syms_cap = t->syms_cap * 2 + 256) * sizeof(*t->syms));
	t->syms[t->nsyms] = xstrdup(name);
	t->sym_hash.slots[j] = (uint32_t)++t->nsyms;
	return (uint32_t)(t->nsyms - 1);
}

static uint64_t func_hash_of(uint64_t addr, uint32_t module, uint32_t sym)
{
	return (addr * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)module << 32 | sym) * 0xff51afd7ed558ccdull;
}

static uint64_t func_key(const struct trace *t, uint32_t i)
{
	const struct trace_func *f = &t->funcs[i];

	return func_hash_of(f->addr, f->mod, f->sym);
}

/* GCC's C++ demangler, from libsupc++.a (docs/dependencies.md): callable
 * from C, and it pulls in nothing but libc. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* The name a user reads: a C++ name ("_Z...") demangled, unless the
 * viewer was asked for raw names; others as they are. */
static uint32_t display_sym(struct trace *t, const char *name)
{
	char *demangled;
	uint32_t sym;
	int status = -1;

	if (t->raw_names || strncmp(name, "_Z", 2))
		return trace_sym(t, name);
	demangled = __cxa_demangle(name, NULL, NULL, &status);
	sym = trace_sym(t, status == 0 && demangled ? demangled : name);
	free(demangled);
	return sym;
}

/* A function is its entry address, module and name (the same in a forked
 * child as in its parent, so both share one). */
static uint32_t trace_func(struct trace *t, uint64_t addr, const char *module, const char *name)
{
	uint32_t mod = trace_sym(t, module), sym;
	char *shown = NULL;
	size_t j;

	if (*name) {
		sym = display_sym(t, name);
	} else {
		const char *base = strrchr(module, '/');

		if (asprintf(&shown, "0x%" PRIx64 "@%s", addr, base ? base + 1 : module) < 0)
			exit(1);
		sym = trace_sym(t, shown);
		free(shown);
	}
	hash_grow(&t->func_hash, t->nfuncs, func_key, t);
	for (j = func_hash_of(addr, mod, sym) & t->func_hash.mask; t->func_hash.slots[j];
	     j = (j + 1) & t->func_hash.mask) {
		const struct trace_func *f = &t->funcs[t->func_hash.slots[j] - 1];

		if (f->addr == addr && f->sym == sym && f->mod == mod)
			return t->func_hash.slots[j] - 1;
	}
	if (t->nfuncs == t->funcs_cap)
		t->funcs = xrealloc(t->funcs, (t->funcs_cap = t->funcs_cap * 2 + 256) * sizeof(*t->funcs));
	t->funcs[t->nfuncs] = (struct trace_func){ .addr = addr, .module = t->syms[mod], .mod = mod,
						      .sym = sym };
	t->func_hash.slots[j] = (uint32_t)++t->nfuncs;
	return (uint32_t)(t->nfuncs - 1);
}

/* --- info and image: key=value lines --- */

static int parse_clock_sync(struct trace *t, const char *path, const char *v, uint64_t pairs[][2],
			    int *npairs)
{
	uint64_t ticks, ns;
	int used;

	if (sscanf(v, "%" SCNu64 " %" SCNu64 "%n", &ticks, &ns, &used) != 2 || v[used])
		return trace_error("%s: bad clock_sync line '%s' (want 'TICKS NS')", path, v);
	if (*npairs == 0)
		pairs[(*npairs)++][0] = ticks, pairs[0][1] = ns;
	else
		pairs[1][0] = ticks, pairs[1][1] = ns, *npairs = 2;
	(void)t;
	return 0;
}

unsigned long long trace_process_start(int pid)
{
	char path[64], stat[1024], *end;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, stat, sizeof(stat) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	stat[n] = 0;
	/* after the name, which may hold anything: the 22nd field is the 20th */
	end = strrchr(stat, ')');
	if (!end || sscanf(end + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
			     "%*d %*d %*d %*d %*d %*d %llu", &start) != 1)
		return 0;
	return start;
}

int trace_recorder_alive(const struct trace *t)
{
	return t->recording && t->recorder_pid > 0 &&
	       trace_process_start(t->recorder_pid) == t->recorder_start;
}

/* A trace being recorded on this machine (its recorder runs here) in its
 * first second has one clock point: now is the second, read here (the
 * clock counts the same in every process of the machine). */
static void add_clock_now(uint64_t pairs[][2], int *npairs)
{
	char line[96];

	ftpad_clock_sync_line(line, sizeof(line));
	if (sscanf(line, "clock_sync=%" SCNu64 " %" SCNu64, &pairs[1][0], &pairs[1][1]) == 2)
		*npairs = 2;
}

static int set_clock(struct trace *t, const char *path, uint64_t pairs[][2], int npairs)
{
	t->clock = (struct trace_clock){ .mult = 1ull << 32 };
	if (npairs == 0)
		return trace_error("%s: no clock_sync line: times cannot be converted", path);
	t->clock.t0 = pairs[0][0];
	t->clock.ns0 = (int64_t)pairs[0][1];
	if (npairs < 2 || pairs[1][0] == pairs[0][0]) {
		trace_warn(t, "%s: one clock_sync point only; a tick is taken for a nanosecond", path);
		return 0;
	}
	if (pairs[1][0] < pairs[0][0] || pairs[1][1] < pairs[0][1])
		return trace_error("%s: clock_sync goes backwards", path);
	t->clock.mult = (uint64_t)(((unsigned __int128)(pairs[1][1] - pairs[0][1]) << 32) /
				   (pairs[1][0] - pairs[0][0]));
	return 0;
}

static int read_info(struct trace *t)
{
	const char *why = NULL;
	char *path = path_join(t->dir, "info"), *text = trace_slurp(path, NULL, &why), *line;
	char *save = NULL;
	uint64_t pairs[2][2] = { { 0 } };
	int npairs = 0, format = 0, rc = 0;

	if (!text) {
		if (errno == ENOENT)
			rc = trace_error("%s: not a trace directory: %s: %s", t->dir, path, why);
		else
			rc = trace_error("%s: %s", path, why);
		goto out;
	}
	if (!*text) {
		rc = trace_error("%s: empty: a trace's info starts with format=%d (was its recording "
				 "killed before it began?)", path, FTPAD_TRACE_VERSION);
		goto out;
	}
	for (line = strtok_r(text, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
		char *v = strchr(line, '=');

		if (!v)
			continue;
		*v++ = 0;
		if (!strcmp(line, "format"))
			format = atoi(v);
		else if (!strcmp(line, "arch"))
			snprintf(t->arch, sizeof(t->arch), "%s", v);
		else if (!strcmp(line, "clock"))
			snprintf(t->clock_name, sizeof(t->clock_name), "%s", v);
		else if (!strcmp(line, "command"))
			replace_str(&t->command, v);
		else if (!strcmp(line, "ring"))
			t->ring = 1;
		else if (!strcmp(line, "attach") || !strcmp(line, "snapshot"))
			t->attached = 1, /* the program went on: frames open at the end run */
			t->snapshot |= !strcmp(line, "snapshot");
		else if (!strcmp(line, "state"))
			t->recording = !strcmp(v, "recording");
		else if (!strcmp(line, "recorder"))
			sscanf(v, "%d %llu", &t->recorder_pid, &t->recorder_start);
		else if (!strcmp(line, "clock_sync"))
			rc = parse_clock_sync(t, path, v, pairs, &npairs);
	}
	if (!rc && format != FTPAD_TRACE_VERSION && format != FTPAD_TRACE_VERSION_RAW)
		rc = trace_error("%s: trace format %d is not one this ftpad reads (%d, %d)", path,
				 format, FTPAD_TRACE_VERSION_RAW, FTPAD_TRACE_VERSION);
	if (!rc && npairs == 1 && trace_recorder_alive(t))
		add_clock_now(pairs, &npairs);
	if (!rc)
		rc = set_clock(t, path, pairs, npairs);
out:
	free(text);
	free(path);
	return rc;
}

/* lost_write=FILE COUNT CAUSE: the last line of a file counts (an image
 * whose exec failed wrote its end twice). */
static void add_lost_write(struct trace_image *im, const char *v)
{
	struct trace_lost_write lw = { 0 };
	char file[256];
	size_t i;

	if (sscanf(v, "%255s %" SCNu64 " %15s %" SCNu64, file, &lw.count, lw.cause, &lw.since) < 3)
		return;
	for (i = 0; i < im->nlost_writes && strcmp(im->lost_writes[i].file, file); i++)
		;
	if (i == im->nlost_writes) {
		im->lost_writes = xrealloc(im->lost_writes, (i + 1) * sizeof(lw));
		im->nlost_writes++;
		lw.file = xstrdup(file);
	} else {
		lw.file = im->lost_writes[i].file;
	}
	im->lost_writes[i] = lw;
}

/* Each thread's unwritten events, from the image's lost_write= lines. */
static void match_lost_writes(struct trace_image *im)
{
	for (size_t i = 0; i < im->nlost_writes; i++)
		for (size_t j = 0; j < im->nthreads; j++) {
			struct trace_thread *th = &im->threads[j];
			const char *base = strrchr(th->path, '/');

			if (strcmp(base ? base + 1 : th->path, im->lost_writes[i].file))
				continue;
			th->unwritten = im->lost_writes[i].count;
			th->unwritten_since = im->lost_writes[i].since;
			memcpy(th->unwritten_cause, im->lost_writes[i].cause,
			       sizeof(th->unwritten_cause));
		}
}

static int read_image_file(struct trace_image *im, const char *path)
{
	const char *why = NULL;
	char *text = trace_slurp(path, NULL, &why), *line, *save = NULL;

	if (!text) /* optional for reading the events: the sites are what matter */
		return errno == ENOENT ? 0 : trace_error("%s: %s", path, why);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *v = strchr(line, '=');

		if (!v)
			continue;
		*v++ = 0;
		if (!strcmp(line, "ppid"))
			im->ppid = (uint32_t)strtoul(v, NULL, 10);
		else if (!strcmp(line, "exe"))
			replace_str(&im->exe, v);
		else if (!strcmp(line, "argv"))
			replace_str(&im->argv, v);
		else if (!strcmp(line, "forked_from"))
			replace_str(&im->forked_from, v);
		else if (!strcmp(line, "exec_from"))
			replace_str(&im->exec_from, v);
		else if (!strcmp(line, "lost_write"))
			add_lost_write(im, v);
		else if (!strcmp(line, "events"))
			im->events_said = strtoull(v, NULL, 10);
	}
	free(text);
	return 0;
}

/* --- sites: id TAB kind TAB addr TAB flags TAB name TAB module --- */

static int parse_site_line(struct trace *t, struct trace_image *im, const char *path, unsigned lineno,
			   char *line, size_t file_size)
{
	char *col[6], *end;
	unsigned long id;
	uint64_t addr;
	int kind, n = 0;

	for (col[n++] = line; n < 6 && (line = strchr(line, '\t')); col[n++] = ++line)
		*line = 0;
	if (n < 6)
		return trace_error("%s:%u: %d columns, want 6 (id kind addr flags name module)", path,
				   lineno, n);
	id = strtoul(col[0], &end, 10);
	if (*end || end == col[0] || id > FTPAD_EVENT_SITE_MASK)
		return trace_error("%s:%u: bad site id '%s'", path, lineno, col[0]);
	/* Ids count from 0, one line each, and a line takes more than a byte:
	 * an id beyond the file's size is not one the recorder wrote, and the
	 * table indexed by ids (8 bytes an id) stays within 8 times the file. */
	if (id >= file_size)
		return trace_error("%s:%u: site id %lu, more than a %zu-byte sites file can list",
				   path, lineno, id, file_size);
	if (!strcmp(col[1], "entry"))
		kind = TRACE_SITE_ENTRY;
	else if (!strcmp(col[1], "exit"))
		kind = TRACE_SITE_EXIT;
	else if (!strcmp(col[1], "tail-exit"))
		kind = TRACE_SITE_TAIL_EXIT;
	else
		return trace_error("%s:%u: unknown site kind '%s'", path, lineno, col[1]);
	addr = strtoull(col[2], &end, 16);
	if (*end || end == col[2])
		return trace_error("%s:%u: bad address '%s'", path, lineno, col[2]);
	if (id >= im->nsites) {
		uint32_t old = im->nsites;

		im->nsites = (uint32_t)id + 1;
		im->sites = xrealloc(im->sites, im->nsites * sizeof(*im->sites));
		for (; old < im->nsites; old++)
			im->sites[old] = (struct trace_site){ .func = TRACE_NONE };
	}
	im->sites[id].func = trace_func(t, addr, col[5], col[4]);
	im->sites[id].kind = (uint8_t)kind;
	if (strstr(col[3], "noexit"))
		t->funcs[im->sites[id].func].noexit = im->sites[id].noexit = 1;
	return 0;
}

static int read_sites(struct trace *t, struct trace_image *im, const char *dir)
{
	const char *why = NULL;
	char *path = path_join(dir, "sites"), *line, *next;
	size_t size = 0;
	char *text = trace_slurp(path, &size, &why);
	unsigned lineno = 0;
	int rc = 0;

	if (!text) {
		if (!(t->quiet && errno == ENOENT)) /* live: the image is being made */
			rc = trace_error("%s: %s", path, why);
		goto out;
	}
	for (line = text; *line && !rc; line = next) {
		next = strchr(line, '\n');
		lineno++;
		if (!next) { /* being written: the last line is not whole yet */
			if (!t->quiet)
				trace_warn(t, "%s:%u: line cut short; ignored", path, lineno);
			break;
		}
		*next++ = 0;
		rc = parse_site_line(t, im, path, lineno, line, size);
	}
out:
	free(text);
	free(path);
	return rc;
}

/* --- events files --- */

int trace_check_header(const struct trace *t, const char *path, const void *bytes, size_t len,
		       struct trace_thread *th)
{
	struct ftpad_trace_thread_header h;

	(void)t;
	if (len < sizeof(h))
		return trace_error("%s: %zu bytes, shorter than the %zu-byte header", path, len,
				   sizeof(h));
	memcpy(&h, bytes, sizeof(h));
	if (memcmp(h.magic, FTPAD_TRACE_MAGIC, sizeof(h.magic)))
		return trace_error("%s: not an ftpad events file (no FTPADTRC magic)", path);
	if (h.version != FTPAD_TRACE_VERSION && h.version != FTPAD_TRACE_VERSION_RAW)
		return trace_error("%s: events format version %u is not one this ftpad reads (%d, %d)",
				   path, h.version, FTPAD_TRACE_VERSION_RAW, FTPAD_TRACE_VERSION);
	if (h.header_size < sizeof(h) || h.header_size > len ||
	    h.event_size != sizeof(struct ftpad_event))
		return trace_error("%s: header says %u-byte header and %u-byte events; want %zu and %zu",
				   path, h.header_size, h.event_size, sizeof(h),
				   sizeof(struct ftpad_event));
	th->version = h.version;
	th->pid = h.pid;
	th->tid = h.tid;
	memcpy(th->comm, h.comm, sizeof(h.comm));
	th->comm[16] = 0;
	return h.header_size;
}

void trace_thread_blocks(const struct trace_thread *th, struct trace_block_reader *r)
{
	if (trace_block_reader_open(r, (const uint8_t *)th->map + th->body, &th->blocks))
		trace_fatal("%s: out of memory for a block of %zu events", th->path,
			    th->blocks.max_events);
}

/* Version 2: the blocks' headers checked, and the first block decoded
 * for the first event's time; the rest are decoded as a walk goes. */
static int scan_thread(struct trace *t, struct trace_thread *th, size_t header)
{
	struct trace_block_reader r;
	size_t body = th->map_len - header;
	char why[256];
	long n;

	th->body = header;
	if (trace_blocks_scan((const uint8_t *)th->map + header, body, &th->blocks, why,
			      sizeof(why)))
		return trace_error("%s: %s", th->path, why);
	th->nevents = th->blocks.nevents;
	if (th->blocks.whole < body && !t->quiet)
		trace_warn(t, "%s: cut short: read to its last whole block (%zu events), %zu stray "
			   "bytes ignored", th->path, th->nevents, body - th->blocks.whole);
	if (!th->nevents)
		return 0;
	trace_thread_blocks(th, &r);
	n = trace_block_read(&r, why, sizeof(why));
	if (n > 0)
		th->first_time = r.ev[0].time;
	trace_block_reader_close(&r);
	return n > 0 ? 0 : trace_error("%s: %s", th->path, why);
}

static int map_thread(struct trace *t, struct trace_thread *th)
{
	const char *why = NULL;
	struct stat st;
	int fd = trace_open_file(th->path, &st, &why), header;
	size_t body;

	if (fd < 0)
		return trace_error("%s: %s", th->path, why);
	th->map_len = (size_t)st.st_size;
	th->map = th->map_len ? mmap(NULL, th->map_len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	close(fd);
	if (th->map == MAP_FAILED) {
		th->map = NULL;
		return trace_error("%s: mmap: %s", th->path, strerror(errno));
	}
	if (th->map_len)
		madvise(th->map, th->map_len, MADV_SEQUENTIAL | MADV_WILLNEED);
	if (th->map_len < sizeof(struct ftpad_trace_thread_header)) {
		/* live: its header is being written; no events yet.  Otherwise
		 * its process was killed (SIGKILL) as it began the file. */
		if (!t->quiet)
			trace_warn(t, "%s: cut short before its header (%zu bytes): no events",
				   th->path, th->map_len);
		return 0;
	}
	header = trace_check_header(t, th->path, th->map, th->map_len, th);
	if (header < 0)
		return -1;
	if (th->version != FTPAD_TRACE_VERSION_RAW)
		return scan_thread(t, th, (size_t)header);
	body = th->map_len - (size_t)header;
	th->events = (const struct ftpad_event *)((const char *)th->map + header);
	th->nevents = body / sizeof(struct ftpad_event);
	th->first_time = th->nevents ? th->events[0].time : 0;
	if (body % sizeof(struct ftpad_event) && !t->quiet)
		trace_warn(t, "%s: cut short: read to its last whole event (%zu), %zu stray bytes ignored",
			   th->path, th->nevents, body % sizeof(struct ftpad_event));
	return 0;
}

static int by_tid(const void *a, const void *b)
{
	const struct trace_thread *x = a, *y = b;

	return x->tid != y->tid ? (x->tid < y->tid ? -1 : 1) : strcmp(x->path, y->path);
}

static int read_threads(struct trace *t, struct trace_image *im, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t cap = 0;
	int rc = 0;

	if (!d)
		return trace_error("%s: %s", dir, strerror(errno));
	while ((de = readdir(d)) && !rc) {
		size_t n = strlen(de->d_name);

		if (n < 8 || strcmp(de->d_name + n - 7, ".events"))
			continue;
		if (im->nthreads == cap)
			im->threads = xrealloc(im->threads, (cap = cap * 2 + 8) * sizeof(*im->threads));
		im->threads[im->nthreads] = (struct trace_thread){ .path = path_join(dir, de->d_name) };
		rc = map_thread(t, &im->threads[im->nthreads++]);
		if (!rc && !t->quiet && !im->threads[im->nthreads - 1].version) {
			/* headerless (map_thread() said so): no thread to show */
			struct trace_thread *th = &im->threads[--im->nthreads];

			if (th->map)
				munmap(th->map, th->map_len);
			free(th->path);
		}
	}
	closedir(d);
	qsort(im->threads, im->nthreads, sizeof(*im->threads), by_tid);
	return rc;
}

/* --- the directory --- */

static int image_name(const char *s, uint32_t *pid, uint32_t *n)
{
	unsigned long a, b;
	char *end;

	if (*s < '0' || *s > '9')
		return 0;
	a = strtoul(s, &end, 10);
	if (*end != '.' || end[1] < '0' || end[1] > '9')
		return 0;
	b = strtoul(end + 1, &end, 10);
	if (*end)
		return 0;
	*pid = (uint32_t)a;
	*n = (uint32_t)b;
	return 1;
}

static int by_image(const void *a, const void *b)
{
	const struct trace_image *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->n < y->n ? -1 : x->n > y->n;
}

static int read_images(struct trace *t)
{
	DIR *d = opendir(t->dir);
	struct dirent *de;
	size_t cap = 0, i;
	int rc = 0;

	if (!d)
		return trace_error("%s: %s", t->dir, strerror(errno));
	while ((de = readdir(d))) {
		uint32_t pid, n;

		if (!image_name(de->d_name, &pid, &n))
			continue;
		if (t->nimages == cap)
			t->images = xrealloc(t->images, (cap = cap * 2 + 4) * sizeof(*t->images));
		t->images[t->nimages++] = (struct trace_image){ .name = xstrdup(de->d_name), .pid = pid,
								 .n = n };
	}
	closedir(d);
	/* Sorted first, so that functions are numbered the same way every time. */
	qsort(t->images, t->nimages, sizeof(*t->images), by_image);
	for (i = 0; i < t->nimages && !rc; i++) {
		struct trace_image *im = &t->images[i];
		char *dir = path_join(t->dir, im->name), *file = path_join(dir, "image");

		rc = read_image_file(im, file);
		if (!rc)
			rc = read_sites(t, im, dir);
		if (!rc)
			rc = read_threads(t, im, dir);
		if (!rc && !t->quiet && im->events_said && !im->nthreads)
			rc = trace_error("%s/<tid>.events: missing: %s/image says events=%llu, and "
					 "no events file is there", dir, dir,
					 (unsigned long long)im->events_said);
		if (!rc)
			match_lost_writes(im);
		free(file);
		free(dir);
	}
	return rc;
}

static void find_first_ns(struct trace *t)
{
	int any = 0;
	size_t i, j;

	t->first_ns = 0;
	for (i = 0; i < t->nimages; i++)
		for (j = 0; j < t->images[i].nthreads; j++) {
			const struct trace_thread *th = &t->images[i].threads[j];
			int64_t ns;

			if (!th->nevents)
				continue;
			ns = trace_ticks_to_ns(&t->clock, th->first_time);
			if (!any || ns < t->first_ns)
				t->first_ns = ns;
			any = 1;
		}
}

/* info's last state= and recorder=. */
enum trace_state trace_state(const char *dir)
{
	char path[4096], *text, *line, *save = NULL;
	const char *why = NULL;
	struct trace t = { 0 };

	snprintf(path, sizeof(path), "%s/info", dir);
	text = trace_slurp(path, NULL, &why);
	if (!text) {
		if (errno == ENOENT)
			return TRACE_STATE_NOT_THERE;
		fprintf(stderr, "ftpad: error: %s: %s\n", path, why);
		return TRACE_STATE_BROKEN;
	}
	if (strncmp(text, "format=", 7)) { /* empty: its head is being written */
		free(text);
		return TRACE_STATE_NOT_THERE;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "state=", 6))
			t.recording = !strcmp(line + 6, "recording");
		else
			sscanf(line, "recorder=%d %llu", &t.recorder_pid, &t.recorder_start);
	}
	free(text);
	if (!t.recording)
		return TRACE_STATE_FINISHED;
	return trace_recorder_alive(&t) ? TRACE_STATE_RECORDING : TRACE_STATE_ABANDONED;
}

/* A trace still marked recording: being written (its files may end in a
 * half-written piece: read quietly), or left so by a recorder that was
 * killed, which is said. */
static void check_recording(struct trace *t)
{
	if (!t->recording)
		return;
	if (trace_recorder_alive(t)) {
		if (!t->quiet)
			trace_warn(t, "%s: still being recorded: read as it is now (ftpad live "
				   "follows it)", t->dir);
		t->quiet = 1;
		return;
	}
	trace_warn(t, "%s: incomplete: its recording did not finish (the recorder, pid %d, "
		   "was killed); read as far as it was written", t->dir, t->recorder_pid);
}

int trace_open(struct trace *t, const char *dir, unsigned flags)
{
	struct stat st;

	memset(t, 0, sizeof(*t));
	t->quiet = !!(flags & TRACE_OPEN_QUIET);
	t->raw_names = !!(flags & TRACE_OPEN_RAW_NAMES);
	t->dir = xstrdup(dir);
	if (stat(dir, &st))
		return trace_error("%s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return trace_error("%s: not a directory (a trace is a directory made by ftpad record)",
				   dir);
	if (read_info(t))
		return -1;
	check_recording(t);
	if (read_images(t))
		return -1;
	find_first_ns(t);
	return 0;
}

void trace_close(struct trace *t)
{
	size_t i, j;

	for (i = 0; i < t->nimages; i++) {
		struct trace_image *im = &t->images[i];

		for (j = 0; j < im->nthreads; j++) {
			if (im->threads[j].map)
				munmap(im->threads[j].map, im->threads[j].map_len);
			free(im->threads[j].path);
		}
		free(im->threads);
		free(im->sites);
		free(im->name);
		free(im->exe);
		free(im->argv);
		free(im->forked_from);
		free(im->exec_from);
		for (size_t k = 0; k < im->nlost_writes; k++)
			free(im->lost_writes[k].file);
		free(im->lost_writes);
	}
	for (i = 0; i < t->nsyms; i++)
		free(t->syms[i]);
	free(t->syms);
	free(t->funcs);
	free(t->images);
	free(t->func_hash.slots);
	free(t->sym_hash.slots);
	free(t->command);
	free(t->dir);
	memset(t, 0, sizeof(*t));
}
