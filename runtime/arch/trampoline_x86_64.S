/* SPDX-License-Identifier: MIT */
/*
 * trampoline_x86_64.S - the trampolines every enabled x86_64 site reaches,
 * through `call rel32` to its module's stub, which jumps here with the site
 * kind in r11 (arch/x86_64.c: ENDBR 1, SLOT 2, REGS 4).
 *
 * On entry:  [rsp] = site + 5 (return into the traced function)
 *            [rsp + 8] = parent_ip (return into its caller)
 * The stack is realigned rather than assumed aligned: GCC's
 * -fipa-stack-alignment (on by default) lets a caller call a function it
 * knows needs no alignment with rsp misaligned, and such a function's site
 * then enters here with rsp = 8 mod 16.
 *
 * Every trampoline saves what a callee may receive an argument in (rdi rsi
 * rdx rcx r8 r9, rax for varargs, r10 for the static chain, and vector
 * registers 0-7 as wide as the CPU has them) and restores it all before
 * returning into the function, or where a callback redirected it
 * (regs->pt.rip).  r11 and the flags are dead at a function's entry, so
 * they need no saving (the stub uses r11 for the kind).
 *
 * Vector registers: an __m256 or __m512 argument arrives whole in ymm0-7 or
 * zmm0-7, and any callback that calls libc loses their upper bits: glibc's
 * AVX2 memset, strlen, memcpy... end with vzeroupper.  So each trampoline
 * comes in three widths, and arch/x86_64.c points the stubs at the one the
 * CPU and kernel enable (CPUID, XGETBV), once, with no test on the way:
 *  - SSE: movaps of xmm0-7;
 *  - AVX: vmovdqu of ymm0-7, all VEX-encoded (no SSE/AVX transition);
 *  - AVX-512: the same, plus the upper 256 bits of zmm0-7 (vextracti64x4).
 * Only registers 0-7 matter: every vector register is caller-saved in the
 * SysV psABI and only 0-7 carry arguments, so nothing else is live at an
 * entry.  Nothing else of the vector and x87 state needs keeping either:
 * the opmask registers k0-7 are all caller-saved and carry no argument
 * (__mmask arguments travel in general registers); the x87 stack is empty
 * at every call; the control bits of MXCSR and the x87 control word are
 * callee-saved, so the callback, a function under the same ABI, gives them
 * back as it found them.  Only the exception status flags of MXCSR and the
 * x87 status word may come back with flags the callback raised: the psABI
 * makes them caller-saved, so no caller counts on them across a call
 * (docs/runtime.md, Limits).
 *
 *  - ftpad_trampoline_2 and _3, sites with an ops slot (the common case),
 *    reached through ftpad_trampoline_2_record and _3_record, the fast
 *    recording path (below: no frame at all), dispatch in assembly: enter
 *    (one add to this thread's slot word), check that the site is still a
 *    call, take its struct ftpad_site from the slot and call
 *    ops->internal.call(ip, parent_ip, ops, regs) with errno kept, and
 *    exit (one sub, then a writer waiting for a grace period is woken if
 *    the slot says one sleeps, as internal.h's ftpad_exit() does).
 *    Anything unusual (no slot claimed yet, nested or busy, the site
 *    mid-patch) goes to the C path below instead.
 *  - ftpad_trampoline_0 and _1 (no ops slot) and those fallbacks call
 *    ftpad_trampoline_entry() in C.
 *  - ftpad_trampoline_regs (FTPAD_OPS_FL_SAVE_REGS) saves and restores
 *    every general register and the flags too, then goes to C.
 *
 *  - ftpad_trampoline_exit is what every enabled exit site reaches, by
 *    `call rel32` to a stub of its own, which pushes the site's struct
 *    ftpad_site and jumps through the module's exit stub to
 *    ftpad_trampoline_exit_site (fast recording, below), which comes here
 *    when it does not write the event; no register is set on the way
 *    (docs/runtime.md "Exit sites").  There the function has
 *    restored its caller's registers and is about to return (or jump to
 *    a tail callee), with the stack as at its entry under the stub's
 *    word: [rsp] = &site, [rsp + 8] = site + 5, [rsp + 16] = the return
 *    address into its caller.  Live are the return
 *    value (rax, rdx, xmm0, xmm1, st(0), st(1)) and, in front of a tail
 *    call, every argument register and r11 (the target of an indirect
 *    tail call).  So it keeps rax rdx rcx rsi rdi r8 r9 r10 r11 and
 *    vector registers 0-7 (as wide as the others do), and the x87
 *    registers that hold something (fxam tells an empty st(0) from a
 *    value): the x87 stack must be empty when C is called, so st(0) and
 *    st(1) are stored with fstpt and loaded back with fldt, in order, which
 *    keeps all 80 bits.  It calls ftpad_trampoline_at_exit(site + 5,
 *    parent_ip, regs, &site) with regs->full = 2 (FTPAD_REGS_EXIT), and
 *    always returns to site + 5, dropping the word: an exit callback
 *    cannot redirect.
 *
 * Each comes in the three widths above: ftpad_trampoline_2,
 * ftpad_trampoline_avx_2, ftpad_trampoline_avx512_2 and so on.
 *
 * The frame is struct ftpad_regs (internal.h, ftpad.h's ftpad_pt_regs),
 * then what the fast path keeps over its call and the kind, then, with
 * AVX-512, the upper halves of zmm0-7.  The offsets into C's structs
 * (R_R15 ... R_VEC, VEC_STRIDE, REGS_SIZE, T_*, OPS_CALL, ENTER, NOT_FAST
 * and the fast path's SITE_WHAT, RT_* and CH_*) are generated from them
 * (arch/asm_offsets_x86_64.c); the frame's tail is laid out here.
 */
