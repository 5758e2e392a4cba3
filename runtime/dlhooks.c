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
 * linked against glibc >= 2.34 bind to them.  The static library has no
 * hooks; there, new modules are found by the next ftpad_* call.
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
