/* SPDX-License-Identifier: MIT */
/*
 * record.c - `ftpad record`:
 *
 *   ftpad record [-F GLOB]... [-N GLOB]... [OPTIONS] [-o DIR] -- PROG [ARGS...]
 *
 * runs PROG with libftpad.so preloaded and its recorder switched on through
 * FTPAD_RECORD and its companions, so a program built with pads needs no
 * link against libftpad to be traced: the calls go into the trace
 * directory DIR, for the viewers (`ftpad replay`, `report`...) to read.
 * `ftpad record --text` runs the built-in text tracer instead (FTPAD_FILTER,
 * FTPAD_OUTPUT), and `ftpad record -p PID` is `ftpad attach PID` (attach.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "ftpad_record.h"
#include "tracedir.h"

/* ---- ftpad record --text: the built-in text tracer ---- */

struct text_opts {
	const char *filter;
	const char *output;
	char **argv; /* PROG and its arguments */
};

static const char usage_text[] =
	"usage: ftpad record [-F GLOB]... [-N GLOB]... [--depth N] [--time-filter DUR]\n"
	"                    [--early] [--size MB | --ring MB [--trigger GLOB]...]\n"
	"                    [--force] [-o DIR] -- PROG [ARGS...]\n"
	"       ftpad record --text [-f|--filter GLOBS] [-o|--output FILE] [--] PROG [ARGS...]\n"
	"       ftpad record -p PID ...   (ftpad attach: 'ftpad attach --help')\n"
	"\n"
	"record  run PROG with libftpad.so preloaded, recording calls to its padded\n"
	"        functions as binary events into DIR (default ftpad.data; an existing\n"
	"        trace only with --force, replaced as the recording starts), then\n"
	"        print one summary line.  -F/-N: record only/never functions matching\n"
	"        GLOB; --size MB: cap the events' bytes (16 an event, before\n"
	"        compression), of every process of the trace together (default:\n"
	"        while 10% of DIR's file system stays free; then dropped, counted\n"
	"        by cause);\n"
	"        --early: from before main.  --depth N: only frames up to depth N\n"
	"        of each thread; --time-filter DUR (500ns, 10us, 1ms): drop calls\n"
	"        shorter than DUR with no recorded call inside.  Functions without\n"
	"        exit sites (entries only) are kept by both.  A crash of PROG, or a\n"
	"        Ctrl-C or kill (not -9), keeps the trace up to it.  The processes\n"
	"        PROG leaves behind (daemons) are waited for; Ctrl-C stops waiting.\n"
	"        --ring MB: a flight recorder: keep only the newest MB of events, in\n"
	"        memory, written when PROG ends or crashes and on 'ftpad snapshot'\n"
	"        (DIR/snapshot-N); --trigger GLOB: a snapshot when a function\n"
	"        matching GLOB is entered (16 at most per process).\n"
	"record --text  run PROG with libftpad.so preloaded, tracing calls to its padded\n"
	"        functions: one line '<comm>-<tid> <function> <-<caller>' per call,\n"
	"        then 'ftpad: N sites found, M sites enabled, K calls seen' at exit.\n"
	"  -f, --filter GLOBS   comma-separated globs on function names (default: *)\n"
	"  -o, --output FILE    write the trace to FILE, truncated first (default: stderr)\n"
	"\n"
	"environment: FTPAD_LIB overrides the path of libftpad.so.\n";

/* What both forms of `record` do with -h and with an option getopt_long
 * rejected (c is '?' or ':'). */
static int other_option(int c, char **argv)
{
	if (c == 'h') {
		fputs(usage_text, stdout);
		exit(0);
	}
	if (c == ':')
		return usage_error("record: option '%s' needs an argument", argv[optind - 1]);
	return usage_error("record: unknown option '%s'", argv[optind - 1]);
}

/* PROG and its arguments, where the options end. */
static int take_prog(int argc, char **argv, char ***prog)
{
	if (optind >= argc)
		return usage_error("record: missing %s", "PROG: the program to run");
	*prog = &argv[optind];
	return 0;
}

