/* SPDX-License-Identifier: MIT */
/*
 * arch.h - the hooks each architecture implements, in runtime/arch/:
 * <arch>_encode.c (what a site and its stubs hold), <arch>.c (writing
 * them while threads run, and the C side of the trampolines) and
 * trampoline_<arch>.S, under these same names.  Generic code calls only
 * these; it never tests which architecture it runs on.
 */
#ifndef FTPAD_ARCH_H
#define FTPAD_ARCH_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "pad.h"

/* The enum ftpad_site_arch value records for this machine carry. */
extern const uint8_t ftpad_arch_id FTPAD_HIDDEN;

/* How far a site's patched instruction can reach its stub, in bytes. */
extern const uintptr_t ftpad_arch_reach FTPAD_HIDDEN;

/* Bytes of an enabled or disabled site instruction. */
extern const size_t ftpad_arch_site_len FTPAD_HIDDEN;

/* The ops slot's contents while no ops is stored there. */
extern const uint64_t ftpad_arch_slot_empty FTPAD_HIDDEN;

/*
 * Check the record's pad as it is in memory right now, before anything is
 * patched.  site->entry, ->site_off and FTPAD_S_SLOT are set; the arch
 * fills site->kind and may set FTPAD_S_PREP (the site needs
 * ftpad_arch_site_prep() written once before it is first enabled) or
 * FTPAD_S_PREPARED (that was done already).  Returns 0, or -EINVAL with
 * *why set to a reason for the log when the layout or bytes are not what
 * the record promises; such a site is never patched.
 */
int ftpad_arch_site_init(const struct ftpad_site_record *rec,
			 struct ftpad_site *site, const char **why) FTPAD_HIDDEN;

/*
 * For ftpad_arch_site_init(): run the architecture's pad check @check
 * (pad/<arch>.c) on the record's pad as it is in memory, the bytes from
 * the ops slot (or the entry), rounded down to 8, to the end of the site.
 * Returns its verdict; unless FTPAD_PAD_OK or FTPAD_PAD_PREPARED, *why
 * gets @reason's words for it.
 */
static inline enum ftpad_pad_verdict
ftpad_arch_pad_verdict(const struct ftpad_site_record *rec, const struct ftpad_site *site,
		       enum ftpad_pad_verdict (*check)(const struct ftpad_pad_site *,
						       const uint8_t *, size_t),
		       const char *(*reason)(enum ftpad_pad_verdict), const char **why)
{
	/* An exit site's slot is its entry site's to check (and, once that
	 * is enabled, holds a pointer); the site may lie before the entry, in
	 * a cold part: the bytes checked span both, and only the site's are
	 * read. */
	uintptr_t slot = ftpad_site_slot(site), addr = ftpad_site_addr(site);
	uintptr_t low = slot ? slot : site->entry < addr ? site->entry : addr;
	uintptr_t base = low & ~(uintptr_t)7;
	uintptr_t end = addr + ftpad_arch_site_len > site->entry ? addr + ftpad_arch_site_len
								 : site->entry + 1;
	const struct ftpad_pad_site pad = {
		.entry = site->entry - base, .site = addr - base,
		.ops = slot ? slot - base : 0, .has_ops = slot != 0,
		.site_len = rec->site_len, .kind = rec->kind, .flags = rec->flags,
	};
	enum ftpad_pad_verdict v = check(&pad, (const uint8_t *)base, end - base);

	if (v != FTPAD_PAD_OK && v != FTPAD_PAD_PREPARED)
		*why = reason(v);
	return v;
}

/*
 * The enabled site instruction: a call to the stub for site->kind in the
 * stub page at stubs, the one of the full register save with regs; for an
 * exit site (ftpad_site_is_exit()), the branch to its exit stub (regs is
 * then false: exits have one trampoline).  Returns 0, or -ERANGE when the
 * stub is out of reach.
 */
int ftpad_arch_site_call(const struct ftpad_site *site, uintptr_t stubs, bool regs,
			 uint8_t *buf) FTPAD_HIDDEN;

