/* SPDX-License-Identifier: MIT */
/*
 * ftpad attach: getting in (attach.h; docs/design.md, "Attaching to a
 * running process").  Every thread is seized and stopped; one at a safe
 * point gets the block below its red zone and is pointed at the loader
 * stub, written into slack bytes of a text mapping; then all go at once.
 * The stub restores the thread by itself, so from the one PTRACE_SETREGS
 * on, nothing depends on this tool staying alive.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

#include "attach.h"
#include "ftpad_record.h"

#define STACK_ROOM	(32 << 10) /* below the block, for dlopen's frames */
/* A program that spends most of its time in libc is often seen outside a
 * safe point: objdump printing missed 5 looks in a row within 9 attaches.
 * 50 looks, a few ms apart, make that vanishingly rare; a program that is
 * never at one is refused after about 0.2 s. */
#define SAFE_POINT_TRIES 50
/* sched_yield()s the stub waits for our ack at most: a few seconds. */
#define STUB_WAIT_ROUNDS 3000000

_Static_assert(AB_FIXED_SIZE % 64 == 0, "the strings follow the fixed part");

/* ---- the threads: seized, stopped, let go ---- */

static struct thread *find_thread(struct target *t, pid_t tid)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].tid == tid)
			return &t->threads[i];
	return NULL;
}

/* Its stop after our PTRACE_INTERRUPT: 0, or -1 when the thread is gone.
 * Polled, not waited for: a thread of a process killed meanwhile may
 * never report to us (a dead group leader is reported only once its other
 * threads are reaped), and a wait for it would never end; a thread that
 * is a zombie or gone ends the wait. */
static int wait_stop(struct thread *th)
{
	int status;

	for (;;) {
		pid_t r = waitpid(th->tid, &status, __WALL | WNOHANG);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (!r) {
			if (!attach_alive(th->tid))
				return -1;
			usleep(50);
			continue;
		}
		if (!WIFSTOPPED(status))
			return -1;
		th->stopped = true;
		if (status >> 16 == PTRACE_EVENT_STOP) {
			/* SIGTRAP: our interrupt; a stop signal: a group stop,
			 * which is left as it is. */
			th->usable = WSTOPSIG(status) == SIGTRAP;
		} else if (status >> 16 == 0) {
			th->signal = WSTOPSIG(status); /* delivered at detach */
		}
		return 0;
	}
}

static int seize_new_threads(struct target *t, bool *any)
{
	char path[64];
	struct dirent *d;
	DIR *dir;

	*any = false;
	snprintf(path, sizeof(path), "/proc/%d/task", t->pid);
	dir = opendir(path);
	if (!dir)
		return attach_gone(t->pid);
	while ((d = readdir(dir))) {
		pid_t tid = atoi(d->d_name);
		struct thread *th, *more;

		if (tid <= 0 || find_thread(t, tid))
			continue;
		if (ptrace(PTRACE_SEIZE, tid, NULL, NULL)) {
			int err = errno;

			/* Gone meanwhile, or exiting (EPERM for a thread
			 * that is exiting, whatever our rights). */
			if (err == ESRCH || (err == EPERM && !attach_alive(tid)))
				continue;
			closedir(dir);
			if (err == EPERM)
				return attach_permission_error(t->pid, t->uid);
			return attach_fail(t->pid, "PTRACE_SEIZE of thread %d: %s", tid, strerror(err));
		}
		more = realloc(t->threads, (t->nthreads + 1) * sizeof(*more));
		if (!more) {
			ptrace(PTRACE_DETACH, tid, NULL, NULL);
			closedir(dir);
			return attach_fail(t->pid, "out of memory");
		}
		t->threads = more;
		th = &t->threads[t->nthreads++];
		memset(th, 0, sizeof(*th));
		th->tid = tid;
		*any = true;
		if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) || wait_stop(th))
			th->stopped = false; /* exited: nothing to detach */
	}
	closedir(dir);
	return 0;
}