#include "ftpad_asm_offsets.h"

#define R_ERRNO 416     /* after struct ftpad_regs: the fast path's errno */
#define R_KIND 424      /* the stub's kind, for the full save's C call */
#define R_ST0 416       /* exits: st(0) (10 bytes), instead of the two above */
#define R_NST 428       /* exits: how many of st(0), st(1) were saved */
#define R_ST1 432       /* exits: st(1) */
#define R_ZHI 448       /* AVX-512 only: bits 256-511 of zmm0-7, 32 bytes each */
/* Multiples of 32: the calls below see an aligned stack, the vectors too. */
#define FRAME 448       /* SSE and AVX */
#define FRAME_ZMM 704   /* AVX-512 */
	.if R_ERRNO != REGS_SIZE || R_ST0 != REGS_SIZE
	.error "struct ftpad_regs changed size: lay the frame's tail out again"
	.endif

/* Vector widths, the trampolines' vec parameter. */
#define SSE 0
#define AVX 1
#define AVX512 2

	.text

/* Vector registers 0-7 into the frame, as wide as vec says. */
	.macro SAVE_VEC vec
	.irp n, 0, 1, 2, 3, 4, 5, 6, 7
	.if \vec == SSE
	movaps %xmm\n, R_VEC+\n*VEC_STRIDE(%rsp)
	.else
	vmovdqu %ymm\n, R_VEC+\n*VEC_STRIDE(%rsp)
	.endif
	.if \vec == AVX512
	vextracti64x4 $1, %zmm\n, R_ZHI+\n*32(%rsp)
	.endif
	.endr
	.endm

/* And back; a VEX load of ymm clears bits 256-511, which AVX-512 then
 * puts back. */
	.macro RESTORE_VEC vec
	.irp n, 0, 1, 2, 3, 4, 5, 6, 7
	.if \vec == SSE
	movaps R_VEC+\n*VEC_STRIDE(%rsp), %xmm\n
	.else
	vmovdqu R_VEC+\n*VEC_STRIDE(%rsp), %ymm\n
	.endif
	.if \vec == AVX512
	vinserti64x4 $1, R_ZHI+\n*32(%rsp), %zmm\n, %zmm\n
	.endif
	.endr
	.endm

