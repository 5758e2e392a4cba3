/* SPDX-License-Identifier: MIT */
/*
 * ftpad.h - the libftpad API: trace calls to padded functions in user space.
 *
 * The model is Linux's ftrace_ops: a caller fills a struct ftpad_ops with a
 * callback, optionally narrows it to some functions with ftpad_set_filter(),
 * and registers it.  Registering patches the selected functions' pads so that
 * each call runs the callback before the function body; unregistering puts
 * the NOPs back.  Conventions follow libbpf: every call is prefixed ftpad_,
 * int-returning calls return 0 or a negative errno, pointer-returning calls
 * return NULL and set errno, and output structs begin with their size.
 *
 * Callbacks and everything they call must tolerate being entered from any
 * thread at any time, including from a signal handler.  A callback may
 * call traced functions: as in Linux, an ops registered without
 * FTPAD_OPS_FL_RECURSION is then called recursively, and protects itself
 * (ftpad_recursion_trylock()) if it must; with the flag, the runtime drops
 * such calls for it.  Calls made while this thread is inside libftpad's own
 * calls (register, filter, lookup) are always dropped.  errno is saved
 * around callbacks, so a traced function finds the errno its caller left.
 * A callback must return: it may not longjmp or throw out of the
 * trampoline, which would leave the thread marked as dispatching forever
 * (and ftpad_unregister_ops() waiting for it).
 *
 * From a callback (or a signal handler that interrupted one), the calls
 * that change what is traced or read the site tables under the library's
 * lock return -EDEADLK at once: ftpad_register_ops(),
 * ftpad_unregister_ops(), ftpad_unregister_ops_timeout(),
 * ftpad_set_filter(), ftpad_set_notrace(), ftpad_get_stats().  Their
 * lock's holder may be waiting for that very callback to return.  All the
 * others work there: the ftpad_regs_*() and ftpad_get_pt_regs() calls
 * (only there), ftpad_recursion_trylock()/_unlock(), the lookups,
 * ftpad_strerror() and ftpad_set_print().  Each call's comment says so.
 *
 * Linking: -lftpad (libftpad.so), or LD_PRELOAD=libftpad.so, or the static
 * libftpad.a.  The built-in tracer (FTPAD_FILTER, FTPAD_OUTPUT) starts from
 * a constructor; a static link that calls no ftpad_* function must pull it
 * in with -Wl,--undefined=ftpad_register_ops or
 * -Wl,--whole-archive -lftpad -Wl,--no-whole-archive.
 */
#ifndef FTPAD_H
#define FTPAD_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FTPAD_API __attribute__((visibility("default")))

/* The argument registers saved at a function entry (opaque). */
struct ftpad_regs;
struct ftpad_ops;

/*
 * ip:        the entry address of the traced function (its symbol value);
 * parent_ip: the return address into its caller;
 * ops:       the ops that was registered, so ops->private reaches its state;
 * regs:      the function's arguments (at an exit: its return value),
 *            valid only during the call.
 */
typedef void (*ftpad_func_t)(unsigned long ip, unsigned long parent_ip,
			     struct ftpad_ops *ops, struct ftpad_regs *regs);

/* struct ftpad_ops.flags.  ENABLED is set by the runtime, read-only. */
#define FTPAD_OPS_FL_ENABLED (1ul << 0) /* registered and patched in */
/* The callback may redirect the function with ftpad_regs_set_ip().  Only
 * one IPMODIFY ops may trace a given function. */
#define FTPAD_OPS_FL_IPMODIFY (1ul << 1)
/*
 * As Linux's FTRACE_OPS_FL_RECURSION (since 5.11): the ops asks the runtime
 * to protect its callback from recursion.  While a callback of any ops with
 * this flag runs on a thread (and in signal handlers that interrupt it),
 * calls that would reach an ops with this flag on that thread are dropped.
 * Without the flag the callback is called for every traced call, including
 * the ones it makes itself, and must handle recursion on its own (see
 * ftpad_recursion_trylock(), which shares the same per-thread guard).
 * Unlike Linux, which keeps one guard per context (task, softirq, irq,
 * NMI), a signal handler that interrupts a protected callback counts as
 * recursion: user space cannot tell the two apart cheaply.
 */