static void detach_all(struct target *t)
{
	for (size_t i = 0; i < t->nthreads; i++)
		if (t->threads[i].stopped)
			ptrace(PTRACE_DETACH, t->threads[i].tid, NULL,
			       (void *)(long)t->threads[i].signal);
	free(t->threads);
	t->threads = NULL;
	t->nthreads = 0;
}

/* Every thread stopped: threads created meanwhile are seized too, until
 * no new one shows up (a stopped thread creates none). */
static int stop_all(struct target *t)
{
	bool any = true;
	int err;

	while (any) {
		err = seize_new_threads(t, &any);
		if (err)
			return err;
	}
	for (size_t i = 0; i < t->nthreads; i++) {
		struct thread *th = &t->threads[i];

		if (th->stopped && attach_get_regs(th->tid, &th->regs))
			th->usable = false;
		any |= th->stopped;
	}
	return any ? 0 : attach_gone(t->pid);
}

/* libc, the dynamic loader, libftpad, the vdso: code that may hold a lock
 * the stub's dlopen takes. */
static bool in_runtime(const struct target *t, uint64_t pc)
{
	const struct mapping *m = attach_mapping_at(t, pc);
	const char *base;

	if (!m || m->path[0] != '/')
		return true;
	base = strrchr(m->path, '/') + 1;
	return !strncmp(base, "libc.so", 7) || !strncmp(base, "libc-", 5) ||
	       !strncmp(base, "ld-linux", 8) || !strncmp(base, "ld-", 3) ||
	       !strncmp(base, "libpthread", 10) || !strncmp(base, "libdl", 5) ||
	       !strcmp(base, t->lib[0] ? strrchr(t->lib, '/') + 1 : "libftpad.so") ||
	       !strncmp(base, "libftpad", 8);
}

/* Lower is better: 0 in the program's own code, 1 blocked in a call other
 * than futex, 2 the same but restarting through restart_syscall; -1: not
 * at a safe point. */
static int safe_rank(const struct target *t, const struct thread *th)
{
	long nr = attach_syscall(&th->regs);

	if (!th->stopped || !th->usable || th->signal || !attach_can_restore(&th->regs))
		return -1;
	if (attach_pc(&th->regs) >= t->slack_start && attach_pc(&th->regs) < t->slack_end)
		return -1; /* in the stub of an earlier attach, killed */
	if (nr >= 0 && attach_restart_block(&th->regs))
		return nr == attach_futex_syscall ? -1 : 2;
	if (!in_runtime(t, attach_pc(&th->regs)))
		return 0;
	if (nr >= 0 && nr != attach_futex_syscall)
		return 1;
	return -1;
}

/* Where the block goes on th's stack: below the red zone, 64-byte aligned,
 * inside the stack's mapping with room for the stub's calls below. */
static uint64_t block_address(const struct target *t, const struct thread *th, size_t size)
{
	uint64_t sp = attach_sp(&th->regs), block = (sp - attach_red_zone - size) & ~63ull;
	const struct mapping *m = attach_mapping_at(t, sp - 1);
	bool grows = m && !strcmp(m->path, "[stack]");

	if (!m || block < m->start || block > sp || (!grows && block - m->start < STACK_ROOM))
		return 0;
	return block;
}

static struct thread *choose_thread(struct target *t, size_t size)
{
	struct thread *best = NULL;
	int best_rank = 3;

	for (size_t i = 0; i < t->nthreads; i++) {
		int rank = safe_rank(t, &t->threads[i]);

		if (rank >= 0 && rank < best_rank && block_address(t, &t->threads[i], size)) {
			best = &t->threads[i];
			best_rank = rank;
		}
	}
	return best;
}

/* ---- the block, the stub ---- */

struct block_image {
	unsigned char *data;
	size_t size, path, symbol, request, xstate; /* offsets in data */
};