/* The frame, and the argument registers in it; skip: bytes the stubs
 * pushed above site + 5 (an exit site's struct ftpad_site). */
	.macro PROLOGUE vec, flags=0, skip=0
	.cfi_startproc
	.cfi_adjust_cfa_offset \skip
	endbr64 /* reached by the stub's indirect jmp */
	pushq %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	movq %rsp, %rbp
	.cfi_def_cfa_register %rbp
	.if \flags
	pushfq                    /* at -8(%rbp), before anything changes them */
	.endif
	andq $-32, %rsp
	.if \vec == AVX512
	subq $FRAME_ZMM, %rsp
	.else
	subq $FRAME, %rsp
	.endif
	movq %rdi, R_RDI(%rsp)
	movq %rsi, R_RSI(%rsp)
	movq %rdx, R_RDX(%rsp)
	movq %rcx, R_RCX(%rsp)
	movq %r8, R_R8(%rsp)
	movq %r9, R_R9(%rsp)
	movq %rax, R_RAX(%rsp)
	movq %r10, R_R10(%rsp)
	SAVE_VEC \vec
	movq 8+\skip(%rbp), %rdi  /* site + 5 */
	movq %rdi, R_RIP(%rsp)
	leaq 16+\skip(%rbp), %rax /* rsp at the function's entry */
	movq %rax, R_RSP(%rsp)
	.endm

/* Back into the function, or where a callback sent it. */
	.macro EPILOGUE vec, skip=0
	movq R_RIP(%rsp), %rax
	movq %rax, 8+\skip(%rbp)
	RESTORE_VEC \vec
	movq R_R10(%rsp), %r10
	movq R_RAX(%rsp), %rax
	movq R_R9(%rsp), %r9
	movq R_R8(%rsp), %r8
	movq R_RCX(%rsp), %rcx
	movq R_RDX(%rsp), %rdx
	movq R_RSI(%rsp), %rsi
	movq R_RDI(%rsp), %rdi
	movq %rbp, %rsp
	.cfi_remember_state
	.cfi_def_cfa_register %rsp
	popq %rbp
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbp
	.if \skip
	leaq \skip(%rsp), %rsp    /* the flags stay */
	.cfi_adjust_cfa_offset -\skip
	.endif
	ret
	.cfi_restore_state
	.endm

/* ftpad_trampoline_entry(ret, parent_ip, regs, kind) */
	.macro CALL_C kind=%r11
	movq R_RIP(%rsp), %rdi
	movq 16(%rbp), %rsi
	movq %rsp, %rdx
	movq \kind, %rcx
	call ftpad_trampoline_entry
	.endm

	.macro FUNC name
	.globl \name
	.hidden \name
	.type \name, @function
	.p2align 4
\name:
	.endm

/* Sites without an ops slot: C finds the site by address. */
	.macro SLOTLESS name0, name1, vec
FUNC \name0
FUNC \name1
	PROLOGUE \vec
	movq $0, R_FULL(%rsp)
	CALL_C %r11
	EPILOGUE \vec
	.cfi_endproc
	.size \name0, .-\name0
	.size \name1, .-\name1
	.endm

/* Sites with an ops slot; endbr: 4 when endbr64 precedes the site, kind
 * the stub's (ENDBR 1, SLOT 2).  The stubs go to the fast recording path
 * in front, \name\()_record (LEAN_ENTRY), which comes here when it does
 * not write the event. */
	.macro FAST name, endbr, kind, vec
	LEAN_ENTRY \name\()_record, \endbr, \kind, \name