#define FTPAD_OPS_FL_RECURSION (1ul << 2)
/*
 * As Linux's FTRACE_OPS_FL_SAVE_REGS: sites this ops traces go through a
 * trampoline that saves every general register and the flags, so that
 * ftpad_get_pt_regs() returns them to the callback, and restores them all
 * from there afterwards: the callback may change any of them (except the
 * stack pointer).  Slower; without it only the argument registers are
 * saved.  A function traced by several ops takes the full save as soon as
 * one of them asks for it.
 */
#define FTPAD_OPS_FL_SAVE_REGS (1ul << 3)

/*
 * func is called at the entry of every function the ops traces, exit_func
 * (as Linux's fprobe exit handler) at each of its exits: in front of every
 * return and every tail call's jump, where the compiler made exit sites
 * (the plugins' exit=1).  Either may be NULL, not both.  exit_func gets the
 * same ip (the function's entry) and parent_ip (the return address into
 * its caller) as func, and the return value through
 * ftpad_regs_get_return_value() and ftpad_regs_return_reg(); it cannot
 * change where the function returns (ftpad_regs_set_ip() returns -EPERM
 * there).  Functions whose objects have no exit sites only ever call func
 * (ftpad_lookup_entries_only()).  Since version 1 of the library
 * (libftpad.so.1), which added exit_func.
 */
struct ftpad_ops {
	ftpad_func_t func;
	ftpad_func_t exit_func;
	unsigned long flags;
#ifdef __cplusplus
	void *private_; /* `private` in C, as in Linux; a keyword in C++ */
#else
	void *private;
#endif
	/* Internal state of the runtime: zero-initialise, never touch. */
	struct {
		struct ftpad_ops *next;
		void *filter;
		void *entries;
		void *notrace;
		ftpad_func_t call; /* what the trampoline calls: func or an assist */
		unsigned long reserved[3];
	} internal;
};

/*
 * Every register of the traced function at its entry, for callbacks of ops
 * registered with FTPAD_OPS_FL_SAVE_REGS (ftpad_get_pt_regs()).  The layout
 * follows Linux's struct pt_regs in spirit: the general registers, then
 * where execution continues, the flags and the stack pointer.
 */
#if defined(__x86_64__)
struct ftpad_pt_regs {
	unsigned long r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8;
	unsigned long rax, rcx, rdx, rsi, rdi;
	unsigned long rip;    /* where the function continues (after its pad) */
	unsigned long eflags; /* saved and restored only with SAVE_REGS */
	unsigned long rsp;    /* at the function's entry, pointing at parent_ip; read-only */
};
#elif defined(__aarch64__)
struct ftpad_pt_regs {
	unsigned long regs[31]; /* x0-x30; x30 (and x9) hold the caller's return address */
	unsigned long sp;       /* at the function's entry; read-only */
	unsigned long pc;       /* where the function continues (after its pad) */
	unsigned long pstate;   /* NZCV, saved and restored only with SAVE_REGS */
};
#endif

/**
 * @brief **ftpad_register_ops()** starts calling ops->func at every
 * function selected by the ops' filter (all padded functions when it has
 * none) in every module loaded so far.
 *
 * The ops must stay valid, and unchanged apart from ->private, until after
 * ftpad_unregister_ops() returns.  Several ops may trace the same function;
 * each is called once per call, in registration order.
 *
 * Thread safety: may be called from any thread while other threads run
 * the functions being patched (the int3 protocol with membarrier SYNC_CORE
 * on x86_64, a single-instruction NOP/BL write on aarch64; a SIGTRAP
 * handler is installed at the first x86_64 patch and chains to the one
 * installed before it; while another thread blocks SIGTRAP, x86_64
 * writes without int3, see docs/runtime.md).  Register, unregister and
 * filter calls are serialised by one lock.  In a callback: -EDEADLK.
 * Async-signal-unsafe: it takes a lock and allocates memory.
 *
 * The first call (of any ftpad_* call that needs them) reads the site
 * tables of the loaded modules; nothing is read or written at load time.
 * A module whose table cannot be read (a malformed or newer table, or the
 * program's own file not found: no /proc, and the path it was started by
 * leads elsewhere) is left out with a warning through the log callback;
 * the call still returns 0 for the others.
 *
 * @return 0; -EINVAL for a NULL ops, neither func nor exit_func, or unknown flags; -EBUSY if the
 * ops is already registered, or if it has FTPAD_OPS_FL_IPMODIFY and another
 * registered IPMODIFY ops traces one of its functions; -EDEADLK from a
 * callback; -ENOMEM; -EPERM or -EACCES when the text cannot be written
 * (see ftpad_strerror()); -ERANGE when no trampoline stub can be mapped
 * within reach of a module's text; -EAGAIN when a selected function has a
 * kernel-ABI pad (aarch64 NOP NOP) not yet prepared and other threads
 * run: its `mov x9, x30` is written only while the process is
 * single-threaded, or, with FTPAD_STOP_THREADS=1 in the environment, with
 * every other thread stopped by SIGRTMAX - 4, and one could not be
 * stopped (it blocks that signal; see docs/runtime.md), or -ENOENT when
 * the threads cannot be listed (no /proc/self/task); -EAGAIN on x86_64
 * when another thread blocks SIGTRAP (so would be killed by the int3 of
 * the patch protocol) and the code cannot be written without int3
 * (FTPAD_TEXT_WRITE=procmem, or mprotect refused).  On error
 * nothing is left registered and the text is as before (such MOVs
 * excepted, which are harmless), and, as after ftpad_unregister_ops(), no
 * callback of ops is running or will run: sites enabled before the
 * failure may have called it, and the error is returned only after a
 * grace period, so the ops may be freed at once.
 */