static int build_block(struct target *t, const char *request, size_t request_len,
		       struct block_image *b)
{
	static const char symbol[] = FTPAD_ATTACH_ENTRY;
	size_t xmax = attach_xstate_max();

	b->path = AB_FIXED_SIZE;
	b->symbol = b->path + strlen(t->lib) + 1;
	b->request = b->symbol + sizeof(symbol);
	b->xstate = (b->request + request_len + 63) & ~(size_t)63;
	b->size = b->xstate + xmax;
	b->data = calloc(1, b->size);
	if (!b->data)
		return -1;
	memcpy(b->data + b->path, t->lib, strlen(t->lib) + 1);
	memcpy(b->data + b->symbol, symbol, sizeof(symbol));
	memcpy(b->data + b->request, request, request_len);
	return 0;
}

static void put64(struct block_image *b, size_t off, uint64_t v)
{
	memcpy(b->data + off, &v, sizeof(v));
}

/* The block filled for thread th at address block: its state, the
 * addresses, the waits.  Returns the pc the stub goes back to, or 0. */
static uint64_t fill_block(struct target *t, struct thread *th, struct block_image *b,
			   uint64_t block)
{
	uint64_t regs[AB_REGS_SIZE / 8], features, pc;
	ssize_t xlen = attach_get_xstate(th->tid, b->data + b->xstate, attach_xstate_max(),
					 &features);

	if (xlen < 0)
		return 0;
	b->size = b->xstate + (size_t)xlen;
	pc = attach_saved_regs(&th->regs, regs, b->data + b->xstate);
	memcpy(b->data + AB_REGS, regs, sizeof(regs));
	put64(b, AB_DLOPEN, t->dlopen);
	put64(b, AB_DLSYM, t->dlsym);
	put64(b, AB_DLERROR, t->dlerror);
	put64(b, AB_START, t->start);
	put64(b, AB_PATH, block + b->path);
	put64(b, AB_SYMBOL, block + b->symbol);
	put64(b, AB_REQUEST, block + b->request);
	put64(b, AB_XSTATE, block + b->xstate);
	put64(b, AB_XFEATURES, features);
	put64(b, AB_WAIT_ROUNDS, STUB_WAIT_ROUNDS);
	return pc;
}

static int write_stub(struct target *t, uint64_t pc)
{
	unsigned char stub[sizeof(t->saved)];
	size_t n = attach_stub_size();

	if (n > sizeof(stub))
		return -1;
	memcpy(stub, ftpad_attach_stub, n);
	memcpy(stub + (ftpad_attach_stub_slot - ftpad_attach_stub), &pc, sizeof(pc));
	if (attach_mem_write(t, t->slack, stub, n)) {
		attach_mem_write(t, t->slack, t->saved, n); /* a partial write */
		return -1;
	}
	t->stub_written = true;
	return 0;
}

static bool is_stub(const unsigned char *bytes)
{
	size_t slot = (size_t)(ftpad_attach_stub_slot - ftpad_attach_stub), n = attach_stub_size();

	return !memcmp(bytes, ftpad_attach_stub, slot) &&
	       !memcmp(bytes + slot + 8, ftpad_attach_stub + slot + 8, n - slot - 8);
}

/* A tool killed with its guardian leaves its stub in the slack bytes, and
 * its thread may still be in it: ours goes after it, never over it. */
static int skip_stale_stubs(struct target *t)
{
	unsigned char bytes[sizeof(t->saved)];
	size_t n = attach_stub_size();

	while (!attach_mem_read(t, t->slack, bytes, n) && is_stub(bytes)) {
		t->slack += (n + 15) & ~(size_t)15;
		if (t->slack + n > t->slack_end)
			return attach_fail(t->pid, "the slack bytes at %#llx are filled with the "
					   "loader stubs of earlier attaches that were killed",
					   (unsigned long long)t->slack_start);
	}
	return 0;
}

