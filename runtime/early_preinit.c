/* SPDX-License-Identifier: MIT */
/*
 * early_preinit.c - in libftpad.a only: start very early tracing from the
 * executable's .preinit_array, which runs before the constructors of every
 * shared library (a shared object may not have one: the linker refuses).
 * ops.c refers to ftpad_link_kind, defined here, so that an archive link
 * takes this file with the runtime.
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

/* ops.c refers to it, so a link with libftpad.a pulls this file in. */
const char ftpad_link_kind = 's';