FUNC \name
	PROLOGUE \vec
	movq $0, R_FULL(%rsp)
	movq ftpad_slot@gottpoff(%rip), %rax
	movq %fs:(%rax), %r11     /* this thread's struct ftpad_thread_slot */
	testq %r11, %r11
	jz 2f
	movq (%r11), %rax
	testl $NOT_FAST, %eax     /* busy, or nested in a callback: C decides */
	jnz 2f
	addq $ENTER, (%r11)       /* one instruction: signal-safe */
	cmpb $0xe8, -5(%rdi)      /* still a call: the slot is whole */
	jne 1f
	movq -13-\endbr(%rdi), %rdx /* the slot: our struct ftpad_site */
	movq (%rdx), %rdx         /* its ops */
	testq %rdx, %rdx
	jz 3f
	movq %rdx, R_OPS(%rsp)
	movq T_ERRNO(%r11), %rax  /* errno, kept over the call */
	movl (%rax), %eax
	movl %eax, R_ERRNO(%rsp)
	leaq -5-\endbr(%rdi), %rdi /* ip: the function's entry */
	movq 16(%rbp), %rsi       /* parent_ip */
	movq %rsp, %rcx           /* regs */
	call *OPS_CALL(%rdx)
	movq ftpad_slot@gottpoff(%rip), %rax
	movq %fs:(%rax), %r11
	movq T_ERRNO(%r11), %rax
	movl R_ERRNO(%rsp), %edx
	movl %edx, (%rax)
3:	subq $1, (%r11)
	cmpl $0, T_WAITERS(%r11)  /* a writer sleeps until we are out: grace.c */
	jne 4f
	EPILOGUE \vec
4:	movq %r11, %rdi
	call ftpad_grace_wake
	EPILOGUE \vec
1:	subq $1, (%r11)           /* mid-patch: C takes the site by address */
	cmpl $0, T_WAITERS(%r11)
	je 2f
	movq %r11, %rdi
	call ftpad_grace_wake
2:	CALL_C $\kind
	EPILOGUE \vec
	.cfi_endproc
	.size \name, .-\name
	.endm

/* FTPAD_OPS_FL_SAVE_REGS: every register, restored from the frame. */
	.macro FULL name, vec
FUNC \name
	PROLOGUE \vec, flags=1
	movq %r11, R_KIND(%rsp)
	movq -8(%rbp), %rax
	movq %rax, R_FLAGS(%rsp)
	movq %r15, R_R15(%rsp)
	movq %r14, R_R14(%rsp)
	movq %r13, R_R13(%rsp)
	movq %r12, R_R12(%rsp)
	movq %rbx, R_RBX(%rsp)
	movq 0(%rbp), %rax        /* the function's rbp, pushed above */
	movq %rax, R_RBP(%rsp)
	movq $0, R_R11(%rsp)      /* the stub used it for the kind */
	movq $1, R_FULL(%rsp)
	CALL_C R_KIND(%rsp)
	movq R_RBP(%rsp), %rax    /* popped by the epilogue */
	movq %rax, 0(%rbp)
	movq R_R15(%rsp), %r15
	movq R_R14(%rsp), %r14
	movq R_R13(%rsp), %r13
	movq R_R12(%rsp), %r12
	movq R_RBX(%rsp), %rbx
	movq R_R11(%rsp), %r11
	pushq R_FLAGS(%rsp)
	popfq                     /* nothing below changes the flags */
	EPILOGUE \vec
	.cfi_endproc
	.size \name, .-\name
	.endm

/* Whether st(0) is empty (fxam: C3 C2 C0 = 1 0 1); rax is saved. */
	.macro X87_EMPTY
	fxam
	fnstsw %ax
	andw $0x4500, %ax
	cmpw $0x4100, %ax
	.endm

/* Exit sites: every register that may be live there, see above. */
	.macro EXIT name, vec
FUNC \name
	PROLOGUE \vec, skip=8       /* the exit stub's &site */
	movq %r11, R_R11(%rsp)
	movq $2, R_FULL(%rsp)     /* FTPAD_REGS_EXIT */
	movl $0, R_NST(%rsp)
	X87_EMPTY
	je 1f
	fstpt R_ST0(%rsp)
	movl $1, R_NST(%rsp)
	X87_EMPTY
	je 1f
	fstpt R_ST1(%rsp)
	movl $2, R_NST(%rsp)
