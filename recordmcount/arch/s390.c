/* SPDX-License-Identifier: MIT */
/*
 * s390x (64-bit, big-endian): -pg gives `stg %r14,8(%r15); brasl
 * %r14,_mcount` with R_390_PLT32DBL on the brasl's displacement, two bytes
 * into it; -mfentry gives `brasl %r0,__fentry__` first thing.
 *
 * The adjust is Linux's -14, made for an older GCC sequence that also
 * loaded a profile counter, `stg; larl %r1,.LP<n>; brasl` (6 + 6 + 2 bytes
 * to the relocation), which put the record at the `stg`.  GCC 12 loads no
 * counter (s390_function_profiler), so the same adjust puts the record 6
 * bytes before the function (12 for -mfentry).  We keep Linux's value
 * anyway: a drop-in must write what the original writes, and Linux's s390
 * never runs recordmcount (it builds with -mrecord-mcount -mnop-mcount,
 * and GCC writes __mcount_loc itself, which both tools then leave alone).
 *
 * Only ELFCLASS64: Linux would process a 31-bit object with relocation
 * type 0 (R_390_NONE), a table that resolves to nothing; we refuse it.
 * No fixups: Linux leaves calls in untraced sections alone.
 */
#include <elf.h>

#include "../rmc.h"

const struct rmc_arch rmc_arch_s390x = {
	.name = "s390x",
	.machine = EM_S390,
	.elfclass = ELFCLASS64,
	.mcount = "_mcount",
	.mcount_adjust = -14,
	.abs_reloc = R_390_64,
	.none_reloc = R_390_NONE,
};