FTPAD_API int ftpad_register_ops(struct ftpad_ops *ops);

/**
 * @brief **ftpad_unregister_ops()** stops tracing for ops and restores the
 * original NOPs of every function no other ops traces.
 *
 * When it returns 0, no thread is running ops->func any more and none will
 * call it again: it waits for a grace period, until every thread that was
 * inside a callback (of any ops) when the sites were switched off has left
 * it.  So it waits while a callback blocks (asleep: after a few yields it
 * sleeps on a futex that the callback's thread wakes as it leaves; see
 * ftpad_unregister_ops_timeout() to bound the wait), and the ops and its
 * private data may be freed or reused as soon as it returns.  In a
 * callback: -EDEADLK (it would wait for itself).
 *
 * @return 0; -EINVAL for NULL; -ENOENT if ops is not registered; -EDEADLK
 * from a callback; the text write errors of ftpad_register_ops().
 */
FTPAD_API int ftpad_unregister_ops(struct ftpad_ops *ops);

/**
 * @brief **ftpad_unregister_ops_timeout()** is ftpad_unregister_ops() that
 * waits at most timeout_ms milliseconds (for the library's lock, held by
 * another thread's call, and for the callbacks in flight), or without
 * limit when timeout_ms is negative.
 *
 * When the time passes, the ops is put back: it stays registered, its
 * sites call it again (calls made in between were not traced), and it
 * must stay valid; a later unregister works as usual.  A callback that
 * never returns thus cannot hang the caller, nor can one that blocks
 * longer than the caller is willing to wait.
 *
 * @return as ftpad_unregister_ops(), or -ETIMEDOUT: still registered.
 */
FTPAD_API int ftpad_unregister_ops_timeout(struct ftpad_ops *ops, long timeout_ms);

/**
 * @brief **ftpad_set_filter()** selects the functions ops traces by name.
 *
 * @param globs comma-separated shell globs (fnmatch(3): *, ?, [...]) on
 * the functions' names, e.g. "parse_*,main"; blanks around commas are
 * ignored.  Names are as the compiler emitted them (C++ names mangled).
 * @param reset non-zero: replace the current filter; zero: add to it.
 *
 * An ops with an empty filter (the initial state, or reset with "") traces
 * every padded function.  Calling this on a registered ops re-patches.
 * In a callback: -EDEADLK.
 *
 * @return 0; -EINVAL for NULL arguments; -ENOMEM; -EDEADLK from a
 * callback; the text write errors of ftpad_register_ops() when the ops is
 * registered.
 */
FTPAD_API int ftpad_set_filter(struct ftpad_ops *ops, const char *globs, int reset);

/**
 * @brief **ftpad_set_notrace()** excludes functions from ops by name, with
 * globs as ftpad_set_filter() takes them.  A function matching the notrace
 * list is not traced even when the filter selects it, as in ftrace.
 *
 * @return as ftpad_set_filter().
 */
FTPAD_API int ftpad_set_notrace(struct ftpad_ops *ops, const char *globs, int reset);

/**
 * @brief **ftpad_regs_get_argument()** returns the n-th integer or pointer
 * argument (from 0) of the traced function.  Arguments past the register
 * ones are read from the caller's stack, so n must be below the number of
 * integer-class arguments the function really has.  Only valid inside the
 * callback that received regs (as are all the ftpad_regs_*() calls).
 */
