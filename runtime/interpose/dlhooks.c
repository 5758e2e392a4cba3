/* SPDX-License-Identifier: MIT */
/*
 * dlhooks.c - dlopen and dlclose as seen by libftpad.so: the real call, then
 * a rescan of the loaded modules, so that a module loaded while ops are
 * registered is patched at once (even one linked without libftpad), and an
 * unloaded one is forgotten before anything could write to where it was.
 *
 * Only in the shared library, which the program's references (or an
 * LD_PRELOAD) reach before libc's: libftpad.map gives these definitions
 * glibc's version, GLIBC_2.34, so that the versioned references of programs
 * linked against glibc >= 2.34 bind to them.
 *
 * The hooks are a convenience, not what keeps writes safe: a dlclose the
 * hooks miss (one in a callback, where no rescan can be made; a reference
 * to an older glibc version; libftpad.a) is caught by the rescan that
 * every code write makes under dl_iterate_phdr's lock (module.c,
 * ftpad_modules_hold()), which also holds off any unmap while it writes.
 * The static library has no hooks: a definition of dlopen in an archive
 * would clash with libc.a's in a -static link, and RTLD_NEXT finds no
 * libc there.  So with libftpad.a, a module loaded later is read and
 * patched by the next ftpad_* call that reads or changes the sites
 * (register, unregister, set_filter, set_notrace, get_stats; a lookup
 * reads it without patching).
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "internal.h"

typedef void *(*dlopen_fn)(const char *, int);
typedef int (*dlclose_fn)(void *);

FTPAD_API void *dlopen(const char *file, int mode)
{
	static dlopen_fn real;
	void *handle;

	if (!real)
		real = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
	handle = real ? real(file, mode) : NULL;
	if (handle)
		ftpad_modules_changed();
	return handle;
}

FTPAD_API int dlclose(void *handle)
{
	static dlclose_fn real;
	int ret;

	if (!real)
		real = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
	ret = real ? real(handle) : -1;
	ftpad_modules_changed();
	return ret;
}
