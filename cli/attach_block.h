/* SPDX-License-Identifier: MIT */
/*
 * The block ftpad attach writes below the chosen thread's red zone (if its
 * ABI has one), read by the loader stub (cli/arch/attach_stub_<arch>.S)
 * and by the tool (attach.h's struct attach_block, checked against these
 * offsets).  Plain numbers, so that the assembler reads them too.
 */
#ifndef FTPAD_TOOLS_ATTACH_BLOCK_H
#define FTPAD_TOOLS_ATTACH_BLOCK_H

#define AB_DLOPEN	0	/* dlopen in the target, or 0 */
#define AB_DLSYM	8
#define AB_DLERROR	16
#define AB_START	24	/* ftpad_attach_start when linked in: no dlopen */
#define AB_PATH		32	/* address of the library's path */
#define AB_SYMBOL	40	/* address of "ftpad_attach_start" */
#define AB_REQUEST	48	/* address of the request */
#define AB_XSTATE	56	/* address of the extended state to restore */
#define AB_XFEATURES	64	/* which of its parts (x86_64: XRSTOR's mask) */
#define AB_RESULT	72	/* ftpad_attach_start's return, or one below */
#define AB_DONE		80	/* 1 once the results are there */
#define AB_ACK		88	/* 1 once the tool has read them */
#define AB_WAIT_ROUNDS	96	/* at most that many waits for the ack */
#define AB_ERRTEXT	128	/* dlerror()'s text */
#define AB_ERRTEXT_SIZE	256
#define AB_REGS		384	/* the registers to restore, in the arch's order */
#define AB_REGS_SIZE	256
#define AB_FIXED_SIZE	640	/* the strings and the extended state follow */

#define AB_RESULT_NO_DLOPEN	1
#define AB_RESULT_NO_DLSYM	2

/* x86_64's order in AB_REGS. */
#define AB_RAX		0
#define AB_RBX		8
#define AB_RCX		16
#define AB_RDX		24
#define AB_RSI		32
#define AB_RDI		40
#define AB_RBP		48
#define AB_RSP		56
#define AB_R8		64
#define AB_R9		72
#define AB_R10		80
#define AB_R11		88
#define AB_R12		96
#define AB_R13		104
#define AB_R14		112
#define AB_R15		120
#define AB_RFLAGS	128
#define AB_RIP		136

/* aarch64: AB_XSTATE is a signal frame (struct rt_sigframe: a siginfo,
 * then a ucontext) for rt_sigreturn; the stub fills in these two parts of
 * it (cli/arch/attach_aarch64.c checks the offsets). */
#define AB_A64_UC_STACK		144	/* stack_t: the alternate signal stack */
#define AB_A64_UC_SIGMASK	168	/* the kernel's 8-byte signal mask */

#endif
