/* SPDX-License-Identifier: MIT */
/*
 * fork.c - what fork does to the runtime: the locks are taken around it
 * (lock.c, and the symbol table lock), and the child, the only thread
 * left, puts right what the threads it lacks left behind: the arch's
 * state, the thread slots, the modules' listing, and, if a change was
 * half made, the state of every site, read back from the code (the next
 * change rewrites any site left half written, patch.c).
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "arch.h"
#include "internal.h"

static void fork_prepare(void)
{
	bool may_block = ftpad_lock_fork_prepare();

	ftpad_symbols_fork_prepare(may_block);
}

static void fork_parent(void)
{
	ftpad_symbols_fork_done(false);
	ftpad_lock_fork_parent();
}

static void fork_child(void)
{
	ftpad_arch_fork_child();
	ftpad_grace_fork_child();
	ftpad_modules_fork_child();
	ftpad_symbols_fork_done(true);
	if (ftpad_lock_fork_child())
		ftpad_sites_resync();
}

/* From the start-up (starthook.c, early_preinit.c): at load. */
void ftpad_install_fork_handlers(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
