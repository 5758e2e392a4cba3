/* SPDX-License-Identifier: MIT */
/* The backend for an object, chosen from its e_machine and class at run time. */
#include "rmc.h"

static const struct rmc_arch *const backends[] = {
	&rmc_arch_x86_64,
	&rmc_arch_i386,
	&rmc_arch_aarch64,
	&rmc_arch_arm,
	&rmc_arch_mips32,
	&rmc_arch_mips64,
	&rmc_arch_loongarch64,
	&rmc_arch_loongarch32,
	&rmc_arch_powerpc,
	&rmc_arch_powerpc64,
	&rmc_arch_s390x,
	&rmc_arch_sh,
	&rmc_arch_sparc64,
};

const struct rmc_arch *rmc_arch_for(uint16_t machine, unsigned char elfclass)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (backends[i]->machine == machine &&
		    (!backends[i]->elfclass || backends[i]->elfclass == elfclass))
			return backends[i];
	return NULL;
}
