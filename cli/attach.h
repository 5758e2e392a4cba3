/* SPDX-License-Identifier: MIT */
/*
 * ftpad attach (attach.c) and the hooks each architecture gives it
 * (cli/arch/attach_<arch>.c, same names on every arch): the thread's
 * registers, the syscall-restart rule, the loader stub's bytes and its
 * extended state.  docs/design.md, "Attaching to a running process".
 */
#ifndef FTPAD_TOOLS_ATTACH_H
#define FTPAD_TOOLS_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "attach_block.h"

/* A stopped thread's registers, as the arch's hooks read and write them. */
#if defined(__x86_64__)
typedef struct user_regs_struct attach_regs;
#elif defined(__aarch64__)
typedef struct {
	struct user_regs_struct r; /* NT_PRSTATUS: x0-x30, sp, pc, pstate */
	long syscall;              /* the call the svc at pc makes (x8), or -1 */
	bool vector_state;         /* SVE live, streaming mode or ZA on */
} attach_regs;
#else
#error "ftpad attach has no hooks for this architecture (cli/arch/attach_<arch>.c)"
#endif

/* How long the stub's dlopen and ftpad_attach_start may take. */
#define ATTACH_LOAD_TIMEOUT_MS 60000

/* The ELF machine of the processes this tool can attach to. */
extern const int attach_elf_machine;
/* The system call that waits on a futex (a thread blocked in it may be
 * waiting for a lock the stub's dlopen needs). */
extern const long attach_futex_syscall;
/* Bytes below the stack pointer that the ABI lets code use without moving
 * it (x86_64: 128; AAPCS64: none): the block goes below them. */
extern const unsigned attach_red_zone;

/* The stub's bytes, in this tool (attach_stub_<arch>.S); the slot is where
 * the thread's own pc goes. */
extern const unsigned char ftpad_attach_stub[], ftpad_attach_stub_slot[],
	ftpad_attach_stub_end[];

int attach_get_regs(pid_t tid, attach_regs *regs);
int attach_set_regs(pid_t tid, const attach_regs *regs);
uint64_t attach_pc(const attach_regs *regs);
uint64_t attach_sp(const attach_regs *regs);
/* The system call the thread was stopped in, or -1. */
long attach_syscall(const attach_regs *regs);
/* Stopped in a call that restarts through restart_syscall (nanosleep,
 * futex with a timeout...): such a thread is chosen last, since the stub's
 * own calls may replace the kernel's restart record. */
bool attach_restart_block(const attach_regs *regs);

/* The thread's state is all of a kind the stub restores (aarch64: no
 * live SVE state outside a call, not in streaming mode, ZA off). */
bool attach_can_restore(const attach_regs *regs);

/* The registers the stub restores, into the block's AB_REGS area (or, on
 * aarch64, into xstate, the frame attach_get_xstate made), with the
 * kernel's syscall-restart rule applied (the interrupted call is made
 * again); returns the pc the stub jumps back to. */
uint64_t attach_saved_regs(const attach_regs *regs, uint64_t out[AB_REGS_SIZE / 8], void *xstate);
/* The registers that start the stub at stub with the block at block. */
void attach_stub_regs(const attach_regs *regs, uint64_t stub, uint64_t block,
		      attach_regs *out);

/* The thread's extended state (x86_64: XSAVE area; aarch64: a signal
 * frame with its FP/SIMD state, for rt_sigreturn) into buf: its length,
 * or -1 with errno; *features: what the stub restores of it. */
ssize_t attach_get_xstate(pid_t tid, void *buf, size_t size, uint64_t *features);
/* The largest extended state the kernel gives. */
size_t attach_xstate_max(void);

/* ---- shared by attach.c, attach_target.c and attach_inject.c ---- */

#include <limits.h>

struct mapping {
	uint64_t start, end, offset;
	char perms[8];
	char path[PATH_MAX];
};