/*
 * For a site with FTPAD_S_PREP: the one-time write (ftpad_arch_site_len
 * bytes at *addr, right before the site) that must be in place before the
 * site may call: aarch64's `mov x9, x30` into the first NOP of a NOP NOP
 * pad.  The arch's ftpad_arch_batch_write() makes that write safe while
 * other threads run (aarch64: with them stopped, quiesce.c, when the
 * program allows it; else only while single-threaded).
 */
void ftpad_arch_site_prep(const struct ftpad_site *site, uintptr_t *addr,
			  uint8_t *buf) FTPAD_HIDDEN;

/*
 * Whether the site instruction at addr, read now by this thread, is a call
 * (to any stub).  Then the site's ops slot holds its struct ftpad_site, and
 * the loads that follow see it (acquire).  Called inside ftpad_enter().
 */
bool ftpad_arch_site_calls(uintptr_t addr) FTPAD_HIDDEN;

/* Bytes used in a module's stub page (a multiple of 8), and what they are
 * for a page mapped at address page. */
extern const size_t ftpad_arch_stubs_size FTPAD_HIDDEN;
void ftpad_arch_stubs_fill(uint8_t *buf, uintptr_t page) FTPAD_HIDDEN;

/*
 * Exit sites: 0 when they all share a stub among the ones above (x86_64),
 * else the bytes (a multiple of 8) of each exit site's own stub, which
 * follow them: exit site s's at stubs + ftpad_arch_stubs_size +
 * s->exit_index * ftpad_arch_exit_stub_size, filled for address at by
 * ftpad_arch_exit_stub_fill() (aarch64: the stub knows its site).
 */
extern const size_t ftpad_arch_exit_stub_size FTPAD_HIDDEN;
void ftpad_arch_exit_stub_fill(uint8_t *buf, uintptr_t at,
			       const struct ftpad_site *site) FTPAD_HIDDEN;

/*
 * Write batch b (struct ftpad_batch): change the instructions of its sites
 * while other threads may be executing them.  Each site goes to a call
 * (->patching +1; to the full save's stub with ->target_regs) or back to
 * its NOP (-1); with FTPAD_B_SLOT its ops slot is written too: &site
 * before the site may call, or (going down) the slot's NOPs back once no
 * thread can read it.  A site's slot and any prep write
 * (ftpad_arch_site_prep()) must be in place before the site can call.
 * Every thread must execute either the old or the new instruction, and
 * all of them must see the new one once this returns.  x86_64 uses the
 * int3 protocol (or, when another thread blocks SIGTRAP, guarded single
 * stores); aarch64 a single-instruction write with cache maintenance, and
 * writes a batch's prep MOVs with the other threads stopped (quiesce.c,
 * when the program allows it; else only while single-threaded); both end
 * with ftpad_text_sync_cores().  While it runs, the generic code keeps
 * site->patching set on each site concerned, for a trap handler.
 *
 * The arch may report runs of sites whose bytes are all in memory with
 * ftpad_batch_written() as it goes (x86_64 does, while their cache lines
 * are at hand); the sites it does not report are taken as written when it
 * returns 0, and as left half written (->patching stays set, the next
 * update writes them again) otherwise.  It may put the slots' NOPs back
 * as part of the batch, once no thread can read them
 * (ftpad_grace_try_unpublished()), and then sets b->slots_cleared before it
 * reports; otherwise the generic code does it after a grace period.
 * Returns 0, the errors of ftpad_text_write(), -ENOMEM, or -EAGAIN when
 * the batch cannot be written safely now (aarch64: the other threads
 * could not be stopped for a prep write; x86_64: a thread blocks SIGTRAP
 * and the guarded stores are not possible).
 */
int ftpad_arch_batch_write(struct ftpad_batch *b) FTPAD_HIDDEN;

/*
 * A change of this thread's signal mask to set (maskhooks.c): whether it
 * may block the signal a batch traps with (x86_64: SIGTRAP, whose int3
 * would kill a thread that blocks it; aarch64 traps nothing), and, called
 * with every signal blocked, the wait until no batch that traps is being
 * written.
 */
