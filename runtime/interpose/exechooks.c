/* SPDX-License-Identifier: MIT */
/*
 * exechooks.c - in libftpad.so only (a static program has no RTLD_NEXT):
 * exec replaces the memory, so the recorder (record_session.c) writes every buffer
 * first, and the image before the exec ends where the next one
 * (exec_from=) begins.  glibc's execv and execvp reach execve without the
 * PLT, so each is interposed; libftpad.map gives them glibc's version
 * (the references carry GLIBC_2.2.5 on x86_64, GLIBC_2.17 on aarch64).  execl*, execvpe, fexecve
 * and posix_spawn are not interposed: events still buffered are lost
 * across them.
 *
 * _exit and _Exit end the process without the destructors that end the
 * trace at exit(): the trace ends first.  (glibc's _Exit is an alias of
 * _exit, but a program's call to it binds to the name _Exit.)  A raw
 * exit_group system call passes both: `ftpad record` says so.
 *
 * clone(CLONE_VM) without CLONE_SETTLS makes a child that runs on its
 * parent thread's TLS, the recorder's thread record included: the
 * recorder is told, so that the child's events are counted as dropped
 * instead of going into its parent's buffer.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);

FTPAD_API int execve(const char *path, char *const argv[], char *const envp[])
{
	ftpad_record_before_exec();
	return ((execve_fn)dlsym(RTLD_NEXT, "execve"))(path, argv, envp);
}

FTPAD_API int execv(const char *path, char *const argv[])
{
	ftpad_record_before_exec();
	return ((execv_fn)dlsym(RTLD_NEXT, "execv"))(path, argv);
}

FTPAD_API int execvp(const char *file, char *const argv[])
{
	ftpad_record_before_exec();
	return ((execv_fn)dlsym(RTLD_NEXT, "execvp"))(file, argv);
}

typedef void (*exit_fn)(int);

static _Noreturn void exit_now(const char *name, int status)
{
	exit_fn real;

	ftpad_record_before_exit();
	real = (exit_fn)dlsym(RTLD_NEXT, name);
	if (real)
		real(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

FTPAD_API _Noreturn void _exit(int status)
{
	exit_now("_exit", status);
}

FTPAD_API _Noreturn void _Exit(int status)
{
	exit_now("_Exit", status);
}

typedef int (*clone_fn)(int (*)(void *), void *, int, void *, ...);

FTPAD_API int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	bool shares_tls = (flags & CLONE_VM) && !(flags & CLONE_SETTLS), counted = false;
	clone_fn real = (clone_fn)dlsym(RTLD_NEXT, "clone");
	pid_t *parent_tid, *child_tid;
	void *tls;
	va_list ap;
	int ret;

	/* glibc's clone reads all three whatever the flags: so do we. */
	va_start(ap, arg);
	parent_tid = va_arg(ap, pid_t *);
	tls = va_arg(ap, void *);
	child_tid = va_arg(ap, pid_t *);
	va_end(ap);
	if (shares_tls)
		counted = ftpad_record_before_clone();
	ret = real(fn, stack, flags, arg, parent_tid, tls, child_tid);
	/* A CLONE_VFORK child has exec'ed or exited by now. */
	if (counted && (flags & CLONE_VFORK))
		ftpad_record_after_vfork_clone();
	return ret;
}
