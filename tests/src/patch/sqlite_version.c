/* SPDX-License-Identifier: MIT */
/*
 * A live patch of SQLite's shell (tests/attach/test_patch_sqlite.py), as
 * a fix would be written: it replaces a static function of the
 * amalgamation, versionFunc() (SQL's sqlite_version()), and calls the
 * target's own sqlite3_libversion() and sqlite3_result_text() through
 * FTPAD_SYMBOL, with no header of SQLite's and no link against it.
 */
#include <stdio.h>

#include <ftpad_patch.h>

struct sqlite3_context;
struct sqlite3_value;

typedef const char *libversion_fn(void);
typedef void result_text_fn(struct sqlite3_context *, const char *, int, void (*)(void *));

/* SQLITE_TRANSIENT: SQLite copies the text. */
#define TRANSIENT ((void (*)(void *))-1)

static void version_patched(struct sqlite3_context *context, int argc, struct sqlite3_value **argv)
{
	libversion_fn *libversion = (libversion_fn *)FTPAD_SYMBOL(sqlite3_libversion);
	result_text_fn *result_text = (result_text_fn *)FTPAD_SYMBOL(sqlite3_result_text);
	char text[64];

	(void)argc, (void)argv;
	snprintf(text, sizeof(text), "%s (patched)", libversion());
	result_text(context, text, -1, TRANSIENT);
}

FTPAD_REPLACE(versionFunc, version_patched);
