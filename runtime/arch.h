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
 * patched, and fill site->kind.  Returns 0, or -EINVAL with *why set to a
 * reason for the log when the layout or bytes are not what the record
 * promises; such a site is never patched.
 */
int ftpad_arch_site_init(const struct ftpad_site_record *rec,
			 struct ftpad_site *site, const char **why) FTPAD_HIDDEN;

/* The disabled site instruction (ftpad_arch_site_len bytes). */
void ftpad_arch_site_nop(uint8_t *buf) FTPAD_HIDDEN;

/*
 * The enabled site instruction: a call to the stub for site->kind in the
 * stub page at stubs, or, without use_slot, to the stub of the same kind
 * that ignores the ops slot and finds the ops in site->ops (patch.c calls a
 * site that way while it rewrites its slot).  Returns 0, or -ERANGE when
 * the stub is out of reach.
 */
int ftpad_arch_site_call(const struct ftpad_site *site, uintptr_t stubs, bool use_slot,
			 uint8_t *buf) FTPAD_HIDDEN;

/* Bytes used in a module's stub page (a multiple of 8), and what they are
 * for a page mapped at address page. */
extern const size_t ftpad_arch_stubs_size FTPAD_HIDDEN;
void ftpad_arch_stubs_fill(uint8_t *buf, uintptr_t page) FTPAD_HIDDEN;

/*
 * Change the site instructions of a batch (each poke is ftpad_arch_site_len
 * bytes at a site's addr, the enabled or disabled instruction) while other
 * threads may be executing them: every thread must execute either the old
 * or the new instruction, and all of them must see the new one once this
 * returns.  x86_64 uses the int3 protocol, aarch64 a single-instruction
 * write with cache maintenance; both end with ftpad_text_sync_cores().
 * While it runs, the generic code keeps site->patching set on each site
 * concerned (+1 becoming enabled, -1 becoming disabled), for a trap handler.
 * Returns 0 or the errors of ftpad_text_poke().
 */
int ftpad_arch_sites_write(struct ftpad_poke *pokes, size_t n) FTPAD_HIDDEN;

/* The n-th integer argument saved in regs (see ftpad_regs_get_argument()). */
unsigned long ftpad_arch_regs_argument(const struct ftpad_regs *regs,
				       unsigned int n) FTPAD_HIDDEN;

/* Replace the n-th integer argument (see ftpad_regs_set_argument()). */
void ftpad_arch_regs_set_argument(struct ftpad_regs *regs, unsigned int n,
				  unsigned long val) FTPAD_HIDDEN;

/* The stack pointer at the traced function's entry. */
unsigned long ftpad_arch_regs_stack_pointer(const struct ftpad_regs *regs) FTPAD_HIDDEN;

/* Make the trampoline continue at ip instead of the traced function's body,
 * with the stack and arguments as at the function's entry. */
void ftpad_arch_regs_set_ip(struct ftpad_regs *regs, unsigned long ip) FTPAD_HIDDEN;

#endif /* FTPAD_ARCH_H */
