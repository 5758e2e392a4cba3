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
 * thread at any time, including from a signal handler.  A per-thread guard
 * drops calls made while a callback of the same thread is running (also
 * from a signal handler interrupting it), so a callback may call traced
 * functions without recursing.  This is Linux's FTRACE_OPS_FL_RECURSION
 * protection, given to every ops.  errno is saved around callbacks.
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
 * regs:      the function's arguments, valid only during the call.
 */
typedef void (*ftpad_func_t)(unsigned long ip, unsigned long parent_ip,
			     struct ftpad_ops *ops, struct ftpad_regs *regs);

/* struct ftpad_ops.flags.  ENABLED is set by the runtime, read-only. */
#define FTPAD_OPS_FL_ENABLED (1ul << 0) /* registered and patched in */
/* The callback may redirect the function with ftpad_regs_set_ip().  Only
 * one IPMODIFY ops may trace a given function. */
#define FTPAD_OPS_FL_IPMODIFY (1ul << 1)
/* As in Linux: the runtime protects the callback from recursion.  ftpad
 * always does, for every ops (see above), so this flag is accepted and
 * changes nothing; an ops without it must not rely on seeing recursive
 * calls either. */
#define FTPAD_OPS_FL_RECURSION (1ul << 2)

struct ftpad_ops {
	ftpad_func_t func;
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
		unsigned long reserved[4];
	} internal;
};

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
 * the functions being patched (the int3 protocol with membarrier SYNC_CORE;
 * a SIGTRAP handler is installed at the first patch and chains to the one
 * installed before it).  Register, unregister and filter calls are
 * serialised by one lock.  Not from inside a callback (-EDEADLK).
 *
 * @return 0; -EINVAL for a NULL ops or func or unknown flags; -EBUSY if the
 * ops is already registered, or if it has FTPAD_OPS_FL_IPMODIFY and another
 * registered IPMODIFY ops traces one of its functions; -EDEADLK from a
 * callback; -ENOMEM; -EPERM or -EACCES when the text
 * cannot be written (see ftpad_strerror()); -ERANGE when no trampoline
 * stub can be mapped within reach of a module's text.  On error nothing is
 * left registered and the text is as before.
 */
FTPAD_API int ftpad_register_ops(struct ftpad_ops *ops);

/**
 * @brief **ftpad_unregister_ops()** stops tracing for ops and restores the
 * original NOPs of every function no other ops traces.
 *
 * When it returns 0, no thread is running ops->func any more and none will
 * call it again: it waits for a grace period, until every thread that was
 * inside a callback (of any ops) when the sites were switched off has left
 * it.  So it blocks while a callback blocks, and the ops and its private
 * data may be freed or reused as soon as it returns.  The calling thread
 * itself must not be inside a callback (-EDEADLK).
 *
 * @return 0; -EINVAL for NULL; -ENOENT if ops is not registered; -EDEADLK
 * from a callback; the text write errors of ftpad_register_ops().
 */
FTPAD_API int ftpad_unregister_ops(struct ftpad_ops *ops);

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
 *
 * @return 0; -EINVAL for NULL arguments; -ENOMEM; the text write errors of
 * ftpad_register_ops() when the ops is registered.
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
 * callback that received regs.
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
 * callback of an ops registered with FTPAD_OPS_FL_IPMODIFY.
 */
FTPAD_API int ftpad_regs_set_ip(struct ftpad_regs *regs, unsigned long ip);

/**
 * @brief **ftpad_lookup_name()** returns the name of the function whose entry
 * is ip (a site's name from its record or symbol table, else any FUNC symbol
 * with that value), or NULL with errno = ENOENT.  The string lives as long as
 * the module.  The first call for a module without a site table reads its
 * symbol table and is therefore not async-signal-safe.
 */
FTPAD_API const char *ftpad_lookup_name(unsigned long ip);

/**
 * @brief **ftpad_lookup_symbol()** formats any code address as "func+0xoff"
 * ("func" when off is 0), or as "0x..." when no symbol covers it.
 *
 * @return the length of the full string, as snprintf(3) does (the output is
 * truncated to size-1 characters and NUL-terminated when size > 0), or
 * -EINVAL when buf is NULL and size is not 0.
 */
FTPAD_API int ftpad_lookup_symbol(unsigned long addr, char *buf, size_t size);

/**
 * @brief **ftpad_strerror()** describes a negative (or positive) errno
 * returned by this library; text write failures get ftpad's own wording.
 * The string is static.
 */
FTPAD_API const char *ftpad_strerror(int err);

struct ftpad_stats {
	size_t sz;               /* sizeof(struct ftpad_stats), set by the caller */
	unsigned long modules;   /* loaded modules with at least one valid site */
	unsigned long sites;     /* valid sites in them (rejected ones excluded) */
	unsigned long enabled;   /* sites currently patched to call a trampoline */
	unsigned long traps;     /* calls that hit a site mid-patch and were emulated */
};

/**
 * @brief **ftpad_get_stats()** fills st with as many fields as st->sz covers.
 * @return 0, or -EINVAL when st is NULL or st->sz is smaller than sz itself.
 */
FTPAD_API int ftpad_get_stats(struct ftpad_stats *st);

enum ftpad_log_level { FTPAD_WARN, FTPAD_INFO, FTPAD_DEBUG };
typedef int (*ftpad_print_fn_t)(enum ftpad_log_level level, const char *fmt, va_list ap);

/**
 * @brief **ftpad_set_print()** replaces the log callback and returns the old
 * one; NULL silences the library.  The default prints warnings to stderr
 * (all levels with FTPAD_DEBUG=1 in the environment).  Not thread-safe with
 * respect to concurrent logging: call it before registering ops.
 */
FTPAD_API ftpad_print_fn_t ftpad_set_print(ftpad_print_fn_t fn);

#ifdef __cplusplus
}
#endif

#endif /* FTPAD_H */
