// SPDX-License-Identifier: MIT
// ftpad-clang.h - what the frontend half of ftpad-clang.so hands to its pass
// half.  Both halves live in one shared object that clang loads once (as
// -fplugin= and -fpass-plugin=), so a process-wide object is the channel: the
// frontend fills it while parsing, the pass reads it when CodeGen runs the
// pipeline.  Without the frontend half (-fpass-plugin= alone, or an LTO link)
// the defaults hold and no function has an attribute.
#ifndef FTPAD_CLANG_H
#define FTPAD_CLANG_H

#include <map>
#include <string>
#include <vector>

struct FtpadLayout {
	unsigned before;
	unsigned after;
};

struct FtpadConfig {
	FtpadLayout layout = {0, 5};
	bool ops = true;
	unsigned min_insns = 0;
	std::string report;
	bool unsafe_ipra = false; // testing only, as the GCC plugin's unsafe-ipa-ra
	std::vector<std::string> include, exclude, exclude_section;
	// By the name the assembler sees (mangled), filled by the frontend:
	// functions that must not get a pad, and why (no_instrument_function,
	// or a patchable_function_entry of the user's own, which clang leaves
	// out of the IR when its count is 0).
	std::map<std::string, std::string> skip;
	std::map<std::string, FtpadLayout> attribute;
};

FtpadConfig &ftpad_config();

#endif