struct thread {
	pid_t tid;
	bool stopped, usable; /* usable: stopped by our interrupt, not by a signal */
	int signal;           /* a signal it stopped for, given back at detach */
	attach_regs regs;
};

/* What the checks found about the process, and what getting in changed. */
struct target {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int mem; /* /proc/PID/mem */
	struct mapping *maps;
	size_t nmaps;
	bool has_sites;
	uint64_t dlopen, dlsym, dlerror, start;
	char lib[PATH_MAX]; /* what the stub dlopens */
	uint64_t slack;     /* where the stub goes */
	uint64_t slack_start, slack_end; /* the slack bytes found there */
	unsigned char saved[512];
	bool stub_written;
	struct thread *threads;
	size_t nthreads;
	pid_t chosen;
	pid_t guardian;   /* finishes the stub's cleanup if this tool dies */
	int guardian_fd;
	uint64_t block;
};

/* attach_target.c: what is known before anything is touched. */
size_t attach_stub_size(void);
/* "ftpad: error: cannot attach to process N: <reason>"; returns 1.  A
 * process that is gone is said to have exited while attaching. */
int attach_fail(pid_t pid, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The messages' "attach to" and "attaching" become what and ing (patch,
 * patching), for a command that gets in as attach does. */
void attach_name_command(const char *what, const char *ing);
/* "permission denied" with the reason, or that another tracer holds a
 * thread; returns 1. */
int attach_permission_error(pid_t pid, uid_t uid);
/* Every thread of the process: one that another process traces (not this
 * tool), or with seccomp one under a seccomp filter, refused with the
 * reason (1), else 0.  Both are per thread: a filter on any thread can
 * kill the process for a call libftpad makes there (the stub may run on
 * that thread, and a thread it creates inherits the filter). */
int attach_check_threads(pid_t pid, bool seccomp);
/* "process N exited while attaching"; returns 1. */
int attach_gone(pid_t pid);
bool attach_alive(pid_t pid);
int attach_read_maps(struct target *t);
const struct mapping *attach_mapping_at(const struct target *t, uint64_t addr);
int attach_mem_read(struct target *t, uint64_t addr, void *buf, size_t len);
int attach_mem_write(struct target *t, uint64_t addr, const void *buf, size_t len);
/* Every refusal checked (docs/tracing.md), /proc/PID/mem opened; 0, or 1
 * after the message. */
int attach_check_target(struct target *t);

/* attach_inject.c: getting in. */
/* The stub started on one thread at a safe point, every thread let go;
 * 0, or -1 after the message with the process as it was. */
int attach_get_in(struct target *t, const char *request, size_t request_len);
/* The stub's done mark: 1 once it is set (then *result, errtext read and
 * the stub acked, so that it goes on), 0 not yet, -1 the process is gone. */
int attach_poll_stub(struct target *t, int64_t *result, char *errtext);
/* The guardian (a child started before the one PTRACE_SETREGS) is told
 * this tool has finished with the stub, and is reaped. */
void attach_guardian_done(struct target *t);
uint64_t attach_now_ms(void);
/* The chosen thread is out of the stub (or gone). */
bool attach_left_stub(struct target *t);
/* The stub's slack bytes as they were. */
void attach_restore_slack(struct target *t);
/* attach.c: the session with libftpad's control thread, which `ftpad
 * patch` (patch.c) runs too. */
struct session {
	int listen, conn, signals;
	char name[108];
	char buf[512];
	size_t len;
};
/* The abstract socket the control thread connects to; 0 or -1. */
int attach_open_socket(struct session *s);
/* One line from the control thread, its newline taken off; 0, or -1 on
 * end of file, a timeout or a signal (*signalled, when not NULL). */
int attach_read_line(struct session *s, char *out, size_t size, int timeout_ms,
		     bool *signalled);
/* libftpad in with request, the stub out of the way again: 0 once the
 * control thread is connected, -1 after the message. */
int attach_load_library(struct target *t, struct session *s, const char *request,
			size_t request_len);

#endif