FTPAD_API unsigned long ftpad_regs_get_argument(struct ftpad_regs *regs, unsigned int n);

/**
 * @brief **ftpad_regs_set_argument()** replaces the n-th integer or pointer
 * argument: the traced function (or the one it is redirected to) receives
 * val.  The same limits as ftpad_regs_get_argument() apply.
 */
FTPAD_API void ftpad_regs_set_argument(struct ftpad_regs *regs, unsigned int n,
				       unsigned long val);

/**
 * @brief **ftpad_regs_get_return_value()** returns, in an exit callback,
 * the integer or pointer the function returns (rax, x0); 0 elsewhere.  At a
 * tail exit the function returns what the function it jumps to will: the
 * register holds nothing yet.
 */
FTPAD_API unsigned long ftpad_regs_get_return_value(struct ftpad_regs *regs);

/**
 * @brief **ftpad_regs_set_return_value()** makes the function return val
 * (rax, x0) instead, from an exit callback (not a tail exit's).
 * @return 0; -EINVAL for NULL regs, or outside an exit callback.
 */
FTPAD_API int ftpad_regs_set_return_value(struct ftpad_regs *regs, unsigned long val);

/* The registers a return value may be in, for ftpad_regs_return_reg(). */
enum ftpad_return_reg {
	FTPAD_RET_INT0,  /* rax, x0: integers, pointers, a struct's first eightbyte */
	FTPAD_RET_INT1,  /* rdx, x1: the second eightbyte */
	FTPAD_RET_VEC0,  /* xmm0, q0 (16 bytes): double, float, aarch64's long double */
	FTPAD_RET_VEC1,  /* xmm1, q1 */
	FTPAD_RET_X87_0, /* x86_64: st(0) as 10 bytes (long double), */
	FTPAD_RET_X87_1, /* ... st(1) (the imaginary part of a complex long double) */
};

/**
 * @brief **ftpad_regs_return_reg()** points, in an exit callback, at the
 * saved bytes of a register the return value may be in (16 of a vector
 * register, 10 of an x87 one, 8 of a general one); the callback may change
 * them, and the function returns what they then hold.  Which registers
 * hold the value depends on its type, as the psABI says.
 * @return the bytes, or NULL outside an exit callback, for a register the
 * machine does not have, or for an x87 register that was empty.
 */
FTPAD_API void *ftpad_regs_return_reg(struct ftpad_regs *regs, enum ftpad_return_reg r);

/**
 * @brief **ftpad_regs_get_stack_pointer()** returns the stack pointer at the
 * traced function's entry (on x86_64 it points at parent_ip).
 */
FTPAD_API unsigned long ftpad_regs_get_stack_pointer(struct ftpad_regs *regs);

/**
 * @brief **ftpad_regs_set_ip()** makes the call continue at ip instead of
 * the traced function's body, with the arguments and stack of the entry:
 * ip runs as if the caller had called it, and returns to the caller.  Use
 * it to replace a function with another of the same signature (live
 * patching).  Several IPMODIFY calls in one dispatch: the last one wins.
 *
 * @return 0; -EINVAL for NULL regs or ip 0; -EPERM unless called from the
 * callback of an ops registered with FTPAD_OPS_FL_IPMODIFY, and always
 * from an exit callback: where a function returns is not the tracer's to
 * change (nothing is written, the function returns to its caller).
 */
FTPAD_API int ftpad_regs_set_ip(struct ftpad_regs *regs, unsigned long ip);

/**
 * @brief **ftpad_get_pt_regs()** returns every register of the traced
 * function as it was at its entry, or NULL unless the site went through
 * the full save of FTPAD_OPS_FL_SAVE_REGS (as Linux's ftrace_get_regs()),
 * and always NULL in an exit callback.
 * The callback may change the registers; the trampoline restores them all
 * from there (rsp/sp excepted).  Changing rip/pc is a redirect: use
 * ftpad_regs_set_ip(), which checks FTPAD_OPS_FL_IPMODIFY.  Only valid
 * inside the callback that received regs.
 */
FTPAD_API struct ftpad_pt_regs *ftpad_get_pt_regs(struct ftpad_regs *regs);

/**
 * @brief **ftpad_recursion_trylock()** is for callbacks of ops without
 * FTPAD_OPS_FL_RECURSION that call traced functions: it takes this
 * thread's recursion guard, the one FTPAD_OPS_FL_RECURSION uses (Linux's
 * ftrace_test_recursion_trylock()).  Async-signal-safe, never blocks,
 * never allocates; works in callbacks and outside them.
 *
 * @return 0, and the caller must call ftpad_recursion_unlock() before it
 * returns; -EBUSY when the guard is already held on this thread (the
 * caller is recursing: it should return at once); -ENOMEM when no
 * per-thread state could be set up.
 */
