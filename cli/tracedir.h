/* SPDX-License-Identifier: MIT */
/*
 * What `ftpad record` and `ftpad attach` share: finding libftpad.so, and the
 * trace directory's life (docs/format.md, "The trace directory"): made as
 * DIR, given its info head (state=recording), summed up and marked
 * finished once complete.
 */
#ifndef FTPAD_TOOLS_TRACEDIR_H
#define FTPAD_TOOLS_TRACEDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "ftpad_record.h"
#include "ftpad_trace.h"

/* The summary, summed over every image's key=value stats. */
struct summary {
	unsigned long long sites, enabled, events, dropped, bytes;
	/* of dropped: the events no write could put in the trace, and why
	 * (errno names, comma-separated) */
	unsigned long long unwritten;
	char causes[64];
	/* every drop by cause (enum ftpad_lost_cause), and the clock at the
	 * first of each; info's first clock point, to date them */
	unsigned long long dropped_by[FTPAD_LOST_CAUSES], first_drop[FTPAD_LOST_CAUSES];
	unsigned long long sync_ticks, sync_ns;
};

/* info's state= (the last counts): recording from the head on, finished
 * once the summary is in.  A trace whose info has no state= is an older
 * one, finished; one left at recording was not (its recording killed),
 * or is being written: recorder=PID START says by whom (the process's
 * start time in /proc/PID/stat, against a reused pid). */
#define TRACE_STATE_KEY FTPAD_INFO_STATE
#define TRACE_RECORDING FTPAD_INFO_RECORDING
#define TRACE_FINISHED FTPAD_INFO_FINISHED

/* libftpad.so: FTPAD_LIB, else beside the tool (build tree, then as
 * installed).  0, or -1 after an error message. */
int find_library(char *out, size_t size);

/* DIR made, its absolute path in abs (PATH_MAX bytes).  DIR must not
 * exist unless force, and then be a trace, which is removed first.  0, or
 * -1 after an error message. */
int create_trace_dir(const char *dir, bool force, char *abs);

/* The directory abs itself (not what a symlink there leads to), for the
 *at calls: a descriptor, or -1 with errno.  `ftpad attach` as root
 * keeps it, and its info's, from before it hands the directory over to
 * the process's user (docs/tracing.md, "Who may attach to whom"). */
int open_trace_dir(const char *abs);
/* info made new in the directory dir, for appending: a descriptor, or -1
 * with errno (EEXIST: something is there already). */
int create_info(int dir);

/* How the processes of a trace that the tool waited for ended: a wait
 * status, or still running when the trace was installed. */
struct proc_end {
	pid_t pid;
	int status;
	bool running;
};

struct proc_ends {
	struct proc_end *v;
	size_t n, cap;
};

/* info's first lines: format=2, command= (argv shell-quoted), then extra
 * (lines with their newlines, or NULL), then state=recording and
 * recorder= (this process); written to tmp/info, or appended through the
 * descriptor info (left open). */
int write_info_head(const char *tmp, char *const *argv, const char *extra);
int write_info_head_fd(int info, char *const *argv, const char *extra);

/* The images' stats under tmp (or the directory dir); the first image,
 * <pid>.0, gives sites and enabled.  Only regular files are read, through
 * no link, and in a directory another user owns only that user's files.
 * An image without its totals is said, with its process's end as ends
 * knows it (NULL: not known), and counted from its files. */
void summarize(const char *tmp, pid_t pid, struct summary *sum, const struct proc_ends *ends);
void summarize_at(int dir, pid_t pid, struct summary *sum, const struct proc_ends *ends);

/* head (lines, or "") then sites=, enabled=, events=, dropped=, bytes=,
 * dropped_by= per cause and state=finished appended to tmp/info (not through a link), or through the descriptor
 * info (left open). */
void append_summary(const char *tmp, const char *head, const struct summary *sum);
void append_summary_fd(int info, const char *head, const struct summary *sum);

/* path and everything under it removed: a trace that will not be.  No
 * link is followed, even one put in place while it runs. */
void remove_tree(const char *path);

/* The one line both commands end with, on stderr. */
void print_summary(const struct summary *sum, const char *dir);

#define EXIT_USAGE 2

/* "ftpad: error: " fmt (one %s: arg), then the hint; returns EXIT_USAGE. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* glob (from option opt) appended to the comma-joined list; 0, or
 * EXIT_USAGE after the message. */
int add_glob(const char *command, char *list, size_t size, const char *opt,
	     const char *glob);

/* The options both commands take for the trace directory. */
struct dir_opts {
	const char *command;              /* "record" or "attach", for messages */
	char filter[4096], notrace[4096]; /* comma-joined -F, -N */
	const char *dir;                  /* -o, default ftpad.data */
	unsigned long long size_mb;       /* --size */
	unsigned long long depth;         /* --depth, 0: every depth */
	unsigned long long time_filter_ns; /* --time-filter, 0: every call */
	bool force;                       /* --force */
	unsigned long long ring_mb;       /* --ring, 0: no ring */
	char trigger[4096];               /* comma-joined --trigger */
};

/* getopt_long's c (with its optarg) if it is one of dir_opts': -F, -N,
 * -o, --size (as 's'), --force (as 'r'), --depth (as 'D'), --time-filter
 * (as 'T'), --ring (as 'R'), --trigger (as 'G').  0 taken, EXIT_USAGE
 * after the message, -1 not one of them.  opt: the option as written. */
int dir_option(int c, const char *opt, const char *arg, struct dir_opts *d);
/* The options together, once all are read: 0, or EXIT_USAGE after the
 * message. */
int dir_options_check(const struct dir_opts *d);

/* The ring's settings (FTPAD_RECORD_RING, FTPAD_RECORD_TRIGGER) as values:
 * ring (bytes, "" without --ring), of size bytes. */
void ring_setting(const struct dir_opts *d, char *ring, size_t size);

#endif
