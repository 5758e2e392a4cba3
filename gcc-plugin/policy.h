// SPDX-License-Identifier: MIT
// policy.h - which functions get a pad, and how big: the ftpad attribute,
// include/exclude globs on names and sections, an instruction threshold,
// and a JSON-lines report of every decision.  ftpad.cc asks once per
// function, from its decide pass; everything else about policy lives here.
#ifndef FTPAD_POLICY_H
#define FTPAD_POLICY_H

struct function;

// What one function gets.  `before`/`after` are NOP units, as in the record.
struct ftpad_layout {
	bool pad;
	unsigned before;
	unsigned after;
};

// Parse a count argument; defined in ftpad.cc, shared so that every
// argument's error reads the same.
bool ftpad_parse_count(const char *key, const char *value, unsigned lo,
		       unsigned hi, unsigned *out);

// The target's layout facts for the ABI the user chose.
struct ftpad_arch_info;
const ftpad_arch_info &ftpad_target(void);

// Is KEY one of the policy's -fplugin-arg-ftpad-KEY arguments?
bool ftpad_policy_is_argument(const char *key);

// Validate and store a policy argument.  Gives an error naming the argument
// and returns false for a bad value.
bool ftpad_policy_argument(const char *key, const char *value);

// Register the ftpad attribute: call from plugin_init.
void ftpad_policy_register(const char *plugin_name);

// Decide for FN, whose default layout is GLOBAL, and report the decision.
// Runs in the RTL pass after "alignments": the CFG is still there.
ftpad_layout ftpad_policy_decide(function *fn, ftpad_layout global);

#endif
