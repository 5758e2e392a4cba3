/* SPDX-License-Identifier: MIT */
/*
 * gen_trace.c - writes a trace directory in the documented format
 * (docs/format.md "The trace directory"), through <ftpad_trace.h>, from a
 * script on stdin, so that the viewers' tests describe exact scenarios
 * while the recorder is written.  tests/trace/test_trace_view.py writes the
 * scripts.  One command a line:
 *
 *   dir PATH                       the trace directory (made)
 *   info TEXT                      a line of DIR/info, as is
 *   image NAME                     DIR/NAME/ (made); what follows goes there
 *   imageinfo TEXT                 a line of NAME/image
 *   site ID KIND ADDR FLAGS NAME MODULE   a line of NAME/sites ('' = empty name)
 *   thread TID COMM                NAME/TID.events with its header
 *   header FIELD VALUE             changes the next thread's header: magic,
 *                                  version, event_size
 *   ev TIME KIND SITE SP           one event; KIND: entry exit tail lost
 *                                  signal sigreturn unwind, or a number
 *   bytes N                        N stray bytes: a file cut short
 *   append TID                     more events at the end of NAME/TID.events
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ftpad_trace.h"

static char dir[4096], image[8192];
static FILE *events;
static struct ftpad_trace_thread_header next_header;

static void die(const char *what, const char *arg)
{
	fprintf(stderr, "gen_trace: %s %s: %s\n", what, arg, strerror(errno));
	exit(1);
}

static void append_line(const char *file, const char *text)
{
	char path[16384];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", file[0] == 'i' && !strcmp(file, "info") ? dir : image,
		 file);
	f = fopen(path, "a");
	if (!f)
		die("cannot open", path);
	fprintf(f, "%s\n", text);
	fclose(f);
}

static void reset_header(void)
{
	memset(&next_header, 0, sizeof(next_header));
	memcpy(next_header.magic, FTPAD_TRACE_MAGIC, 8);
	next_header.version = FTPAD_TRACE_VERSION_RAW; /* events as they are */
	next_header.header_size = sizeof(struct ftpad_trace_thread_header);
	next_header.event_size = sizeof(struct ftpad_event);
	next_header.arch = 1; /* FTPAD_ARCH_X86_64 */
}

static unsigned kind_of(const char *s)
{
	static const char *const names[] = { "entry", "exit", "tail", "lost", "signal", "sigreturn",
					     "unwind" };
	unsigned i;

	for (i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (!strcmp(s, names[i]))
			return i;
	return (unsigned)strtoul(s, NULL, 0);
}

static void open_thread(const char *tid, const char *comm)
{
	char path[16384];

	if (events)
		fclose(events);
	snprintf(path, sizeof(path), "%s/%s.events", image, tid);
	events = fopen(path, "w");
	if (!events)
		die("cannot create", path);
	next_header.tid = (uint32_t)strtoul(tid, NULL, 10);
	next_header.pid = (uint32_t)strtoul(strrchr(image, '/') + 1, NULL, 10);
	memcpy(next_header.comm, comm, strnlen(comm, sizeof(next_header.comm)));
	fwrite(&next_header, sizeof(next_header), 1, events);
	reset_header();
}

static void site_line(char *rest)
{
	char id[32], kind[32], addr[32], flags[32], name[1024], module[1024], line[2200];

	if (sscanf(rest, "%31s %31s %31s %31s %1023s %1023s", id, kind, addr, flags, name, module) != 6)
		die("bad site line", rest);
	snprintf(line, sizeof(line), "%s\t%s\t%s\t%s\t%s\t%s", id, kind, addr, flags,
		 strcmp(name, "''") ? name : "", module);
	append_line("sites", line);
}

static void command(char *line)
{
	char *rest = strchr(line, ' ');

	if (rest)
		*rest++ = 0;
	else
		rest = line + strlen(line);
	if (!strcmp(line, "dir")) {
		snprintf(dir, sizeof(dir), "%s", rest);
		if (mkdir(dir, 0777) && errno != EEXIST)
			die("cannot make", dir);
	} else if (!strcmp(line, "info")) {
		append_line("info", rest);
	} else if (!strcmp(line, "image")) {
		snprintf(image, sizeof(image), "%s/%.4000s", dir, rest);
		if (mkdir(image, 0777) && errno != EEXIST)
			die("cannot make", image);
	} else if (!strcmp(line, "imageinfo")) {
		append_line("image", rest);
	} else if (!strcmp(line, "site")) {
		site_line(rest);
	} else if (!strcmp(line, "thread")) {
		char tid[32], comm[32] = "";

		sscanf(rest, "%31s %31s", tid, comm);
		open_thread(tid, comm);
	} else if (!strcmp(line, "header")) {
		char field[32], value[32];

		sscanf(rest, "%31s %31s", field, value);
		if (!strcmp(field, "magic"))
			memcpy(next_header.magic, value, 8);
		else if (!strcmp(field, "version"))
			next_header.version = (uint16_t)atoi(value);
		else if (!strcmp(field, "event_size"))
			next_header.event_size = (uint16_t)atoi(value);
	} else if (!strcmp(line, "ev")) {
		char kind[32];
		uint64_t time;
		uint32_t site, sp;
		struct ftpad_event e;

		if (sscanf(rest, "%" SCNu64 " %31s %" SCNu32 " %" SCNu32, &time, kind, &site, &sp) != 4)
			die("bad event", rest);
		e = (struct ftpad_event){ time, ftpad_event_what(kind_of(kind), site), sp };
		fwrite(&e, sizeof(e), 1, events);
	} else if (!strcmp(line, "bytes")) {
		int n = atoi(rest);

		while (n-- > 0)
			fputc(0x5a, events);
	} else if (!strcmp(line, "append")) {
		char path[16384];

		if (events)
			fclose(events);
		snprintf(path, sizeof(path), "%s/%s.events", image, rest);
		events = fopen(path, "a");
		if (!events)
			die("cannot open", path);
	} else if (*line && *line != '#') {
		errno = EINVAL;
		die("unknown command", line);
	}
}

int main(void)
{
	char line[4096];

	reset_header();
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		command(line);
	}
	if (events && fclose(events))
		die("cannot write", "events");
	return 0;
}
