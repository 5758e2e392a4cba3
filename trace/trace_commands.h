/* SPDX-License-Identifier: MIT */
/*
 * trace_commands.h - what trace/ gives the ftpad command: one entry point
 * per viewer, which cli/ftpad.c's table of subcommands calls.  Each takes
 * argv[0] == its name, parses its own options (and --help), and returns
 * the process's exit status: 2 for a usage error.
 */
#ifndef FTPAD_TRACE_COMMANDS_H
#define FTPAD_TRACE_COMMANDS_H

int trace_cmd_replay(int argc, char **argv);
int trace_cmd_report(int argc, char **argv);
int trace_cmd_dump(int argc, char **argv);
int trace_cmd_live(int argc, char **argv);

/* `ftpad flame [--title T] [--width PX] [--min-width PX] [--folded FILE | DIR]
 * -o OUT.svg`.  Writes OUT.svg through a temporary in the same directory
 * and a rename. */
int trace_cmd_flame(int argc, char **argv);

#endif
