/* SPDX-License-Identifier: MIT */
/*
 * arch.h - the hooks each architecture implements, in runtime/arch/<arch>.c
 * and runtime/arch/trampoline_<arch>.S, under these same names.  Generic
 * code calls only these; it never tests which architecture it runs on.
 */
#ifndef FTPAD_ARCH_H
#define FTPAD_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

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

/* The disabled site instruction (ftpad_arch_site_len bytes). */
void ftpad_arch_site_nop(uint8_t *buf) FTPAD_HIDDEN;

/*
 * The enabled site instruction: a call to the stub for site->kind in the
 * stub page at stubs, the one of the full register save with regs.
 * Returns 0, or -ERANGE when the stub is out of reach.
 */
int ftpad_arch_site_call(const struct ftpad_site *site, uintptr_t stubs, bool regs,
			 uint8_t *buf) FTPAD_HIDDEN;

/*
 * For a site with FTPAD_S_PREP: the one-time write (ftpad_arch_site_len
 * bytes at *addr, right before the site) that must be in place before the
 * site may call: aarch64's `mov x9, x30` into the first NOP of a NOP NOP
 * pad.  The arch's ftpad_arch_sites_write() makes that write safe while
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
 * An arch defines one of the next two (hence weak): the same job, with the
 * batch's changes handed over as an array, or taken from the sites.
 *
 * Change the site instructions of a batch while other threads may be
 * executing them: each change's pre bytes (its ops slot, a prep write)
 * must be in place before the site can call, then the site becomes the
 * change's new instruction.  Every thread must execute either the old or
 * the new instruction, and all of them must see the new one once this
 * returns.  x86_64 uses the int3 protocol, aarch64 a single-instruction
 * write with cache maintenance (and writes a batch's prep MOVs with the
 * other threads stopped); both end with ftpad_text_sync_cores().
 * While it runs, the generic code keeps site->patching set on each site
 * concerned (+1 a call being written, -1 the NOP), for a trap handler.
 * Returns 0 or the errors of ftpad_text_write(), or -EAGAIN when the
 * other threads could not be stopped for a prep write.
 */
int ftpad_arch_sites_write(const struct ftpad_change *changes, size_t n)
	FTPAD_HIDDEN __attribute__((weak));

/*
 * The same, for the sites of batch b (struct ftpad_batch), read from the
 * sites and written as they are read, so that a batch needs no memory per
 * site (x86_64).  After the last step, it reports each run of sites whose
 * bytes are all in memory with ftpad_batch_written(); a site it never
 * reports is left half written (->patching stays set).  With FTPAD_B_SLOT
 * on a site going to the NOP, it may put the slot's NOPs back as part of
 * the batch, once no thread can read the slot (ftpad_sites_quiesce()),
 * and then sets b->slots_cleared before it reports; otherwise the generic
 * code does it after a grace period.  Returns 0 or a negative errno.
 */
int ftpad_arch_batch_write(struct ftpad_batch *b) FTPAD_HIDDEN __attribute__((weak));

/* Where the n-th integer argument is saved: its register's slot in regs,
 * or its place on the stack (ftpad_regs_get_argument() reads it,
 * ftpad_regs_set_argument() writes it, and the trampoline reloads the
 * registers from regs before it returns). */
unsigned long *ftpad_arch_regs_argument_slot(struct ftpad_regs *regs,
					     unsigned int n) FTPAD_HIDDEN;

/* The stack pointer at the traced function's entry. */
unsigned long ftpad_arch_regs_stack_pointer(const struct ftpad_regs *regs) FTPAD_HIDDEN;

/* Make the trampoline continue at ip instead of the traced function's body,
 * with the stack and arguments as at the function's entry. */
void ftpad_arch_regs_set_ip(struct ftpad_regs *regs, unsigned long ip) FTPAD_HIDDEN;

#endif /* FTPAD_ARCH_H */
