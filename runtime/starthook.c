/* SPDX-License-Identifier: MIT */
/*
 * starthook.c - in libftpad.so only: __libc_start_main, interposed as
 * dlhooks.c interposes dlopen (libftpad.map gives it glibc's version,
 * GLIBC_2.34), so that the built-in tracer can take over from very early
 * tracing (early.c) right before main: after every constructor of the
 * program, which are thus traced early.  Without FTPAD_EARLY it only passes
 * the call on.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "internal.h"

typedef int (*main_fn)(int, char **, char **);
typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void),
			void *);

static main_fn real_main;

static int main_after_constructors(int argc, char **argv, char **envp)
{
	ftpad_tracer_start();
	return real_main(argc, argv, envp);
}

FTPAD_API int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void),
				void (*fini)(void), void (*rtld_fini)(void), void *stack_end)
{
	start_fn real = (start_fn)dlsym(RTLD_NEXT, "__libc_start_main");

	if (ftpad_early_active()) {
		real_main = main;
		main = main_after_constructors;
	}
	return real(main, argc, argv, init, fini, rtld_fini, stack_end);
}

/* ops.c refers to it, so a link with libftpad.a pulls this file in. */
const char ftpad_link_kind = 'd';