1:	movq R_RIP(%rsp), %rdi    /* site + 5 */
	movq 24(%rbp), %rsi       /* parent_ip */
	movq %rsp, %rdx           /* regs */
	movq 8(%rbp), %rcx        /* its struct ftpad_site */
	call ftpad_trampoline_at_exit
	movl R_NST(%rsp), %eax
	testl %eax, %eax
	jz 2f
	cmpl $1, %eax
	je 3f
	fldt R_ST1(%rsp)
3:	fldt R_ST0(%rsp)
2:	movq R_R11(%rsp), %r11
	EPILOGUE \vec, skip=8
	.cfi_endproc
	.size \name, .-\name
	.endm

/*
 * Fast recording.  When a site's ops is the recorder's and no option
 * needs C per event (record_buffer.c: ftpad_record_fast_ops), the event
 * is written here, before any frame is built: the site's event word (struct ftpad_site
 * .trace_what, plus one), the TSC and the stack pointer go into the
 * thread's current chunk, and the registers used are pushed and popped
 * around it.  Only general registers are used, never a vector or x87 one,
 * so the arguments (at an entry) and the return value (at an exit: rax,
 * rdx, xmm0, xmm1, st(0), st(1)) are untouched; the flags are dead at both.
 *
 * Anything unusual goes the generic way, which writes the same event from
 * C: no thread slot or a nested dispatch (NOT_FAST), the site mid-patch,
 * another ops, no id yet, no thread or chunk yet, a full chunk (its last
 * slot is the LOST event's), the recorder stopping, or the thread already
 * writing an event (record_buffer.c's busy).
 *
 * A signal handler on the same thread records too, and so may land between
 * any two instructions here.  The slot is reserved first and written
 * after, so that a handler's events go before or after ours, never into
 * our slot:
 *  - the thread's pending count goes up first: while it is up, the C path
 *    (make_room()) does not hand the chunk over, so the chunk stays the
 *    thread's and its n only grows;
 *  - n is read, then the TSC, then n + 1 is stored with cmpxchg (no lock
 *    prefix: only this thread and its handlers write n, and one
 *    instruction is whole against a signal).  Should a handler have
 *    written events in between, n moved, and the three are done again:
 *    so no event written before ours has a later time, and the slots of a
 *    thread's events are in the order of their times;
 *  - the event is written, and pending goes down.
 * A handler that needs a new chunk while the interrupted path holds its
 * slot has its event dropped and counted (a LOST event says how many), as
 * has one that interrupts the C path (record_buffer.c's busy), which the
 * fast path leaves alone.  So the writer never gets a chunk with a slot
 * reserved and unwritten, and a reader needs nothing special.
 *
 * rdtsc, not rdtscp: the event needs the time of the call, not a fence
 * against the instructions before it, and rdtscp waits for all of them
 * (record_buffer.c's C path uses rdtsc too, so both kinds of event agree).
 *
 * TLS: ftpad_record_self is initial-exec, as ftpad_slot already is; when
 * libftpad is dlopened (`ftpad attach`) glibc places both in its surplus
 * static TLS, which has room for a few such variables.
 */
#define SYS_FUTEX 202
#define FUTEX_WAKE_PRIVATE 129

	.macro PUSH_CFI reg
	pushq \reg
	.cfi_adjust_cfa_offset 8
	.endm

	.macro POP_CFI reg
	popq \reg
	.cfi_adjust_cfa_offset -8
	.endm

/* What RECORD uses, around it (48 bytes). */
	.macro SAVE_SCRATCH
	PUSH_CFI %rax
	PUSH_CFI %rdx
	PUSH_CFI %rcx
	PUSH_CFI %rsi
	PUSH_CFI %rdi
	PUSH_CFI %r8
	.endm

	.macro RESTORE_SCRATCH
	POP_CFI %r8
	POP_CFI %rdi
	POP_CFI %rsi
	POP_CFI %rcx
	POP_CFI %rdx
	POP_CFI %rax
	.endm