FTPAD_API int ftpad_recursion_trylock(void);

/** @brief **ftpad_recursion_unlock()** releases what ftpad_recursion_trylock() took. */
FTPAD_API void ftpad_recursion_unlock(void);

/**
 * @brief **ftpad_lookup_name()** returns the name of the function whose entry
 * is ip (a site's name from its record or symbol table, else any FUNC symbol
 * with that value), or NULL with errno = ENOENT.  The string lives as long as
 * the module.  Callable from callbacks.  The first call for a module whose
 * records have no names reads its symbol table under a lock, and is
 * therefore not async-signal-safe; with named records (the GCC plugin's) it
 * takes no lock.  An ip that no module read so far holds makes it read the
 * modules loaded since (no other call needed before; nothing is patched),
 * under libftpad's lock: in a callback, or inside another ftpad call, that
 * lock is only tried, and the answer is NULL if it is busy.  Not
 * async-signal-safe then either, nor callable from a dl_iterate_phdr
 * callback.
 */
FTPAD_API const char *ftpad_lookup_name(unsigned long ip);

/**
 * @brief **ftpad_lookup_entries_only()** tells whether the padded function
 * whose entry is ip has entries only: no exit site (its object was built
 * without the plugins' exit=1, with plain -fpatchable-function-entry,
 * -pg, recordmcount-ng...), so an exit callback is never called for it.
 * Callable from callbacks, like ftpad_lookup_name().
 *
 * @return 1 (entries only), 0 (it has exit sites), or -ENOENT when no
 * padded function starts at ip.
 */
FTPAD_API int ftpad_lookup_entries_only(unsigned long ip);

/**
 * @brief **ftpad_lookup_symbol()** formats any code address as "func+0xoff"
 * ("func" when off is 0), or as "0x..." when no symbol covers it.
 * Callable from callbacks, like ftpad_lookup_name() (and it may also call
 * dladdr(3), which takes the dynamic loader's lock: not async-signal-safe).
 *
 * @return the length of the full string, as snprintf(3) does (the output is
 * truncated to size-1 characters and NUL-terminated when size > 0), or
 * -EINVAL when buf is NULL and size is not 0.
 */
FTPAD_API int ftpad_lookup_symbol(unsigned long addr, char *buf, size_t size);

/**
 * @brief **ftpad_strerror()** describes a negative (or positive) errno
 * returned by this library; text write failures get ftpad's own wording.
 * The string is static.  Works anywhere, callbacks included.
 */
FTPAD_API const char *ftpad_strerror(int err);

struct ftpad_stats {
	size_t sz;               /* sizeof(struct ftpad_stats), set by the caller */
	unsigned long modules;   /* loaded modules with at least one valid site */
	unsigned long sites;     /* valid sites in them (rejected ones excluded) */
	unsigned long enabled;   /* sites currently patched to call a trampoline */
	unsigned long traps;     /* calls that hit a site mid-patch and were emulated */
	/* Per-thread dispatch state held (64 bytes each), in use or free: it
	 * grows with the threads that dispatch at the same time, not with all
	 * that ever did (the slots of threads gone are reused). */
	unsigned long thread_slots;
	/* Since libftpad.so.1: */
	unsigned long exit_sites;    /* valid exit sites (not in sites) */
	unsigned long exits_enabled; /* of which patched to call a trampoline */
	unsigned long entries_only;  /* functions with an entry site and no exit site */
};

/**
 * @brief **ftpad_get_stats()** fills st with as many fields as st->sz covers.
 * Modules loaded since the last call are read first and patched for the
 * registered ops, as by every call that changes the sites.  It takes the
 * library's lock, so in a callback it returns -EDEADLK.
 * @return 0, -EINVAL when st is NULL or st->sz is smaller than sz itself,
 * or -EDEADLK from a callback.
 */
FTPAD_API int ftpad_get_stats(struct ftpad_stats *st);

