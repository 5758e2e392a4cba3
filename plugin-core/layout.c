/* SPDX-License-Identifier: MIT */
/*
 * layout.c - the pad layout of each architecture in each ABI
 * (docs/design.md "Pad layouts"): the one table both plugins read.
 */
#include <string.h>

#include "core.h"
#include "../pad/aarch64.h"
#include "../pad/ftpad_site.h"
#include "../pad/x86_64.h"

/*
 * x86_64, user:  [filler][before: 0x90s][ops slot] entry: [endbr64]
 *                [site: one 5-byte NOP][rest of after, multi-byte NOPs]
 * x86_64, kernel: -pg -mfentry -mrecord-mcount -mnop-mcount, plus
 * -fpatchable-function-entry=N,N for CALL_PADDING on every function; no ops
 * slot, the compiler's own alignment, recorded in __mcount_loc.
 */
const struct ftpad_arch_layout ftpad_layout_x86_64 = {
	.name = "x86_64",
	.record_arch = FTPAD_ARCH_X86_64,
	.unit_bytes = FTPAD_X86_64_UNIT,
	.site_bytes = FTPAD_X86_64_SITE_LEN,
	.site_offset = FTPAD_X86_64_SITE_OFFSET,
	.user = {
		.min_after = FTPAD_X86_64_MIN_AFTER,
		.default_before = 0,
		.default_after = FTPAD_X86_64_MIN_AFTER,
		.default_ops = true,
		.ops_allowed = true,
		.own_alignment = true,
		.align_without_ops = true,
		.default_record = FTPAD_RECORD_FTPAD,
	},
	.kernel = {
		.min_after = FTPAD_X86_64_MIN_AFTER,
		.default_before = 0,
		.default_after = FTPAD_X86_64_MIN_AFTER,
		.before_everywhere = true,
		.compiler_pads = true,
		.default_record = FTPAD_RECORD_MCOUNT,
		.layout_flags = FTPAD_SITE_KERNEL,
	},
};

/*
 * aarch64, user:  [filler][before NOPs][ops slot: 2 NOPs] entry: [bti c]
 *                 [mov x9, x30][site: NOP][rest of after]
 * aarch64, kernel: exactly -fpatchable-function-entry=B+2+A,B+2 (=B+A,B
 * without the ops slot), as Linux's arm64
 * DYNAMIC_FTRACE_WITH_CALL_OPS, recorded in __patchable_function_entries.
 *
 * Kernel, both: with ops=0, `after` may be below the site's units, as
 * -fpatchable-function-entry=N,M's counts may (parisc's kernel pads one NOP
 * after the entry); such a pad is the compiler's own, byte for byte, and
 * its ftpad record, if any, says it has no site (FTPAD_SITE_NO_SITE).
 */
const struct ftpad_arch_layout ftpad_layout_aarch64 = {
	.name = "aarch64",
	.record_arch = FTPAD_ARCH_AARCH64,
	.unit_bytes = FTPAD_AARCH64_UNIT,
	.site_bytes = FTPAD_AARCH64_SITE_LEN,
	.site_offset = FTPAD_AARCH64_SITE_OFFSET,
	.user = {
		.min_after = FTPAD_AARCH64_MIN_AFTER,
		.default_before = 0,
		.default_after = FTPAD_AARCH64_MIN_AFTER,
		.default_ops = true,
		.ops_allowed = true,
		.own_alignment = true,
		.align_without_ops = true,
		.default_record = FTPAD_RECORD_FTPAD,
		.mov_flag = FTPAD_SITE_MOV_X9,
	},
	.kernel = {
		.min_after = FTPAD_AARCH64_MIN_AFTER,
		.default_before = 0,
		.default_after = FTPAD_AARCH64_MIN_AFTER,
		.default_ops = true,
		.ops_allowed = true,
		.own_alignment = true,
		.compiler_patchable_entry = true,
		.compiler_pads = true,
		.default_record = FTPAD_RECORD_PATCHABLE,
		.layout_flags = FTPAD_SITE_KERNEL,
	},
};

const struct ftpad_arch_layout *ftpad_arch_layout_named(const char *name)
{
	static const struct ftpad_arch_layout *const all[] = {
		&ftpad_layout_x86_64, &ftpad_layout_aarch64,
	};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

const struct ftpad_abi_layout *ftpad_arch_abi(const struct ftpad_arch_layout *arch,
						enum ftpad_abi abi)
{
	return abi == FTPAD_ABI_KERNEL ? &arch->kernel : &arch->user;
}