bool ftpad_arch_mask_may_trap(const sigset_t *set) FTPAD_HIDDEN;
void ftpad_arch_mask_wait(void) FTPAD_HIDDEN;
/* In a forked child: no batch that another thread was writing. */
void ftpad_arch_fork_child(void) FTPAD_HIDDEN;

/* A signal handler's ucontext: whether it interrupted the fast recording
 * path with a chunk slot reserved and its event not yet counted, the
 * chunk's last slot (x86_64: trampoline_x86_64.S RECORD's window; aarch64
 * has no fast path). */
bool ftpad_arch_record_slot_open(const void *ucontext) FTPAD_HIDDEN;

/* Where the n-th integer argument is saved: its register's slot in regs,
 * or its place on the stack (ftpad_regs_get_argument() reads it,
 * ftpad_regs_set_argument() writes it, and the trampoline reloads the
 * registers from regs before it returns). */
unsigned long *ftpad_arch_regs_argument_slot(struct ftpad_regs *regs,
					     unsigned int n) FTPAD_HIDDEN;

/* In regs saved at an exit (FTPAD_REGS_EXIT): where the trampoline keeps
 * register r (ftpad.h ftpad_regs_return_reg()), or NULL. */
void *ftpad_arch_regs_return_reg(struct ftpad_regs *regs, enum ftpad_return_reg r) FTPAD_HIDDEN;

/* The stack pointer at the traced function's entry. */
unsigned long ftpad_arch_regs_stack_pointer(const struct ftpad_regs *regs) FTPAD_HIDDEN;

/* Make the trampoline continue at ip instead of the traced function's body,
 * with the stack and arguments as at the function's entry. */
void ftpad_arch_regs_set_ip(struct ftpad_regs *regs, unsigned long ip) FTPAD_HIDDEN;

/*
 * Live patching (livepatch.c): make entry sites jump to a target, or (0)
 * go back to their NOP, while other threads run them: each thread runs
 * either the old or the new instruction, and every call that starts once
 * ftpad_arch_sites_jump() returns runs the new one.  Under ftpad_lock,
 * inside ftpad_modules_hold().  Its errors: -ERANGE when a target is out
 * of its site's direct reach; -EAGAIN when it cannot be written safely now
 * (x86_64: a thread blocks SIGTRAP and the guarded stores cannot be made);
 * -ENOMEM; the errors of ftpad_text_write().
 */
/* The size of a live patch's stub (ftpad_arch_jump_stub()). */
#define FTPAD_JUMP_STUB_SIZE 16

/* The instruction that makes site s jump to target (0: its NOP), into buf
 * (ftpad_arch_site_len bytes): x86_64 `jmp rel32`, aarch64 `b`.  0, or
 * -ERANGE when target is out of its reach: then a stub is needed. */
int ftpad_arch_jump_insn(const struct ftpad_site *s, uintptr_t target, uint8_t *buf) FTPAD_HIDDEN;

/* A stub that jumps to fn from anywhere, FTPAD_JUMP_STUB_SIZE bytes into
 * buf: x86_64 `jmp *0(%rip); .quad fn`, aarch64 `ldr x16, 8; br x16;
 * .quad fn` (x16: what a BTI `bti c` landing pad accepts from a BR). */
void ftpad_arch_jump_stub(uint8_t *buf, uintptr_t fn) FTPAD_HIDDEN;

/* One pad of ftpad_arch_sites_jump(): entry site of module mod, to jump
 * to target (0: its NOP). */
struct ftpad_site_jump {
	const struct ftpad_module *mod;
	const struct ftpad_site *site;
	uintptr_t target;
};

/*
 * The n pads of jumps switched in the protocol's rounds, a sync after
 * each round, not after each pad (x86_64's int3 protocol: three syncs for
 * the lot; aarch64: one 4-byte store per pad, B and NOP being in the
 * architecture's list of instructions that may change while other
 * threads run them, then one sync), so that the threads the tool holds
 * stopped meanwhile are held for one switch, not n.  Each pad is atomic,
 * not the set.  On an error some may be written: the caller puts every
 * one back.
 */
int ftpad_arch_sites_jump(const struct ftpad_site_jump *jumps, size_t n) FTPAD_HIDDEN;

#endif /* FTPAD_ARCH_H */
