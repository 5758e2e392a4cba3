// SPDX-License-Identifier: MIT
// policy.h - the GCC side of the per-function policy: the ftpad attribute,
// and the facts about a function that the core's decision chain
// (plugin-core/decide.c) asks for.  ftpad.cc asks once per function, from
// its decide pass.
#ifndef FTPAD_POLICY_H
#define FTPAD_POLICY_H

#include "core.h"

struct function;

// Register the ftpad attribute, whose limits come from OPTIONS: call from
// plugin_init, after the arguments are parsed.
void ftpad_policy_register(const char *plugin_name, const ftpad_options *options);

// Decide for FN, report the decision, and return whether FN gets a pad;
// *LAYOUT gets its layout.  Runs in the RTL pass after "alignments": the
// CFG is still there.
bool ftpad_policy_decide(function *fn, ftpad_layout *layout);

#endif
