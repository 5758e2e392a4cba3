/* SPDX-License-Identifier: MIT */
/*
 * early_preinit.c - in libftpad.a only: start very early tracing from the
 * executable's .preinit_array, which runs before the constructors of every
 * shared library (a shared object may not have one: the linker refuses);
 * and the rest of libftpad.a's start-up, in its constructor.  ops.c
 * refers to ftpad_start_up, defined here, so that an archive link takes
 * this file with the runtime.
 */
#include "internal.h"

static void preinit(int argc, char **argv, char **envp)
{
	(void)argc, (void)argv;
	ftpad_early_start(envp);
}

__attribute__((section(".preinit_array"), used)) static void (*const preinit_entry)(int, char **,
										char **) =
	preinit;

/*
 * At load: nothing but the fork handlers, and the built-in tracer if the
 * environment asks for it (taking over from very early tracing, which
 * preinit() started).  The site tables are read at the first call that
 * needs them, so a program that traces nothing pays nothing.
 */
__attribute__((constructor(102))) static void start_up(void)
{
	ftpad_install_fork_handlers();
	ftpad_tracer_start();
}

/* ops.c refers to it, so a link with libftpad.a pulls this file in. */
const char ftpad_start_up = 's';
