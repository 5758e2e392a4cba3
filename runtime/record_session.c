/* SPDX-License-Identifier: MIT */
/*
 * record_session.c - the recorder's traces (record.h tells the whole):
 * one started from the environment (`ftpad record`) or a session of
 * `ftpad attach` (attach.c); how a fork's child and an exec continue it;
 * its end, at exit, _exit, exec, a session's stop, or a signal that ends
 * the process.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "record.h"

static int started;         /* a trace is being recorded (or was, till exit) */
static pid_t recording_pid; /* the process whose trace it is (not a vfork child) */
static int ended;           /* atomic: the trace's end is written */
static struct ftpad_ops record_ops;
/* Session ends (stop, exit, fork) one at a time; a second one finds it
 * ended. */
static pthread_mutex_t end_lock = PTHREAD_MUTEX_INITIALIZER;

/* The image's end: its totals (its `enabled` counts the sites enabled
 * now, so a stop calls this before its sites go off); held: events still
 * in other threads' chunks, which will not be written. */
static void write_stats_held(const struct ftpad_stats *st, uint64_t held)
{
	struct ftpad_record_totals tot;
	char text[320];

	count_totals(&tot);
	tot.dropped += held + __atomic_load_n(&foreign_drops, __ATOMIC_RELAXED);
	tot.events -= held < tot.events ? held : tot.events;
	snprintf(text, sizeof(text),
		 "sites=%u\nenabled=%lu\nevents=%llu\ndropped=%llu\nbytes=%llu\nfast_events=%llu\n",
		 site_id_count(), st->enabled, (unsigned long long)tot.events,
		 (unsigned long long)tot.dropped, (unsigned long long)tot.bytes,
		 (unsigned long long)tot.fast);
	append_image(text);
	append_unwritten();
	append_drops(held, held ? ftpad_trace_clock() : 0);
	if (ring_chunks)
		ring_append_totals();
	clock_sync();
}

static void write_stats(const struct ftpad_stats *st)
{
	write_stats_held(st, 0);
}

/* No more events: wait for the threads that record outside the ops (a
 * signal's bracket, a thread's exit), which no unregistering waits for.
 * Bounded: a thread stopped there for a second loses its event. */
static void stop_events(void)
{
	__atomic_store_n(&stopping, 1, __ATOMIC_SEQ_CST);
	wake_writer();
	for (int i = 0; i < 1000 && __atomic_load_n(&outside_ops, __ATOMIC_SEQ_CST); i++)
		nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
}

/* The enabled= of an end from a signal handler, which must not count the
 * sites (ftpad_get_stats() takes the ops lock, which the thread it
 * interrupted may hold): the count once the trace began. */
static unsigned long enabled_at_start;
/* atomic: the thread in record_end(), and whether that end is done */
static pid_t ending_tid;
static int end_done;

/* The trace's end, as at exit.  wait: take end_lock even if that means
 * waiting; otherwise give up when another end holds it (it writes the
 * buffers itself).  in_handler: from a signal handler (end_by_signal()). */
