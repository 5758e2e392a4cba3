// SPDX-License-Identifier: MIT
// ftpad-clang.h - what the frontend half of ftpad-clang.so hands to its pass
// half, and the shims for the LLVM versions whose API differs.  Both halves
// live in one shared object that clang loads once (as -fplugin= and
// -fpass-plugin=), so a process-wide object is the channel: the frontend
// fills it while parsing, the pass reads it when CodeGen runs the pipeline.
// Without the frontend half (-fpass-plugin= alone, or an LTO link) the
// defaults hold and no function has an attribute.
#ifndef FTPAD_CLANG_H
#define FTPAD_CLANG_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "arch.h"

#include "llvm/Config/llvm-config.h"

// Where LLVM's and clang's APIs differ between the versions ftpad is built
// for (13 to 16, Debian 12's), the difference is bridged here, once, so that
// the passes are written against clang 14's API alone.

#if LLVM_VERSION_MAJOR < 14
// LLVM 14 moved OptimizationLevel out of PassBuilder into namespace llvm.
#include "llvm/Passes/PassBuilder.h"
namespace llvm {
using OptimizationLevel = PassBuilder::OptimizationLevel;
}
#endif

struct FtpadConfig {
	bool from_frontend = false; // the arguments below were given (-fplugin=)
	// The arguments (plugin-core/options.c); without the frontend, the
	// target's defaults, set by the pass.
	ftpad_options opts = {};
	// -fdebug-prefix-map (and -ffile-prefix-map), from the frontend: the
	// report's source names go through it as the debug info's do.
	std::map<std::string, std::string> prefix_map;
	// False when this compile writes IR for a later code generator (-flto,
	// -emit-llvm): the plugin's code generator hook (machine.cc) then does
	// not run, and only layouts LLVM's own attributes give are possible.
	bool codegen_here = true;
	// By the name the assembler sees (mangled), filled by the frontend:
	// functions that must not get a pad, and why (no_instrument_function,
	// or a patchable_function_entry of the user's own, which clang leaves
	// out of the IR when its count is 0).
	std::map<std::string, std::string> skip;
	std::map<std::string, ftpad_layout> attribute;
	// -fplugin-arg-ftpad-clang-pg=1 (frontend.cc): pad only the functions
	// -pg -mfentry marks, in place of their __fentry__ call.
	bool pg = false;
};

FtpadConfig &ftpad_config();

// Why LAYOUT (of the whole file, or of one function) cannot be given in this
// compile, or "".  Checks the ranges and whether it needs the code
// generator hook where it does not run.
std::string ftpad_layout_problem(const FtpadConfig &c, const FtpadArch &arch, unsigned before,
				 unsigned after);

// Turns LLVM's IPRA (-mllvm -enable-ipra) off for this compile (pass.cc).
void ftpad_ipra_off();

// Does the plugin's hook in LLVM's code generator run in this process?
// (machine.cc)
bool ftpad_machine_hook_installed();

// The string attribute that hands a function's entry assembly from the IR
// pass to that hook.
extern const char *const FTPAD_ENTRY_ASM;
// With exit=1, the string attribute that names, one per line, the
// function's record global, its entry as the record refers to it (empty:
// the function itself), its name string, and "ops" when it has an ops
// slot: the hook adds the exit sites' records to that global (machine.cc).
extern const char *const FTPAD_EXIT_RECORD;

namespace llvm {
class Constant;
class GlobalVariable;
template <typename T> class ArrayRef;
}
// TARGET + ADDEND - FIELD as an i32: a record's PC-relative field (pass.cc).
llvm::Constant *ftpad_relative(llvm::Constant *field, llvm::Constant *target, int64_t addend);
// The address inside GV that the indices after the leading 0 lead to.
llvm::Constant *ftpad_element(llvm::GlobalVariable *gv, llvm::ArrayRef<unsigned> path);

#endif
