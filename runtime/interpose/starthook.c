/* SPDX-License-Identifier: MIT */
/*
 * starthook.c - in libftpad.so only: __libc_start_main, interposed as
 * dlhooks.c interposes dlopen (libftpad.map gives it glibc's version,
 * GLIBC_2.34), so that the built-in tracer can take over from very early
 * tracing (early.c) right before main: after every constructor of the
 * program, which are thus traced early.  Without FTPAD_EARLY it only passes
 * the call on.  Its constructor is libftpad.so's start-up.
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

/*
 * At load, right after early.c's constructor: nothing but the fork
 * handlers, and the built-in tracer if the environment asks for it; when
 * tracing early, the tracer takes over right before main instead (above),
 * so that the constructors are traced early too.  The site tables are
 * read at the first call that needs them, so a program that traces
 * nothing pays nothing.
 */
__attribute__((constructor(102))) static void start_up(void)
{
	ftpad_install_fork_handlers();
	if (!ftpad_early_active())
		ftpad_tracer_start();
}

/* ops.c refers to it (for the static library's start-up; here it is in
 * the shared library anyway). */
const char ftpad_start_up = 'd';