uint64_t attach_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int attach_poll_stub(struct target *t, int64_t *result, char *errtext)
{
	uint64_t done = 0, ack = 1;

	if (attach_mem_read(t, t->block + AB_DONE, &done, sizeof(done)))
		return -1;
	if (done != 1)
		return 0;
	if (attach_mem_read(t, t->block + AB_RESULT, result, sizeof(*result)) ||
	    attach_mem_read(t, t->block + AB_ERRTEXT, errtext, AB_ERRTEXT_SIZE) ||
	    attach_mem_write(t, t->block + AB_ACK, &ack, sizeof(ack)))
		return -1;
	errtext[AB_ERRTEXT_SIZE - 1] = 0;
	return 1;
}

/* The guardian, when the tool dies (end of file) with the stub in the
 * slack: what the tool would have done.  The tool said 'S' just before
 * its PTRACE_SETREGS and 'D' just after it, 'R' once done with the stub.
 * Before 'S' no thread can run the stub: the bytes go back at once.
 * After 'D' the stub runs to its done mark: the thread is waited out of
 * it as the tool would.  Between them (the SETREGS call itself), a done
 * mark within a few seconds says it took; else, the thread not in the
 * stub, it did not.  Not done after 'D' in time: the thread may still
 * need the stub, left as is. */
static _Noreturn void guardian_main(struct target *t, int fd)
{
	char c = 0, errtext[AB_ERRTEXT_SIZE], said = 0;
	int64_t result;
	uint64_t deadline;
	int r = 0;
	ssize_t n;

	setsid(); /* not killed with the tool's process group by a Ctrl-C */
	for (int i = 0; i < 1024; i++)
		if (i != fd && i != t->mem)
			close(i);
	while ((n = read(fd, &c, 1)) == 1 || (n < 0 && errno == EINTR)) {
		if (n == 1 && c == 'R')
			_exit(0);
		if (n == 1)
			said = c;
	}
	t->stub_written = true; /* maybe: the saved bytes are right either way */
	if (!said) {
		attach_restore_slack(t);
		_exit(0);
	}
	deadline = attach_now_ms() + (said == 'D' ? ATTACH_LOAD_TIMEOUT_MS : 3000);
	while (attach_now_ms() < deadline && !(r = attach_poll_stub(t, &result, errtext)))
		usleep(1000);
	if ((r > 0 || (said == 'S' && !r)) && attach_left_stub(t))
		attach_restore_slack(t);
	_exit(0);
}

static void tell_guardian(struct target *t, char what)
{
	if (t->guardian > 0 && write(t->guardian_fd, &what, 1) != 1)
		t->guardian = -t->guardian; /* it is gone */
}

static void start_guardian(struct target *t)
{
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return;
	pid = fork();
	if (!pid)
		guardian_main(t, fds[0]);
	close(fds[0]);
	if (pid < 0) {
		close(fds[1]);
		return;
	}
	t->guardian = pid;
	t->guardian_fd = fds[1];
}

void attach_guardian_done(struct target *t)
{
	if (!t->guardian)
		return;
	tell_guardian(t, 'R');
	close(t->guardian_fd);
	waitpid(t->guardian > 0 ? t->guardian : -t->guardian, NULL, 0);
	t->guardian = 0;
}

void attach_restore_slack(struct target *t)
{
	if (t->stub_written && !attach_mem_write(t, t->slack, t->saved, attach_stub_size()))
		t->stub_written = false;
}

/* One try at getting in: 0 done (the stub runs), 1 no thread at a safe
 * point (every thread let go again), else an error (reported). */