static void record_end(bool wait, bool in_handler)
{
	struct ftpad_stats st = { .sz = sizeof(st) };

	if (wait)
		pthread_mutex_lock(&end_lock);
	else if (pthread_mutex_trylock(&end_lock))
		return;
	__atomic_store_n(&ending_tid, gettid(), __ATOMIC_RELAXED);
	if (started && !__atomic_exchange_n(&ended, 1, __ATOMIC_ACQ_REL)) {
		/* Threads still running stop adding events first, so that no
		 * chunk is written to while it is handed over (one already
		 * inside record_event() may still finish its event: a narrow
		 * window). */
		if (in_handler)
			st.enabled = enabled_at_start;
		else
			ftpad_get_stats(&st);
		stop_events();
		flush_all();
		write_stats(&st);
		__atomic_store_n(&end_done, 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&ending_tid, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&end_lock);
}

/*
 * A signal whose default action ends the process (a crash, abort(),
 * Ctrl-C, kill, a closed pipe) would take the buffered events with it,
 * the very ones that tell what happened.  While a program is recorded
 * from its start (not in an attach session: that process is not ours to
 * change), each of these that it leaves at the default action is caught
 * by end_by_signal(): the trace ends as at exit, then the default action
 * is back and the signal raised again, so the process ends by it as it
 * would have, core dump and exit status included.  A handler the program
 * installs replaces it, as it would the default (sighooks.c shows the
 * default to a query, and puts this one back for SIG_DFL).  SIGKILL cannot
 * be caught: an image so killed has no totals, which ftpad record says.
 */
static const int ending_signals[] = { SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGABRT, SIGBUS,
				      SIGFPE, SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM,
				      SIGTERM, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGSYS };

/* glibc's, as sighooks.c calls it: not the interposed sigaction. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

/* The event this thread was writing when a signal came, settled: in the
 * trace and counted, or neither and counted as dropped.  uc: the
 * signal's context. */
static void settle_open_event(struct rthread *t, const void *uc)
{
	struct chunk *c = t->cur;

	if (c && ftpad_arch_record_slot_open(uc)) {
		c->n--; /* the fast path's: reserved, maybe half written */
		count_drop(t, FTPAD_LOST_CUT);
	} else if (c && t->open) {
		bool in = c->n == t->open_index + 1, counted = t->events != t->events_at_open;

		if (counted && !in)
			t->events--;
		if (!in)
			count_drop(t, FTPAD_LOST_CUT);
		t->open = 0;
	}
}

static void end_by_signal(int sig, siginfo_t *info, void *uc)
{
	struct rthread *t = self;
	int saved = errno;

	(void)info;
	if (t)
		settle_open_event(t, uc);
	if (__atomic_load_n(&started, __ATOMIC_ACQUIRE) && getpid() == recording_pid) {
		record_end(false, true);
		/* Another thread's end (a crash on two threads, or exit()
		 * meeting a kill): let it finish, for at most two seconds. */
		for (int i = 0; i < 2000 && !__atomic_load_n(&end_done, __ATOMIC_ACQUIRE) &&
				__atomic_load_n(&ending_tid, __ATOMIC_RELAXED) != gettid() &&
				__atomic_load_n(&ended, __ATOMIC_ACQUIRE); i++)
			nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
	}
	/* SA_RESETHAND put the default action back, and every signal is
	 * blocked here: the process ends by sig as this returns. */
	raise(sig);
	errno = saved;
}

/* Its action: sa_mask (every signal) is filled in by catch_ending_signals(),
 * which then sets catching (atomic). */
static struct sigaction ending_action = {
	.sa_sigaction = end_by_signal,
	.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK | SA_RESTART,
};
static int catching;

static bool is_ending_signal(int sig)
{
	for (size_t i = 0; i < sizeof(ending_signals) / sizeof(ending_signals[0]); i++)
		if (ending_signals[i] == sig)
			return true;
	return false;
}

/* sighooks.c: the action that stands for SIG_DFL while the program is
 * recorded, or NULL. */
const struct sigaction *ftpad_record_default_action(int sig)
{
	if (!__atomic_load_n(&catching, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&started, __ATOMIC_ACQUIRE) || request || !is_ending_signal(sig))
		return NULL;
	return &ending_action;
}

bool ftpad_record_is_default_action(const struct sigaction *act)
{
	return (act->sa_flags & SA_SIGINFO) && act->sa_sigaction == end_by_signal;
}

static void catch_ending_signals(void)
{
	struct sigaction old;

	sigfillset(&ending_action.sa_mask);
	for (size_t i = 0; i < sizeof(ending_signals) / sizeof(ending_signals[0]); i++) {
		int sig = ending_signals[i];

		if (!__sigaction(sig, NULL, &old) && !(old.sa_flags & SA_SIGINFO) &&
		    old.sa_handler == SIG_DFL)
			__sigaction(sig, &ending_action, NULL);
	}
	__atomic_store_n(&catching, 1, __ATOMIC_RELEASE);
}

__attribute__((destructor(101))) static void record_stop(void)
{
	record_end(true, false);
}

/*
 * exechooks.c: _exit() and _Exit() skip the destructors, so the trace ends
 * here as at exit.  Not in a vfork child: it shares its parent's memory,
 * buffers and writer included, while the parent waits to go on recording
 * (no fork handler ran, so the pid tells).  And not when another end is
 * under way: a signal handler's _exit must not wait for a lock that the
 * thread it interrupted may hold.
 */
void ftpad_record_before_exit(void)
{
	if (__atomic_load_n(&started, __ATOMIC_ACQUIRE) && getpid() == recording_pid)
		record_end(false, false);
}

/*
 * attach.c: the end of a session.  The sites go off first (unregistering
 * waits until no callback runs any more); then every buffer is written,
 * the image ended as at exit, and the writer joined.  If the process's
 * exit (or a fork's child) ended the trace first, only the totals.
 */
void ftpad_record_session_stop(struct ftpad_record_totals *tot)
{
	struct ftpad_stats st = { .sz = sizeof(st) };

	pthread_mutex_lock(&end_lock);
	if (started && !__atomic_load_n(&ended, __ATOMIC_ACQUIRE)) {
		ftpad_get_stats(&st);
		ftpad_unregister_ops(&record_ops);
		stop_events();
		if (writer_running)
			pthread_join(writer, NULL);
		writer_running = 0;
		ring_stop(); /* the writer, which reads DIR/.ring, is gone */
		flush_all();
		write_stats(&st);
		__atomic_store_n(&ended, 1, __ATOMIC_RELEASE);
	}
	count_totals(tot);
	if (started)
		close_trace_files();
	started = 0;
	request = NULL;
	pthread_mutex_unlock(&end_lock);
}

/* --depth in a forked child: the forking thread's frames are still open. */
static void keep_depth(const struct rthread *forker)
{
	struct rthread *t;

	if (!max_depth || !forker || !(t = thread_start()))
		return;
	t->depth = forker->depth;
	memcpy(t->open_sp, forker->open_sp, max_depth * sizeof(t->open_sp[0]));
}

/*
 * The child of an attached process: no control thread came with it, so it
 * leaves the session at once.  Its sites go back to NOPs (in its own copy
 * of the text), it writes nothing (its parent's buffers are the parent's)
 * and it can be attached to on its own.  If the fork came from inside a
 * callback or while libftpad was patching, the sites cannot be written
 * here: they stay, calling a recorder that records nothing.
 */
static void leave_session_in_child(void)
{
	__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
	outside_ops = 0;
	ftpad_unregister_ops_timeout(&record_ops, 1000);
	full_head = NULL;
	for (struct rthread *t = threads; t; t = t->next)
		t->cur = NULL;
	pthread_mutex_init(&write_lock, NULL);
	pthread_mutex_init(&end_lock, NULL);
	reset_site_ids_lock();
	writer_running = 0;
	close_trace_files();
	started = 0;
	request = NULL;
}

static void after_fork_child(void)
{
	char parent[sizeof(image)];
	struct rthread *forker = self;

	if (!started || ended)
		return;
	if (request) {
		leave_session_in_child();
		return;
	}
	forget_parent_buffers();
	ring_forget();
	bytes_written = 0;
	pthread_mutex_init(&write_lock, NULL);
	threads = NULL;
	self = NULL;
	reset_site_ids_lock();
	snprintf(parent, sizeof(parent), "%s", image);
	recording_pid = getpid();
	snprintf(image, sizeof(image), "%d.0", getpid());
	if (make_image("forked_from=", parent)) {
		__atomic_store_n(&stopping, 1, __ATOMIC_RELEASE);
		return;
	}
	copy_sites(parent);
	clock_sync();
	start_writer();
	keep_depth(forker);
}

/* The image this process writes: after an exec of a recorded one, the next. */
static void name_image(const char **how, char *from, size_t size)
{
	const char *env = getenv(FTPAD_ENV_RECORD_IMAGE);
	int pid, n;

	*how = NULL;
	if (env && sscanf(env, "%d.%d", &pid, &n) == 2) {
		snprintf(from, size, "%s", env);
		if (pid == getpid()) {
			*how = "exec_from=";
			snprintf(image, sizeof(image), "%d.%d", pid, n + 1);
			return;
		}
		*how = "forked_from="; /* vfork, posix_spawn: no fork handler ran */
	}
	snprintf(image, sizeof(image), "%d.0", getpid());
}

/*
 * --early (FTPAD_EARLY): the calls early.c recorded before main, on this
 * thread, become its first events; those of other threads (rare before
 * main) and those the early buffer could not hold are counted as dropped.
 */
static void take_early(void)
{
	size_t n, dropped;
	const struct ftpad_early_entry *e;
	struct rthread *t;
	pid_t me = gettid();

	if (!ftpad_early_active())
		return;
	e = ftpad_early_stop(&n, &dropped);
	t = self ? self : thread_start();
	if (!t)
		return;
	count_drops(t, FTPAD_LOST_EARLY, dropped, ftpad_trace_clock());
	for (size_t i = 0; i < n; i++) {
		const struct ftpad_site *s = e[i].exit_site ? e[i].exit_site
							    : ftpad_site_by_entry(e[i].ip);
		int64_t id = e[i].tid == me ? id_of(s) : -1;
		unsigned kind = !e[i].exit_site ? FTPAD_EVENT_ENTRY
				: ftpad_site_kind(s) == FTPAD_SITE_KIND_TAIL_EXIT ? FTPAD_EVENT_TAIL_EXIT
										   : FTPAD_EVENT_EXIT;

		if (id < 0) {
			count_drop(t, FTPAD_LOST_EARLY);
			continue;
		}
		if ((!t->cur || t->cur->n >= chunk_events - 1) && !make_room(t)) {
			count_drop(t, t->refused);
			continue;
		}
		write_event(t, t->cur, (struct ftpad_event){ e[i].time,
			ftpad_event_what(kind, (uint32_t)id), e[i].sp });
	}
}

static void record_stop(void);

/* Once per process, at its first start: what every session shares. */
static int setup_once(void)
{
	static bool done;

	if (done)
		return 0;
	if (pthread_key_create(&thread_key, end_thread))
		return -EAGAIN;
	pthread_atfork(NULL, NULL, after_fork_child);
	atexit(record_stop);
	done = true;
	return 0;
}

static void write_info_head(void)
{
	create_info();
	append_file("info",
#if defined(__x86_64__)
		    "arch=x86_64\nclock=tsc\n"
#else
		    "arch=aarch64\nclock=cntvct\n"
#endif
	);
}

/* What ftpad_record_fast_ops is while no clone child shares a thread's
 * self. */
static struct ftpad_ops *fast_ops;

/*
 * exechooks.c: a clone(CLONE_VM) without CLONE_SETTLS comes: the child
 * runs with this thread's TLS, its self included.  This thread gets its
 * record first, so that the child finds one that is not its own; the
 * fast path, which cannot check whose thread it runs on, is off until
 * the child is known to be gone (a vfork-like clone's parent resumes;
 * other children are not followed, so the C path stays on).
 */
bool ftpad_record_before_clone(void)
{
	if (!ftpad_record_active())
		return false;
	if (!self)
		thread_start();
	__atomic_add_fetch(&foreign_clones, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&ftpad_record_fast_ops, NULL, __ATOMIC_SEQ_CST);
	return true;
}

/* The child that ftpad_record_before_clone() counted is gone. */
void ftpad_record_after_vfork_clone(void)
{
	if (!__atomic_sub_fetch(&foreign_clones, 1, __ATOMIC_SEQ_CST))
		__atomic_store_n(&ftpad_record_fast_ops, fast_ops, __ATOMIC_SEQ_CST);
}

static int register_record_ops(bool exits)
{
	const char *filter = setting(FTPAD_ENV_RECORD_FILTER);
	const char *notrace = setting(FTPAD_ENV_RECORD_NOTRACE);
	int err = 0;

	record_ops.func = record_entry;
	/* Entries only: with no exit callback, no exit site is patched. */
	record_ops.exit_func = exits ? record_exit : NULL;
	/* No FTPAD_OPS_FL_RECURSION: busy keeps record_event() from
	 * recursing, and the guard would silently drop the events of a
	 * signal handler that came during a callback. */
	record_ops.flags = 0;
	fast_ops = max_depth || min_ticks ? NULL : &record_ops;
	ftpad_record_fast_ops = __atomic_load_n(&foreign_clones, __ATOMIC_RELAXED) ? NULL : fast_ops;
	/* Reset, as a session's may follow another's; no glob: every site. */
	err = ftpad_set_filter(&record_ops, filter ? filter : "", 1);
	if (!err)
		err = ftpad_set_notrace(&record_ops, notrace ? notrace : "", 1);
	if (!err)
		err = ftpad_register_ops(&record_ops);
	if (err)
		ftpad_warn("ftpad: error: cannot start recording into '%s': %s\n", dir,
			   ftpad_strerror(err));
	return err;
}

/*
 * Start a trace into trace_dir, image already named (how/from: how it
 * continues another one); the settings come from setting().  0, or a
 * negative errno, said through ftpad_warn() too; registering failed
 * leaves the trace started, with nothing patched.
 */
static int begin(const char *trace_dir, const char *how, const char *from, bool exits)
{
	int err;

	if (strlen(trace_dir) >= sizeof(dir) - 64) {
		ftpad_warn("ftpad: error: FTPAD_RECORD is too long; not recording\n");
		return -ENAMETOOLONG;
	}
	strcpy(dir, trace_dir);
	open_trace_dir();
	bad_setting = false;
	set_filters();
	err = setup_once();
	if (!err && !set_pool())
		err = -ENOMEM;
	if (!err)
		setup_encoder();
	if (!err && bad_setting && request)
		err = -EINVAL;
	if (!err && !reset_threads())
		err = -ENOMEM;
	/* Its own site ids and byte count: a new trace directory. */
	forget_site_ids();
	bytes_written = 0;
	if (!err && make_image(how, from))
		err = errno ? -errno : -EIO;
	if (err)
		return err;
	map_budget(!how);
	check_free_space(); /* from the first event on; then the writer's */
	if (ring_chunks)
		ring_start(!how);
	if (!how)
		write_info_head();
	if (!how && ring_chunks) { /* a reader then finds threads that start mid-stack */
		char line[48];

		snprintf(line, sizeof(line), "ring=%zu\n",
			 ring_chunks * chunk_events * sizeof(struct ftpad_event));
		append_file("info", line);
	}
	clock_sync();
	recording_pid = getpid();
	__atomic_store_n(&stopping, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ended, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
	exits_recorded = exits;
	publish_modules();
	err = register_record_ops(exits);
	if (!err && (err = ring_register_trigger()))
		ftpad_unregister_ops(&record_ops);
	if (err)
		return err;
	register_modules();
	if (!request) {
		struct ftpad_stats st = { .sz = sizeof(st) };

		if (!ftpad_get_stats(&st))
			enabled_at_start = st.enabled;
		catch_ending_signals();
	}
	take_early();
	/* After the first patching: a thread being created has every signal
	 * blocked for a moment, and a site patched through int3 would then be
	 * refused. */
	start_writer();
	return 0;
}

/* From the start-up: `ftpad record`'s trace, if FTPAD_RECORD names one. */
void ftpad_record_start(void)
{
	const char *env = getenv(FTPAD_ENV_RECORD), *how;
	char from[64];

	if (!env || !*env || started)
		return;
	name_image(&how, from, sizeof(from));
	begin(env, how, from, true);
}

/*
 * attach.c: a session of `ftpad attach`, whose request (kept by the caller
 * until the stop) gives the settings.  -EBUSY when a trace is being
 * recorded.  On an error nothing stays patched nor started.
 */
int ftpad_record_session_start(const char *req, unsigned *sites, unsigned long *enabled)
{
	struct ftpad_stats st = { .sz = sizeof(st) };
	const char *exits;
	int err = -EBUSY;

	pthread_mutex_lock(&end_lock);
	if (started)
		goto out;
	request = req;
	exits = setting(FTPAD_ENV_RECORD_EXITS);
	snprintf(image, sizeof(image), "%d.0", getpid());
	err = begin(setting(FTPAD_ENV_RECORD), NULL, NULL, !exits || strcmp(exits, "0"));
	if (err) {
		__atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
		close_trace_files();
		__atomic_store_n(&started, 0, __ATOMIC_RELEASE);
		request = NULL;
		goto out;
	}
	ftpad_get_stats(&st);
	*sites = site_id_count();
	*enabled = st.enabled;
out:
	pthread_mutex_unlock(&end_lock);
	return err;
}

/* Whether a trace is being recorded: `ftpad record`'s, or a session. */
bool ftpad_record_busy(void)
{
	return __atomic_load_n(&started, __ATOMIC_ACQUIRE);
}

/* The events other threads hold in their current chunks: an exec that
 * succeeds ends them unwritten. */
static uint64_t held_by_others(const struct rthread *me)
{
	uint64_t n = 0;

	for (struct rthread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
		const struct chunk *c = __atomic_load_n(&t->cur, __ATOMIC_RELAXED);

		if (t != me && c)
			n += __atomic_load_n(&c->n, __ATOMIC_RELAXED);
	}
	return n;
}

/*
 * exechooks.c: the image ends here as at exit, totals included, and the
 * next program continues the trace into the next image.  Should the exec
 * fail, the image goes on and its end appends later totals (the last
 * ones count: docs/format.md).
 *
 * Only this thread's chunk is handed over, with the full ones: the other
 * threads still write into theirs, and a chunk taken from under them
 * would lose their next events or, once reused, mix them into another
 * thread's file.  Should the exec succeed, what they hold dies with them:
 * the totals count it as dropped.  Not in a vfork child: it shares its
 * parent's memory, buffers and descriptor numbers included, but not its
 * descriptor table (no fork handler ran, so the pid tells).
 */
void ftpad_record_before_exec(void)
{
	struct ftpad_stats st = { .sz = sizeof(st) };
	struct rthread *me = self;

	if (!__atomic_load_n(&started, __ATOMIC_ACQUIRE) || getpid() != recording_pid)
		return;
	pthread_mutex_lock(&end_lock);
	if (started && !ended) {
		uint64_t held;

		flush_thread(me);
		ftpad_get_stats(&st);
		held = held_by_others(me);
		write_stats_held(&st, held);
	}
	pthread_mutex_unlock(&end_lock);
}

bool ftpad_record_active(void)
{
	return __atomic_load_n(&started, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&stopping, __ATOMIC_RELAXED);
}

/* sighooks.c: a handler starts or returns; sp: the wrapper's frame, below
 * the interrupted one and above the handler's calls. */
void ftpad_record_signal(unsigned kind, int sig, uintptr_t sp)
{
	/* Counted, so that a stop waits for the event (stop_events()). */
	__atomic_add_fetch(&outside_ops, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&started, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&stopping, __ATOMIC_SEQ_CST))
		record_event(kind, (uint32_t)sig, (uint32_t)sp, false);
	__atomic_sub_fetch(&outside_ops, 1, __ATOMIC_RELEASE);
}
