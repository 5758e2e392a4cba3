/* SPDX-License-Identifier: MIT */
/*
 * ftpad_patch.h - writing a live patch for `ftpad patch PID PATCH.so`
 * (docs/livepatch.md).  A patch is a shared object built from C or C++
 * with this header.  At file scope,
 *
 *     FTPAD_REPLACE(old_name, new_function);
 *
 * says that calls to the target's function old_name (a bare identifier:
 * its symbol, which may be static in the target and need not be declared
 * here) run new_function instead, which must have the same signature.
 * Inside the patch's code,
 *
 *     FTPAD_SYMBOL(name)
 *
 * is a void * expression: the address in the target of its symbol name
 * (a function or variable, global or static), resolved by the applier
 * before any function is switched.  A name that does not resolve makes
 * the whole patch refused.  Both expand to records in two sections of
 * the patch (ftpad_patch, ftpad_patch_sym) that libftpad reads after
 * dlopen; nothing runs at load time, and the patch needs no link against
 * the target.  Names are the symbols' as the compiler emitted them (C++
 * functions of the target: their mangled names).
 */
#ifndef FTPAD_PATCH_H
#define FTPAD_PATCH_H

/* One FTPAD_REPLACE: the target's function by name, and its replacement. */
struct ftpad_patch_replace {
	const char *name;
	void *func;
};

/* One FTPAD_SYMBOL use: filled with the symbol's address by the applier. */
struct ftpad_patch_symbol {
	const char *name;
	void *addr;
};

#define FTPAD_PATCH_SECTION "ftpad_patch"
#define FTPAD_PATCH_SYM_SECTION "ftpad_patch_sym"

#define FTPAD_PATCH_CAT2(a, b) a##b
#define FTPAD_PATCH_CAT(a, b) FTPAD_PATCH_CAT2(a, b)

/* Writable, aligned records: their pointers are relocated at dlopen. */
#define FTPAD_REPLACE(old, new)                                                         \
	__attribute__((used, section(FTPAD_PATCH_SECTION), aligned(8))) static struct   \
		ftpad_patch_replace FTPAD_PATCH_CAT(ftpad_patch_replace_, __COUNTER__) = { \
			#old, (void *)(new)                                              \
		}

/* A slot per use; the read is volatile, since nothing the compiler sees
 * writes the slot (the applier does, before the patch can run). */
#define FTPAD_SYMBOL(name)                                                              \
	(__extension__({                                                                \
		__attribute__((used, section(FTPAD_PATCH_SYM_SECTION),                  \
			       aligned(8))) static struct ftpad_patch_symbol            \
			ftpad_patch_symbol_slot = { #name, 0 };                         \
		*(void *volatile *)&ftpad_patch_symbol_slot.addr;                       \
	}))

#endif
