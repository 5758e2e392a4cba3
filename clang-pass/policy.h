// SPDX-License-Identifier: MIT
// policy.h - which functions get a pad, and the report of each decision.
#ifndef FTPAD_CLANG_POLICY_H
#define FTPAD_CLANG_POLICY_H

#include "ftpad-clang.h"

#include <string>

namespace llvm {
class Function;
}

struct FtpadDecision {
	bool pad;
	std::string reason;  // as in docs/gcc-plugin.md "The report"
	FtpadLayout layout;  // {0, 0} when skipped
};

// docs/clang-pass.md "Which functions get a pad", first match wins.  F is
// a function the module defines and emits.
FtpadDecision ftpad_decide(const llvm::Function &F, const FtpadConfig &c);

// Appends one JSON line for F to c.report, in one write(2), so the compiles
// of a parallel build can share the file.  Nothing when c.report is empty.
void ftpad_report(const llvm::Function &F, const FtpadDecision &d, const FtpadConfig &c);

// The estimate min-insns compares with: IR instructions, debug intrinsics,
// lifetime markers and PHIs excepted.  has_loop: the CFG has a cycle.
unsigned ftpad_estimate_insns(const llvm::Function &F, bool &has_loop);

#endif