/**
 * @brief **ftpad_attach_start()** starts a recording session inside this
 * process, as `ftpad attach` asks for it through its loader stub (see
 * docs/design.md, "Attaching to a running process").  request: settings
 * "NAME=VALUE", each ended by a NUL, the list ended by an empty one:
 * FTPAD_ATTACH_SOCKET (required: the abstract socket's name, without its
 * leading NUL), FTPAD_RECORD (required: an absolute path), FTPAD_RECORD_EXITS
 * (0 or 1, default 1), FTPAD_RECORD_FILTER, FTPAD_RECORD_NOTRACE,
 * FTPAD_RECORD_SIZE, FTPAD_RECORD_CHUNK, FTPAD_RECORD_CHUNKS,
 * FTPAD_RECORD_DEPTH, FTPAD_RECORD_TIME_FILTER; they replace the
 * environment's for the session.  A request with FTPAD_PATCH_OP instead
 * (apply, revert or list; with FTPAD_PATCH_FILE, absolute, and
 * FTPAD_PATCH_CHECK) is `ftpad patch`'s: a patch session beside any
 * recording one, which ftpad_record.h and docs/livepatch.md describe.  The request is copied and a control
 * thread does the rest, so the call returns at once and patches nothing on
 * the calling thread, whose signal mask it leaves alone.  It takes no lock
 * of libftpad's and calls no malloc of its own, but pthread_create() does
 * (the thread's stack and TLS): the thread it runs on must not be inside
 * malloc or pthread_create/exit.  The control thread answers on the socket:
 * "started sites=N enabled=M", or "error ERRNO MESSAGE" (ERRNO positive,
 * MESSAGE what libftpad would have logged), then, after "stop" or end of
 * file, "stopped events=E dropped=D bytes=B"; a new session may start as
 * soon as that line is sent (docs/runtime.md "Attach sessions").
 *
 * @return 0, -EBUSY when this process already records (a session, or
 * FTPAD_RECORD at start-up), -EINVAL for a malformed request (a name not
 * listed above or given twice, an entry without '=', a required one
 * missing, a relative FTPAD_RECORD, a socket name too long for sun_path),
 * -ENOMEM, or pthread_create()'s error, negated.
 */
FTPAD_API int ftpad_attach_start(const char *request);

/**
 * @brief **ftpad_patch_apply()** applies the live patch at path (a shared
 * object written with ftpad_patch.h; docs/livepatch.md): it is dlopened,
 * every name it uses is resolved in the padded modules (static symbols
 * too), and each function it replaces switches to its replacement by a
 * direct jump written into its pad.  Each function switches atomically,
 * not the patch as a whole: `ftpad patch` adds the check that no thread
 * runs a replaced function.  Nothing is switched when a name is missing,
 * a replaced function has no pad, or a tracer's ops traces one (a
 * live-patched function is not traced until it is reverted).  A second
 * patch of a function replaces the first; reverting it brings the first
 * back.  Not from a callback.  Since libftpad.so.1.2.
 *
 * @return 0, or a negative errno with a message in err[errlen] (may be
 * NULL): -EEXIST when this patch is applied already, -ENOENT for a name
 * that resolves nowhere, -ENOTSUP for a function without a pad, -EBUSY
 * for a traced one, -ENOEXEC when dlopen fails, -ERANGE, -EAGAIN (a
 * thread blocks SIGTRAP and the code cannot be written without int3),
 * -EOPNOTSUPP on aarch64, the text write errors.
 */
FTPAD_API int ftpad_patch_apply(const char *path, char *err, size_t errlen);

/**
 * @brief **ftpad_patch_revert()** puts the functions a patch replaced back
 * (the NOP byte for byte, or the patch that was below it).  The patch stays
 * loaded: without stopping the threads nothing says none is still in it.
 * @return 0, -ENOENT when it is not applied, or as ftpad_patch_apply().
 */
FTPAD_API int ftpad_patch_revert(const char *path, char *err, size_t errlen);

enum ftpad_log_level { FTPAD_WARN, FTPAD_INFO, FTPAD_DEBUG };
typedef int (*ftpad_print_fn_t)(enum ftpad_log_level level, const char *fmt, va_list ap);

/**
 * @brief **ftpad_set_print()** replaces the log callback and returns the old
 * one; NULL silences the library.  The default prints warnings to stderr
 * (all levels with FTPAD_DEBUG=1 in the environment).  Not thread-safe with
 * respect to concurrent logging: call it before registering ops.  It only
 * stores the pointer, so it works in a callback too.
 */
FTPAD_API ftpad_print_fn_t ftpad_set_print(ftpad_print_fn_t fn);

#ifdef __cplusplus
}
#endif

#endif /* FTPAD_H */
