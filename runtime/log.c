/* SPDX-License-Identifier: MIT */
/*
 * log.c - the library's log callback (libbpf's libbpf_set_print() model)
 * and its error strings.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int default_print(enum ftpad_log_level level, const char *fmt, va_list ap)
{
	static int verbose = -1;

	if (verbose < 0) {
		const char *env = getenv("FTPAD_DEBUG");

		verbose = env && *env && strcmp(env, "0");
	}
	if (level != FTPAD_WARN && !verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static ftpad_print_fn_t print_fn = default_print;

/* This thread's warnings go to keep instead (attach.c: to the tool). */
static __thread void (*capture)(const char *text);

void ftpad_log_capture(void (*keep)(const char *text))
{
	capture = keep;
}

ftpad_print_fn_t ftpad_set_print(ftpad_print_fn_t fn)
{
	ftpad_print_fn_t old = print_fn;

	print_fn = fn;
	return old;
}

void ftpad_log(enum ftpad_log_level level, const char *fmt, ...)
{
	ftpad_print_fn_t fn = print_fn;
	va_list ap;

	if (capture && level == FTPAD_WARN) {
		char text[512];

		va_start(ap, fmt);
		vsnprintf(text, sizeof(text), fmt, ap);
		va_end(ap);
		capture(text);
		return;
	}
	if (!fn)
		return;
	va_start(ap, fmt);
	fn(level, fmt, ap);
	va_end(ap);
}

const char *ftpad_strerror(int err)
{
	switch (err < 0 ? -err : err) {
	case EPERM:
	case EACCES:
		return "cannot write code: both /proc/self/mem and mprotect were refused "
		       "(proc_mem.force_override, MDWE, mseal or PaX?)";
	case ERANGE:
		return "no trampoline stub could be mapped within branch range of the code";
	case ENOENT:
		return "no such ops, function or symbol";
	case EBUSY:
		return "the ops is already registered, or another FTPAD_OPS_FL_IPMODIFY ops "
		       "redirects one of its functions";
	case EAGAIN:
		return "a thread blocks the signal that patching needs: SIGTRAP on x86_64, for a "
		       "site that cannot be written without int3; on aarch64, the stop signal for "
		       "a kernel-ABI pad (NOP NOP), whose mov x9, x30 is written while the process "
		       "is single-threaded or, with FTPAD_STOP_THREADS=1, with every other thread "
		       "stopped";
	case EDEADLK:
		return "not allowed from inside a callback";
	default:
		return strerror(err < 0 ? -err : err);
	}
}
