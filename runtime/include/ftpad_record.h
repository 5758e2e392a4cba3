/* SPDX-License-Identifier: MIT */
/*
 * ftpad_record.h - the contract between libftpad and the ftpad command
 * (cli/), stated once: the environment `ftpad record` sets for PROG, the
 * request `ftpad attach` hands ftpad_attach_start(), and the lines the
 * two exchange over the attach socket.  Both sides spell these names and
 * lines from here only.  docs/runtime.md describes the settings for
 * users; docs/design.md, "Attaching to a running process", the session.
 *
 * Not installed: the command and the library ship together, and a
 * program that sets these variables itself writes them as text.
 */
#ifndef FTPAD_RECORD_H
#define FTPAD_RECORD_H

/* ---- The recorder's settings (runtime/record_*.c) ----
 * Environment variables under `ftpad record`; the same NAME=VALUE, as
 * entries of the request, under `ftpad attach`. */

/* The trace directory to record into; its presence turns the recorder
 * on.  Absolute in a request: the process's directory is not the tool's. */
#define FTPAD_ENV_RECORD "FTPAD_RECORD"
/* Comma-joined globs: record only the functions matching one (-F). */
#define FTPAD_ENV_RECORD_FILTER "FTPAD_RECORD_FILTER"
/* Comma-joined globs: never record the functions matching one (-N). */
#define FTPAD_ENV_RECORD_NOTRACE "FTPAD_RECORD_NOTRACE"
/* Cap on the events' bytes, of every process of the trace (--size, in bytes). */
#define FTPAD_ENV_RECORD_SIZE "FTPAD_RECORD_SIZE"
/* Without FTPAD_RECORD_SIZE: events are kept while this percentage of the
 * trace's file system stays free (default 10). */
#define FTPAD_ENV_RECORD_MIN_FREE "FTPAD_RECORD_MIN_FREE"
/* Only frames up to this depth of each thread (--depth). */
#define FTPAD_ENV_RECORD_DEPTH "FTPAD_RECORD_DEPTH"
/* Drop calls shorter than this many ns with no recorded call inside (--time-filter). */
#define FTPAD_ENV_RECORD_TIME_FILTER "FTPAD_RECORD_TIME_FILTER"
/* Events per chunk (4096), and chunks in the pool (256): tuning. */
#define FTPAD_ENV_RECORD_CHUNK "FTPAD_RECORD_CHUNK"
#define FTPAD_ENV_RECORD_CHUNKS "FTPAD_RECORD_CHUNKS"
/* "1": exits too, "0": entries only.  A request's only (`ftpad record`
 * always records exits; `ftpad attach` only with --graph). */
#define FTPAD_ENV_RECORD_EXITS "FTPAD_RECORD_EXITS"
/* PID.N, the image a process records as: set by the recorder, so that
 * an exec continues the trace as the next image; `ftpad record` clears
 * it, for PROG starts a new trace. */
#define FTPAD_ENV_RECORD_IMAGE "FTPAD_RECORD_IMAGE"

/* ---- The text tracer (runtime/tracer.c) and the early start (early.c) ---- */

/* Comma-joined globs: the built-in text tracer's functions (record --text -f). */
#define FTPAD_ENV_FILTER "FTPAD_FILTER"
/* The file the text tracer writes to; stderr without it (record --text -o). */
#define FTPAD_ENV_OUTPUT "FTPAD_OUTPUT"
/* Not "0": trace from before main, before the runtime is up (record --early). */
#define FTPAD_ENV_EARLY "FTPAD_EARLY"

/* ---- ftpad attach (runtime/attach.c; cli/attach*.c) ---- */

/* What the loader stub calls in the process, with the request:
 * int ftpad_attach_start(const char *request); 0, or -errno. */
#define FTPAD_ATTACH_ENTRY "ftpad_attach_start"

/*
 * The request: NAME=VALUE entries, each ended by a NUL, then an empty one
 * (a second NUL).  Only the recorder's settings above (less
 * FTPAD_RECORD_IMAGE) and FTPAD_ATTACH_SOCKET may appear, each once;
 * FTPAD_RECORD (absolute) and FTPAD_ATTACH_SOCKET must.  A longer
 * request is refused.
 */
#define FTPAD_ATTACH_REQUEST_MAX (64 * 1024)
/* The abstract Unix socket (its name, without the leading NUL) that the
 * library's control thread connects to, and the session then runs on. */
#define FTPAD_ENV_ATTACH_SOCKET "FTPAD_ATTACH_SOCKET"

/*
 * The session's lines, each ended by '\n'.  The control thread writes
 * ..._FMT with printf; the command reads the same line with ..._SCAN.
 * Keep each pair in step.
 */
/* The recording runs: SITES sites, ENABLED of them patched. */
#define FTPAD_ATTACH_STARTED_FMT "started sites=%u enabled=%lu\n"
#define FTPAD_ATTACH_STARTED_SCAN "started sites=%llu enabled=%llu"
/* It could not start: ERRNO, then a message to the end of the line. */
#define FTPAD_ATTACH_ERROR_FMT "error %d %s\n"
#define FTPAD_ATTACH_ERROR_SCAN "error %d %n"
/* From the command: end the session (as the socket's end of file does). */
#define FTPAD_ATTACH_STOP "stop"
/* The recording ended: its events kept, dropped, and their bytes. */
#define FTPAD_ATTACH_STOPPED_FMT "stopped events=%llu dropped=%llu bytes=%llu\n"
#define FTPAD_ATTACH_STOPPED_SCAN "stopped events=%llu dropped=%llu bytes=%llu"

/* ---- ftpad patch (runtime/livepatch.c through attach.c; cli/patch.c) ----
 * A patch request is an attach request with FTPAD_PATCH_OP instead of
 * the recorder's settings: FTPAD_ATTACH_SOCKET, FTPAD_PATCH_OP, and for
 * apply and revert FTPAD_PATCH_FILE (absolute) and FTPAD_PATCH_CHECK. */
#define FTPAD_ENV_PATCH_OP "FTPAD_PATCH_OP"       /* apply, revert or list */
#define FTPAD_ENV_PATCH_FILE "FTPAD_PATCH_FILE"   /* the patch's path */
/* "1": the control thread names the code no thread may run when the
 * patch switches, then waits for the tool's go; "0": it switches at once. */
#define FTPAD_ENV_PATCH_CHECK "FTPAD_PATCH_CHECK"

/* With the check: one line per range of code, then "ready TID" (the
 * control thread, which the tool leaves running), answered by "go" (every
 * other thread stopped, none in a range) or "abort". */
#define FTPAD_PATCH_RANGE_FMT "range %lx %lx %s\n"
#define FTPAD_PATCH_RANGE_SCAN "range %llx %llx %n"
#define FTPAD_PATCH_READY_FMT "ready %d\n"
#define FTPAD_PATCH_READY_SCAN "ready %d"
#define FTPAD_PATCH_GO "go"
/* After a go: the switch is over (done or not), the threads may run. */
#define FTPAD_PATCH_SWITCHED "switched"
#define FTPAD_PATCH_ABORT "abort"
/* list: one line per applied patch, newest first. */
#define FTPAD_PATCH_APPLIED_FMT "patch %s"
/* The end: switched (or listed), or FTPAD_ATTACH_ERROR_FMT. */
#define FTPAD_PATCH_DONE "done"

#endif