static int parse_record_text(int argc, char **argv, struct text_opts *o)
{
	static const struct option longopts[] = {
		{ "filter", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	o->filter = "*";
	opterr = 0;
	optind = 1;
	/* '+': options end at PROG, so PROG's own options are left alone. */
	while ((c = getopt_long(argc, argv, "+:f:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			o->filter = optarg;
			if (!*optarg || strspn(optarg, ", \t") == strlen(optarg))
				return usage_error("record: option '%s' needs at least one glob",
						   argv[optind - 2]);
			break;
		case 'o':
			o->output = optarg;
			if (!*optarg)
				return usage_error("record: option '%s' needs a file name",
						   argv[optind - 2]);
			break;
		default:
			return other_option(c, argv);
		}
	}
	return take_prog(argc, argv, &o->argv);
}

/* FILE, truncated now and made absolute: PROG may change directory. */
static int prepare_output(const char *output, char *abs)
{
	int fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || !realpath(output, abs)) {
		fprintf(stderr, "ftpad: error: --output '%s': %s\n", output, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int set_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	char *value;
	int err;

	if (old && *old) {
		if (asprintf(&value, "%s:%s", lib, old) < 0)
			return -1;
	} else {
		value = strdup(lib);
		if (!value)
			return -1;
	}
	err = setenv("LD_PRELOAD", value, 1);
	free(value);
	return err;
}

static int record_text(int argc, char **argv)
{
	struct text_opts o = { 0 };
	char lib[PATH_MAX], out[PATH_MAX];
	int err = parse_record_text(argc, argv, &o);

	if (err)
		return err;
	if (find_library(lib, sizeof(lib)))
		return 1;
	if (o.output && prepare_output(o.output, out))
		return 1;
	if (setenv(FTPAD_ENV_FILTER, o.filter, 1) ||
	    (o.output ? setenv(FTPAD_ENV_OUTPUT, out, 1) : unsetenv(FTPAD_ENV_OUTPUT)) ||
	    set_preload(lib)) {
		fprintf(stderr, "ftpad: error: cannot set the environment: %s\n", strerror(errno));
		return 1;
	}
	execvp(o.argv[0], o.argv);
	fprintf(stderr, "ftpad: error: cannot run '%s': %s\n", o.argv[0], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* ---- ftpad record: the trace directory ---- */

struct record_opts {
	struct dir_opts d;
	bool early;
	char **argv;
};

static int parse_record(int argc, char **argv, struct record_opts *o)
{
	static const struct option longopts[] = {
		{ "depth", required_argument, NULL, 'D' },
		{ "time-filter", required_argument, NULL, 'T' },
		{ "early", no_argument, NULL, 'e' },
		{ "size", required_argument, NULL, 's' },
		{ "ring", required_argument, NULL, 'R' },
		{ "trigger", required_argument, NULL, 'G' },
		{ "force", no_argument, NULL, 'r' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, err;

	o->d.command = "record";
	o->d.dir = "ftpad.data";
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+:F:N:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'e':
			o->early = true;
			break;
		default:
			err = dir_option(c, argv[optind - 2], optarg, &o->d);
			if (err >= 0) {
				if (err)
					return err;
				break;
			}
			return other_option(c, argv);
		}
	}
	err = dir_options_check(&o->d);
	return err ? err : take_prog(argc, argv, &o->argv);
}

/*
 * While PROG runs, a signal that would end `ftpad record` must not cut the
 * trace short: the trace is only summed up, and marked finished, once PROG
 * has ended.  Ctrl-C and Ctrl-\ reach PROG from the terminal anyway (one
 * process group), so they are ignored here, as system() does; SIGTERM and
 * SIGHUP, which are sent to a pid, are passed on to PROG, whose recorder
 * then ends its trace before it dies of them (docs/runtime.md).
 */
static volatile sig_atomic_t recorded_pid, held_signal;

static void pass_on(int sig)
{
	if (recorded_pid > 0)
		kill(recorded_pid, sig);
	else
		held_signal = sig; /* before PROG's pid is known: sent then */
}

/* From before the fork, so that no signal finds ftpad unshielded while
 * PROG starts; old: SIGINT's and SIGQUIT's actions, which PROG gets back. */
static void shield_from_signals(struct sigaction old[2])
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, relay = { .sa_handler = pass_on };

	sigemptyset(&ign.sa_mask);
	sigfillset(&relay.sa_mask);
	relay.sa_flags = SA_RESTART;
	sigaction(SIGINT, &ign, &old[0]);
	sigaction(SIGQUIT, &ign, &old[1]);
	sigaction(SIGTERM, &relay, NULL);
	sigaction(SIGHUP, &relay, NULL);
}

/* ---- the processes of the trace ---- */

static void add_end(struct proc_ends *ends, pid_t pid, int status, bool running)
{
	if (ends->n == ends->cap) {
		size_t cap = ends->cap ? 2 * ends->cap : 16;
		struct proc_end *v = realloc(ends->v, cap * sizeof(*v));

		if (!v)
			return; /* its cause goes unnamed */
		ends->v = v, ends->cap = cap;
	}
	ends->v[ends->n++] = (struct proc_end){ pid, status, running };
}

/* Our children still running, as "PID (comm), ..." into out; how many.
 * With ends, each is noted there as running. */
static int list_children(char *out, size_t size, struct proc_ends *ends)
{
	DIR *proc = opendir("/proc");
	struct dirent *d;
	size_t len = 0;
	int n = 0;

	out[0] = 0;
	while (proc && (d = readdir(proc))) {
		char path[300], stat[512], *close;
		int ppid, pid = atoi(d->d_name);
		FILE *f;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		f = fopen(path, "r");
		if (!f)
			continue;
		close = fgets(stat, sizeof(stat), f) ? strrchr(stat, ')') : NULL;
		fclose(f);
		if (!close || sscanf(close + 1, " %*c %d", &ppid) != 1 || ppid != getpid())
			continue;
		*close = 0;
		if (len < size)
			len += snprintf(out + len, size - len, "%s%d (%s", n ? "), " : "", pid,
					strchr(stat, '(') + 1);
		if (ends)
			add_end(ends, pid, 0, true);
		n++;
	}
	if (proc)
		closedir(proc);
	if (n && len < size)
		snprintf(out + len, size - len, ")");
	return n;
}

static volatile sig_atomic_t stop_waiting;

static void on_stop_waiting(int sig)
{
	(void)sig;
	stop_waiting = 1;
}

/*
 * PROG has ended, but processes it started may still record: a daemon
 * (fork, setsid, fork), a child left behind.  ftpad record is their
 * subreaper (PR_SET_CHILD_SUBREAPER: orphans are reparented to it), so it
 * waits for every one, each reaped with its status, before the trace is
 * finished.  A daemon that never ends: Ctrl-C (or SIGTERM) stops the
 * wait, and those still running are noted in ends, for the summary.
 */
static void wait_for_the_rest(struct proc_ends *ends)
{
	struct sigaction stop = { .sa_handler = on_stop_waiting }; /* no SA_RESTART */
	char names[2048];
	int status, n;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		add_end(ends, pid, status, false);
	n = list_children(names, sizeof(names), NULL);
	if (!n)
		return;
	/* Before the message: a Ctrl-C that answers it must find it set. */
	sigemptyset(&stop.sa_mask);
	sigaction(SIGINT, &stop, NULL);
	sigaction(SIGTERM, &stop, NULL);
	fprintf(stderr, "ftpad: the program exited; waiting for %d more process%s of the trace: "
		"%s; Ctrl-C finishes the trace without %s\n", n, n > 1 ? "es" : "", names,
		n > 1 ? "them" : "it");
	while (!stop_waiting) {
		pid = waitpid(-1, &status, 0);
		if (pid > 0)
			add_end(ends, pid, status, false);
		else if (errno == ECHILD)
			return;
	}
	if (list_children(names, sizeof(names), ends))
		fprintf(stderr, "ftpad: finishing the trace while these still run: %s\n", names);
}

/* PROG run with the recorder on: its wait status, or -1; *pidp: its pid;
 * ends: how it and every process of the trace it left behind ended. */
static int run_recorded(struct record_opts *o, const char *lib, const char *tmp, pid_t *pidp,
			struct proc_ends *ends)
{
	char size[32], depth[32], time_filter[32], ring[32];
	struct sigaction old[2];
	pid_t pid;
	int status;

	snprintf(size, sizeof(size), "%llu", o->d.size_mb << 20);
	snprintf(depth, sizeof(depth), "%llu", o->d.depth);
	snprintf(time_filter, sizeof(time_filter), "%llu", o->d.time_filter_ns);
	ring_setting(&o->d, ring, sizeof(ring));
	if (setenv(FTPAD_ENV_RECORD, tmp, 1) || unsetenv(FTPAD_ENV_RECORD_IMAGE) ||
	    (*o->d.filter ? setenv(FTPAD_ENV_RECORD_FILTER, o->d.filter, 1)
			: unsetenv(FTPAD_ENV_RECORD_FILTER)) ||
	    (*o->d.notrace ? setenv(FTPAD_ENV_RECORD_NOTRACE, o->d.notrace, 1)
			 : unsetenv(FTPAD_ENV_RECORD_NOTRACE)) ||
	    (o->d.size_mb ? setenv(FTPAD_ENV_RECORD_SIZE, size, 1)
			  : unsetenv(FTPAD_ENV_RECORD_SIZE)) ||
	    (o->d.depth ? setenv(FTPAD_ENV_RECORD_DEPTH, depth, 1)
			: unsetenv(FTPAD_ENV_RECORD_DEPTH)) ||
	    (o->d.time_filter_ns ? setenv(FTPAD_ENV_RECORD_TIME_FILTER, time_filter, 1)
				 : unsetenv(FTPAD_ENV_RECORD_TIME_FILTER)) ||
	    (*ring ? setenv(FTPAD_ENV_RECORD_RING, ring, 1) : unsetenv(FTPAD_ENV_RECORD_RING)) ||
	    (*o->d.trigger ? setenv(FTPAD_ENV_RECORD_TRIGGER, o->d.trigger, 1)
			   : unsetenv(FTPAD_ENV_RECORD_TRIGGER)) ||
	    (o->early && setenv(FTPAD_ENV_EARLY, "1", 1)) || unsetenv(FTPAD_ENV_FILTER) ||
	    set_preload(lib)) {
		fprintf(stderr, "ftpad: error: cannot set the environment: %s\n", strerror(errno));
		return -1;
	}
	shield_from_signals(old);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		fprintf(stderr, "ftpad: warning: cannot wait for the processes the program leaves "
			"behind (PR_SET_CHILD_SUBREAPER: %s): their images may be cut short\n",
			strerror(errno));
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "ftpad: error: fork: %s\n", strerror(errno));
		return -1;
	}
	if (!pid) {
		/* Handlers go at exec; SIG_IGN would stay. */
		sigaction(SIGINT, &old[0], NULL);
		sigaction(SIGQUIT, &old[1], NULL);
		execvp(o->argv[0], o->argv);
		fprintf(stderr, "ftpad: error: cannot run '%s': %s\n", o->argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	recorded_pid = pid;
	if (held_signal)
		kill(pid, held_signal);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	*pidp = pid;
	add_end(ends, pid, status, false);
	wait_for_the_rest(ends);
	return status;
}

static int record_dir(int argc, char **argv)
{
	struct record_opts o = { 0 };
	struct summary sum = { 0 };
	struct proc_ends ends = { 0 };
	char lib[PATH_MAX], abs[PATH_MAX], head[32];
	int err = parse_record(argc, argv, &o), status, code;
	pid_t pid;

	if (err)
		return err;
	if (find_library(lib, sizeof(lib)) || create_trace_dir(o.d.dir, o.d.force, abs))
		return 1;
	if (write_info_head(abs, o.argv, NULL)) {
		fprintf(stderr, "ftpad: error: cannot write '%s/info': %s\n", abs, strerror(errno));
		return 1;
	}
	status = run_recorded(&o, lib, abs, &pid, &ends);
	if (status == -1)
		return 1;
	code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	summarize(abs, pid, &sum, &ends);
	free(ends.v);
	snprintf(head, sizeof(head), "exit=%d\n", code);
	append_summary(abs, head, &sum);
	print_summary(&sum, o.d.dir);
	if (!sum.sites && !sum.events)
		fprintf(stderr, "ftpad: warning: '%s' has no ftpad pads (0 sites): nothing could "
			"be traced; compile it with the ftpad plugin ('ftpad-config --cflags', or "
			"ftpad_instrument() in CMake)\n", o.argv[0]);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return code;
}

/* `record -p PID`: a -p/--pid among record's options (before "--"; an
 * option's own argument is skipped); argv[0] is "record". */
static bool names_pid(int argc, char **argv)
{
	static const char *const with_arg[] = { "-F", "-N", "-o", "--output", "--size", "--depth",
						"--time-filter", "--duration", "--library",
						"--ring", "--trigger" };

	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strncmp(argv[i], "-p", 2) || !strcmp(argv[i], "--pid") ||
		    !strncmp(argv[i], "--pid=", 6))
			return true;
		for (size_t k = 0; k < sizeof(with_arg) / sizeof(with_arg[0]); k++) {
			if (!strcmp(argv[i], with_arg[k])) {
				i++;
				break;
			}
		}
	}
	return false;
}

/* The table's `record`: argv[0] is "record"; --text first picks the
 * text tracer, -p PID anywhere among the options the attach. */
int cmd_record(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--text"))
		return record_text(argc - 1, argv + 1);
	if (names_pid(argc, argv))
		return cmd_attach(argc, argv);
	return record_dir(argc, argv);
}