static int try_get_in(struct target *t, const char *request, size_t request_len)
{
	struct block_image b = { 0 };
	attach_regs stub_regs;
	struct thread *th;
	uint64_t pc;
	/* Every thread stopped, none can set a seccomp filter any more: what
	 * the checks saw may have changed since. */
	int err = stop_all(t);

	if (err || attach_check_threads(t->pid, true)) {
		detach_all(t);
		return -1;
	}
	if (build_block(t, request, request_len, &b)) {
		detach_all(t);
		return attach_fail(t->pid, "out of memory"), -1;
	}
	th = choose_thread(t, b.size);
	if (!th) {
		detach_all(t);
		free(b.data);
		return 1;
	}
	t->block = block_address(t, th, b.size);
	pc = fill_block(t, th, &b, t->block);
	/* The block's size is final only now (the state's length): the
	 * address holds, since the room checked was for the largest. */
	t->chosen = th->tid;
	if (!pc || attach_mem_read(t, t->slack, t->saved, attach_stub_size())) {
		err = errno;
		detach_all(t);
		free(b.data);
		return attach_alive(t->pid) ? attach_fail(t->pid, "cannot read its memory: %s",
							  strerror(err)), -1 : (attach_gone(t->pid), -1);
	}
	/* The guardian first: whenever the stub may be in the slack, someone
	 * is there to take it out. */
	start_guardian(t);
	if (attach_mem_write(t, t->block, b.data, b.size) || write_stub(t, pc)) {
		err = errno;
		attach_restore_slack(t);
		attach_guardian_done(t);
		detach_all(t);
		free(b.data);
		return attach_alive(t->pid) ? attach_fail(t->pid, "cannot write the loader: %s",
							  strerror(err)), -1 : (attach_gone(t->pid), -1);
	}
	free(b.data);
	attach_stub_regs(&th->regs, t->slack, t->block, &stub_regs);
	tell_guardian(t, 'S');
	err = attach_set_regs(th->tid, &stub_regs) ? errno : 0;
	tell_guardian(t, 'D');
	if (err) {
		attach_restore_slack(t);
		attach_guardian_done(t);
		detach_all(t);
		return err == ESRCH ? (attach_gone(t->pid), -1)
				    : (attach_fail(t->pid, "PTRACE_SETREGS: %s", strerror(err)), -1);
	}
	detach_all(t); /* all at once: no thread stays stopped while dlopen runs */
	return 0;
}

int attach_get_in(struct target *t, const char *request, size_t request_len)
{
	if (skip_stale_stubs(t))
		return -1;
	for (int i = 0; i < SAFE_POINT_TRIES; i++) {
		int r = try_get_in(t, request, request_len);

		if (r <= 0)
			return r;
		/* Let them run, then look again; the pauses vary so that a
		 * program with a period does not show the same phase each time. */
		usleep(1000 + (unsigned)i * 700 % 3000);
		if (attach_read_maps(t))
			return -1;
	}
	return attach_fail(t->pid, "no thread at a safe point (each was in libc, the dynamic loader "
		    "or a futex wait, %d times)", SAFE_POINT_TRIES), -1;
}

/* The chosen thread out of the stub (it is on its last instructions once
 * we acked): looked at stopped, let go, until its pc is elsewhere. */
bool attach_left_stub(struct target *t)
{
	uint64_t end = t->slack + attach_stub_size();

	for (int i = 0; i < 5000; i++) {
		struct thread th = { .tid = t->chosen };
		bool inside;

		if (ptrace(PTRACE_SEIZE, th.tid, NULL, NULL)) {
			if (errno == ESRCH || !attach_alive(th.tid))
				return true; /* gone or exiting: not in the stub */
			/* EPERM: still traced by a dying tool (its files,
			 * our pipe's end, close before its tracees go). */
			usleep(1000);
			continue;
		}
		if (ptrace(PTRACE_INTERRUPT, th.tid, NULL, NULL) || wait_stop(&th))
			return true;
		inside = !attach_get_regs(th.tid, &th.regs) && attach_pc(&th.regs) >= t->slack &&
			 attach_pc(&th.regs) < end;
		ptrace(PTRACE_DETACH, th.tid, NULL, (void *)(long)th.signal);
		if (!inside)
			return true;
		usleep(1000);
	}
	return false;
}
