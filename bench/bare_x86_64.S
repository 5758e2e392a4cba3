/* SPDX-License-Identifier: MIT */
/*
 * bare_x86_64.S - the "bare trampoline" that the enabled-call goal and
 * ../shared/research/perf-anchors.md (1b) measure ftpad's enabled site
 * against, built into bench.c (compiled -pg -mfentry, so that every
 * function starts with a direct `call __fentry__`, the same instruction as
 * an enabled ftpad site) and timed by run.py in the same run as ftpad:
 *
 *   -DBARE_RET    call and ret: what any call at the entry costs;
 *   -DBARE_GPRS   save rdi rsi rdx rcx r8 r9 rax r10, call an empty C
 *                 callback through a pointer with (ip, parent_ip, ops,
 *                 regs), restore: the least a callback with its
 *                 arguments at hand can cost;
 *   -DBARE_XMM    the same with xmm0-7 saved too: what docs/design.md asks every
 *                 trampoline to keep, and so the floor for ftpad's.
 *   -DBARE_YMM    the same with ymm0-7 (AVX): what ftpad's trampoline keeps
 *                 on an AVX CPU, so that __m256 arguments survive a
 *                 callback that calls libc (the floor for that).
 *
 * No ops lookup, no recursion guard, no errno, no check that the site is
 * still a call: each is something ftpad's trampoline does and this does
 * not, so the difference between the two is their cost.
 */
	.text
	.globl __fentry__
	.type __fentry__, @function
__fentry__:
	.cfi_startproc
#ifdef BARE_RET
	ret
#else
#ifdef BARE_YMM
#define XMM_BYTES 256
#elif defined(BARE_XMM)
#define XMM_BYTES 128
#else
#define XMM_BYTES 0
#endif
#define FRAME (64 + XMM_BYTES)  /* rsp = 0 mod 16 here: keeps it so */
	subq $FRAME, %rsp
	.cfi_adjust_cfa_offset FRAME
	movq %rdi, 0(%rsp)
	movq %rsi, 8(%rsp)
	movq %rdx, 16(%rsp)
	movq %rcx, 24(%rsp)
	movq %r8, 32(%rsp)
	movq %r9, 40(%rsp)
	movq %rax, 48(%rsp)
	movq %r10, 56(%rsp)
#ifdef BARE_YMM
	vmovdqu %ymm0, 64(%rsp)
	vmovdqu %ymm1, 96(%rsp)
	vmovdqu %ymm2, 128(%rsp)
	vmovdqu %ymm3, 160(%rsp)
	vmovdqu %ymm4, 192(%rsp)
	vmovdqu %ymm5, 224(%rsp)
	vmovdqu %ymm6, 256(%rsp)
	vmovdqu %ymm7, 288(%rsp)
#elif defined(BARE_XMM)
	movaps %xmm0, 64(%rsp)
	movaps %xmm1, 80(%rsp)
	movaps %xmm2, 96(%rsp)
	movaps %xmm3, 112(%rsp)
	movaps %xmm4, 128(%rsp)
	movaps %xmm5, 144(%rsp)
	movaps %xmm6, 160(%rsp)
	movaps %xmm7, 176(%rsp)
#endif
	movq FRAME(%rsp), %rdi          /* ip: the site's return address - 5 */
	subq $5, %rdi
	movq FRAME+8(%rsp), %rsi        /* parent_ip */
	leaq bare_ops(%rip), %rdx
	movq %rsp, %rcx                 /* regs */
	call *bare_callback(%rip)
#ifdef BARE_YMM
	vmovdqu 64(%rsp), %ymm0
	vmovdqu 96(%rsp), %ymm1
	vmovdqu 128(%rsp), %ymm2
	vmovdqu 160(%rsp), %ymm3
	vmovdqu 192(%rsp), %ymm4
	vmovdqu 224(%rsp), %ymm5
	vmovdqu 256(%rsp), %ymm6
	vmovdqu 288(%rsp), %ymm7
#elif defined(BARE_XMM)
	movaps 64(%rsp), %xmm0
	movaps 80(%rsp), %xmm1
	movaps 96(%rsp), %xmm2
	movaps 112(%rsp), %xmm3
	movaps 128(%rsp), %xmm4
	movaps 144(%rsp), %xmm5
	movaps 160(%rsp), %xmm6
	movaps 176(%rsp), %xmm7
#endif
	movq 0(%rsp), %rdi
	movq 8(%rsp), %rsi
	movq 16(%rsp), %rdx
	movq 24(%rsp), %rcx
	movq 32(%rsp), %r8
	movq 40(%rsp), %r9
	movq 48(%rsp), %rax
	movq 56(%rsp), %r10
	addq $FRAME, %rsp
	.cfi_adjust_cfa_offset -FRAME
	ret
#endif
	.cfi_endproc
	.size __fentry__, . - __fentry__

	.section .note.GNU-stack, "", @progbits
