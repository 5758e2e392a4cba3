/* SPDX-License-Identifier: MIT */
/*
 * commands.h - the ftpad command's own subcommands, which ftpad.c's table
 * calls beside the viewers (trace/trace_commands.h).  Each takes argv[0]
 * == its name, parses its own options (and --help), and returns the
 * process's exit status: 2 for a usage error (tracedir.h's usage_error()).
 */
#ifndef FTPAD_CLI_COMMANDS_H
#define FTPAD_CLI_COMMANDS_H

/* record.c: `ftpad record`, `record --text`, and `record -p PID` (which
 * is cmd_attach()). */
int cmd_record(int argc, char **argv);

/* attach.c: `ftpad attach PID`; where attach has no port (no
 * arch/attach_<arch>.c), ftpad.c's refusal. */
int cmd_attach(int argc, char **argv);

/* snapshot.c: `ftpad snapshot PID|DIR`, the ring of a --ring recording
 * written while it goes on. */
int cmd_snapshot(int argc, char **argv);

/* patch.c: `ftpad patch PID PATCH.so`; where it is not built (no x86_64
 * or no libdw), ftpad.c's refusal. */
int cmd_patch(int argc, char **argv);

#endif