/* The event of word ecx (plus one) and the stack pointer at spoff(%rsp);
 * to fail when it cannot be written here.  Uses rax rdx rcx rsi rdi r8. */
	.macro RECORD fail, spoff
	subl $1, %ecx
	jb \fail                  /* no id yet */
	movq ftpad_record_self@gottpoff(%rip), %rdi
	movq %fs:(%rdi), %rdi     /* the thread's struct rthread */
	testq %rdi, %rdi
	jz \fail
	cmpl $0, RT_BUSY(%rdi)    /* we interrupted its C path */
	jne \fail
	addl $1, RT_PENDING(%rdi) /* from here its chunk stays */
	cmpl $0, ftpad_record_stopping(%rip)
	jne 93f
	movq RT_CUR(%rdi), %rsi   /* its chunk */
	testq %rsi, %rsi
	jz 93f
92:	movl CH_N(%rsi), %r8d
	cmpl ftpad_record_fast_limit(%rip), %r8d
	jae 93f
	rdtsc
	shlq $32, %rdx
	orq %rax, %rdx            /* the time, read after n */
	movl %r8d, %eax
	addl $1, %r8d
	cmpxchgl %r8d, CH_N(%rsi) /* reserve ev[n], unless a handler wrote since */
95:	jne 92b
	shlq $4, %rax
	movq %rdx, CH_EV(%rsi,%rax)
	movl %ecx, CH_EV+8(%rsi,%rax)
	leaq \spoff(%rsp), %rdx
	movl %edx, CH_EV+12(%rsi,%rax)
	addq $1, RT_FAST(%rdi)
96:	subl $1, RT_PENDING(%rdi)
	/* From 95 (with ZF) to 96: ev[n] is ours, its event not yet counted
	 * (x86_64.c ftpad_arch_record_slot_open()). */
	.pushsection ftpad_record_windows, "aw"
	.balign 8
	.quad 95b, 96b
	.popsection
	jmp 94f
93:	subl $1, RT_PENDING(%rdi)
	jmp \fail
94:
	.endm

/* Out of the dispatch entered on slot r11 (one sub), and the writer waiting
 * for a grace period woken, as ftpad_grace_wake() does, by a futex call
 * made here (no C: the arguments are live).  Uses rax rcx rdx rsi rdi r11,
 * and keeps r8 r9 r10. */
	.macro LEAVE_DISPATCH
	subq $1, (%r11)
	cmpl $0, T_WAITERS(%r11)
	je 91f
	xorl %eax, %eax
	xchgl %eax, T_WAITERS(%r11)
	testl %eax, %eax
	jz 91f
	PUSH_CFI %r8
	PUSH_CFI %r9
	PUSH_CFI %r10
	leaq T_WAITERS(%r11), %rdi
	movl $FUTEX_WAKE_PRIVATE, %esi
	movl $0x7fffffff, %edx
	xorl %r10d, %r10d
	xorl %r8d, %r8d
	xorl %r9d, %r9d
	movl $SYS_FUTEX, %eax
	syscall                   /* errno is not touched: no libc */
	POP_CFI %r10
	POP_CFI %r9
	POP_CFI %r8
91:
	.endm

/* An entry site's fast path, in front of its FAST trampoline: the site is
 * found through its slot, inside a dispatch (the slot may be read only
 * there, patch.c), as the generic path does. */
	.macro LEAN_ENTRY name, endbr, kind, generic
