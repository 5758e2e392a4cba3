// SPDX-License-Identifier: MIT
// policy.h - the LLVM side of the per-function policy: the facts about a
// function that the core's decision chain (plugin-core/decide.c) and its
// report ask for.
#ifndef FTPAD_CLANG_POLICY_H
#define FTPAD_CLANG_POLICY_H

#include "ftpad-clang.h"

namespace llvm {
class Function;
class TargetTransformInfo;
}

// What min-insns looks at, estimated: LLVM's own code-size cost of each IR
// instruction for the target (TargetTransformInfo, TCK_CodeSize: 0 for
// what folds away, such as most casts and address arithmetic), debug
// intrinsics, lifetime markers and PHIs left out, and whether the
// control-flow graph has a cycle.  The pass runs before instruction
// selection, and LLVM 14 gives a plugin no hook in CodeGen to count the
// real ones.
ftpad_size ftpad_estimate(const llvm::Function &F, const llvm::TargetTransformInfo &tti);

// docs/clang-pass.md "Which functions get a pad": decides for F, a
// function the module defines and emits, into D, and appends the
// decision's line to the report, if there is one.  False when the report
// cannot be written (errno says why).
bool ftpad_decide_and_report(const llvm::Function &F, const FtpadConfig &c,
			     const ftpad_size &size, ftpad_decision &d);

// Does F carry "patchable-function-entry"/"-prefix" from
// -fpatchable-function-entry= on the command line (not from a user's
// attribute, which the frontend reports as a skip)?
bool ftpad_has_command_line_entry(const llvm::Function &F, const FtpadConfig &c);

#endif
