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
 * _exit, but a program's call to it binds to the name _Exit.)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
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