FUNC \name
	.cfi_startproc
	endbr64 /* reached by the stub's indirect jmp */
	SAVE_SCRATCH
	movq ftpad_slot@gottpoff(%rip), %rax
	movq %fs:(%rax), %r11     /* this thread's struct ftpad_thread_slot */
	testq %r11, %r11
	jz 82f
	testl $NOT_FAST, (%r11)
	jnz 82f
	addq $ENTER, (%r11)
	movq 48(%rsp), %rcx       /* site + 5 */
	cmpb $0xe8, -5(%rcx)      /* still a call: the slot is whole */
	jne 81f
	movq -13-\endbr(%rcx), %rcx /* the slot: our struct ftpad_site */
	movq (%rcx), %rax         /* its ops */
	testq %rax, %rax
	jz 81f
	cmpq ftpad_record_fast_ops(%rip), %rax
	jne 81f
	movl SITE_WHAT(%rcx), %ecx
	RECORD 81f, 56            /* sp: at the return address into the caller */
	LEAVE_DISPATCH
	RESTORE_SCRATCH
	ret
	.cfi_adjust_cfa_offset 48
81:	LEAVE_DISPATCH
82:
	RESTORE_SCRATCH
	movl $\kind, %r11d        /* the stub's, for the generic path */
	jmp \generic
	.cfi_endproc
	.size \name, .-\name
	.endm

/* An exit site's fast path: its stub pushed its struct ftpad_site, so
 * [rsp] = &site, [rsp + 8] = site + 5, [rsp + 16] = parent_ip.  No
 * dispatch is entered: nothing here reads a slot, and the site outlives
 * the function returning through it.  The generic exit trampoline gets
 * the same stack, and hands &site to C, which so needs no lookup. */
	.macro LEAN_EXIT name, generic
FUNC \name
	.cfi_startproc
	.cfi_adjust_cfa_offset 8
	endbr64 /* reached by the stub's indirect jmp */
	SAVE_SCRATCH
	PUSH_CFI %r11             /* live: an indirect tail call's target */
	movq ftpad_slot@gottpoff(%rip), %rax
	movq %fs:(%rax), %rax
	testq %rax, %rax
	jz 83f
	testl $NOT_FAST, (%rax)   /* busy, or nested in a callback */
	jnz 83f
	movq 56(%rsp), %rcx       /* &site */
	movq (%rcx), %rax
	testq %rax, %rax
	jz 83f
	cmpq ftpad_record_fast_ops(%rip), %rax
	jne 83f
	movl SITE_WHAT(%rcx), %ecx
	RECORD 83f, 72            /* sp: at the return address, as at the entry */
	POP_CFI %r11
	RESTORE_SCRATCH
	leaq 8(%rsp), %rsp        /* the site's word; the flags stay */
	.cfi_adjust_cfa_offset -8
	ret
	.cfi_adjust_cfa_offset 64
83:	POP_CFI %r11
	RESTORE_SCRATCH
	jmp \generic              /* with the site's word */
	.cfi_endproc
	.size \name, .-\name
	.endm

	SLOTLESS ftpad_trampoline_0, ftpad_trampoline_1, SSE
	FAST ftpad_trampoline_2, 0, 2, SSE
	FAST ftpad_trampoline_3, 4, 3, SSE
	FULL ftpad_trampoline_regs, SSE
	EXIT ftpad_trampoline_exit, SSE
	LEAN_EXIT ftpad_trampoline_exit_site, ftpad_trampoline_exit

	SLOTLESS ftpad_trampoline_avx_0, ftpad_trampoline_avx_1, AVX
	FAST ftpad_trampoline_avx_2, 0, 2, AVX
	FAST ftpad_trampoline_avx_3, 4, 3, AVX
	FULL ftpad_trampoline_avx_regs, AVX
	EXIT ftpad_trampoline_avx_exit, AVX
	LEAN_EXIT ftpad_trampoline_avx_exit_site, ftpad_trampoline_avx_exit

	SLOTLESS ftpad_trampoline_avx512_0, ftpad_trampoline_avx512_1, AVX512
	FAST ftpad_trampoline_avx512_2, 0, 2, AVX512
	FAST ftpad_trampoline_avx512_3, 4, 3, AVX512
	FULL ftpad_trampoline_avx512_regs, AVX512
	EXIT ftpad_trampoline_avx512_exit, AVX512
	LEAN_EXIT ftpad_trampoline_avx512_exit_site, ftpad_trampoline_avx512_exit

	.section .note.GNU-stack, "", @progbits
