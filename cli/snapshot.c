/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - `ftpad snapshot PID|DIR`: the ring of a trace recorded
 * with --ring (`ftpad record` or `ftpad attach`) written now, while the
 * recording goes on.  The tool asks through DIR/.ring (ftpad_record.h),
 * which every process of the trace maps: found from a PID in its
 * /proc/PID/maps, so that the trace's directory need not be known.  The
 * processes' writers take the request at their next look (every few
 * milliseconds) and write DIR/snapshot-N, a trace of its own; the tool
 * prints that directory once one has.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "ftpad_record.h"
#include "tracedir.h"

static const char snapshot_usage[] =
	"usage: ftpad snapshot PID|DIR [--timeout SECONDS]\n"
	"\n"
	"Write the ring of a trace recorded with --ring ('ftpad record --ring MB'\n"
	"or 'ftpad attach --ring MB') now, as DIR/snapshot-N (N counts the\n"
	"trace's snapshots from 1), a trace of its own that every viewer reads;\n"
	"the recording goes on.  PID: a process of the trace; DIR: its trace\n"
	"directory.  Prints the snapshot's directory once written (default\n"
	"timeout 10 s).\n";

/* DIR of the trace whose DIR/.ring the process pid maps; 0, or -1 after
 * a message. */
static int dir_of_pid(pid_t pid, char *dir, size_t size)
{
	char path[64], line[PATH_MAX + 256];
	size_t tail = strlen("/" FTPAD_RING_CONTROL);
	FILE *maps;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	maps = fopen(path, "re");
	if (!maps) {
		fprintf(stderr, "ftpad: error: snapshot: cannot read %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	while (!found && fgets(line, sizeof(line), maps)) {
		char *file = strchr(line, '/');
		size_t len;

		if (!file)
			continue;
		len = strcspn(file, "\n");
		file[len] = 0;
		if (len > tail && !strcmp(file + len - tail, "/" FTPAD_RING_CONTROL)) {
			file[len - tail] = 0;
			snprintf(dir, size, "%s", file);
			found = 1;
		}
	}
	fclose(maps);
	if (!found)
		fprintf(stderr, "ftpad: error: snapshot: process %d records no ring (it runs "
			"under neither 'ftpad record --ring' nor 'ftpad attach --ring')\n", (int)pid);
	return found ? 0 : -1;
}

/* Waits for the snapshot n: 0 once written, else -1 after a message. */
static int wait_written(struct ftpad_ring_control *ctl, unsigned long long n, pid_t pid,
			double timeout)
{
	const struct timespec tick = { 0, 10 * 1000 * 1000 };

	for (double waited = 0; waited < timeout; waited += 0.01) {
		if (__atomic_load_n(&ctl->written, __ATOMIC_ACQUIRE) >= n)
			return 0;
		if (pid && kill(pid, 0) && errno == ESRCH) {
			fprintf(stderr, "ftpad: error: snapshot: process %d ended first; its end "
				"writes the ring into the trace itself\n", (int)pid);
			return -1;
		}
		nanosleep(&tick, NULL);
	}
	fprintf(stderr, "ftpad: error: snapshot: no process of the trace wrote snapshot %llu "
		"within %g s (has the recording ended?)\n", n, timeout);
	return -1;
}

int cmd_snapshot(int argc, char **argv)
{
	char dir[PATH_MAX], path[PATH_MAX + 32], *end;
	const char *target = NULL;
	struct ftpad_ring_control *ctl;
	double timeout = 10;
	unsigned long long n;
	pid_t pid = 0;
	int fd, rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(snapshot_usage, stdout);
			return 0;
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			timeout = strtod(argv[++i], &end);
			if (*end || !(timeout > 0))
				return usage_error("snapshot: --timeout takes seconds > 0, not '%s'",
						   argv[i]);
		} else if (argv[i][0] == '-') {
			return usage_error("snapshot: unknown option '%s'", argv[i]);
		} else if (target) {
			return usage_error("snapshot: unexpected argument '%s'", argv[i]);
		} else {
			target = argv[i];
		}
	}
	if (!target)
		return usage_error("snapshot: missing %s", "PID or DIR: the recording to snapshot");
	if (strspn(target, "0123456789") == strlen(target) && access(target, F_OK)) {
		pid = (pid_t)strtol(target, NULL, 10);
		if (dir_of_pid(pid, dir, sizeof(dir)))
			return 1;
	} else {
		snprintf(dir, sizeof(dir), "%s", target);
	}
	snprintf(path, sizeof(path), "%s/%s", dir, FTPAD_RING_CONTROL);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "ftpad: error: snapshot: cannot open %s: %s (is '%s' a trace "
			"being recorded with --ring?)\n", path, strerror(errno), dir);
		return 1;
	}
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (ctl == MAP_FAILED) {
		fprintf(stderr, "ftpad: error: snapshot: cannot map %s: %s\n", path, strerror(errno));
		return 1;
	}
	n = __atomic_add_fetch(&ctl->requested, 1, __ATOMIC_ACQ_REL);
	rc = wait_written(ctl, n, pid, timeout);
	munmap(ctl, sizeof(*ctl));
	if (rc)
		return 1;
	printf("%s/" FTPAD_RING_SNAPSHOT_FMT "\n", dir, n);
	return 0;
}
