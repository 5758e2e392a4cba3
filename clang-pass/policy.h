// SPDX-License-Identifier: MIT
// policy.h - which functions get a pad, the report of each decision, and
// the policy file.
#ifndef FTPAD_CLANG_POLICY_H
#define FTPAD_CLANG_POLICY_H

#include "ftpad-clang.h"

#include <string>
#include <vector>

namespace llvm {
class Function;
class TargetTransformInfo;
}

// What min-insns looks at: an estimate of F's machine instructions and
// whether its control-flow graph has a cycle.
struct FtpadSize {
	unsigned insns;
	bool loop;
};

// The estimate: LLVM's own code-size cost of each IR instruction for the
// target (TargetTransformInfo, TCK_CodeSize: 0 for what folds away, such as
// most casts and address arithmetic), debug intrinsics, lifetime markers
// and PHIs left out.  The pass runs before instruction selection, and LLVM
// 14 gives a plugin no hook in CodeGen to count the real ones.
FtpadSize ftpad_estimate(const llvm::Function &F, const llvm::TargetTransformInfo &tti);

struct FtpadDecision {
	bool pad;
	std::string reason;  // as in docs/gcc-plugin.md "The report"
	FtpadLayout layout;  // {0, 0} when skipped
};

// docs/clang-pass.md "Which functions get a pad", first match wins.  F is
// a function the module defines and emits.
FtpadDecision ftpad_decide(const llvm::Function &F, const FtpadConfig &c, const FtpadSize &size);

// Does F carry "patchable-function-entry"/"-prefix" from
// -fpatchable-function-entry= on the command line (not from a user's
// attribute, which the frontend reports as a skip)?
bool ftpad_has_command_line_entry(const llvm::Function &F, const FtpadConfig &c);

// Appends one JSON line for F to c.report, in one write(2), so the compiles
// of a parallel build can share the file.  Nothing when c.report is empty;
// false when the file cannot be written.
bool ftpad_report(const llvm::Function &F, const FtpadDecision &d, const FtpadConfig &c,
		  const FtpadSize &size);

// policy=FILE (docs/gcc-plugin.md "The policy file"): appends its rules to
// c.rules; each bad line adds "FILE:LINE: reason" to errors.  False when
// the file cannot be read (errors says why) or has a bad line.
bool ftpad_read_policy(const std::string &path, const FtpadArch &arch, FtpadConfig &c,
		       std::vector<std::string> &errors);

#endif
