/* SPDX-License-Identifier: MIT */
/*
 * env_mprotect.c - a program that changed the protection of its own text
 * (a JIT making a page RWX) keeps it when libftpad writes that page by
 * mprotect (run with FTPAD_TEXT_WRITE=mprotect).
 *
 * traced() and traced2() sit on pages of their own; traced()'s is made
 * RWX before the register.  Prints the protection of both pages, as
 * /proc/self/maps shows it, after the register and after the unregister,
 * and the calls seen.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "env_common.h"

__attribute__((noinline, aligned(4096))) int traced2(int x)
{
	return x + 2;
}

static struct ftpad_ops ops = { .func = on_call };

/* The permissions /proc/self/maps shows for addr, in perms. */
static void perms_of(uintptr_t addr, char perms[5])
{
	unsigned long lo, hi;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	snprintf(perms, 5, "?");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && lo <= addr && addr < hi)
			break;
	if (f)
		fclose(f);
}

static void show(const char *when)
{
	char a[5], b[5];

	perms_of((uintptr_t)traced, a);
	perms_of((uintptr_t)traced2, b);
	printf("%s: %s %s calls=%d\n", when, a, b, calls);
}

int main(void)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t at = (uintptr_t)traced & ~(page - 1);

	if (at == ((uintptr_t)traced2 & ~(page - 1)) ||
	    mprotect((void *)at, page, PROT_READ | PROT_WRITE | PROT_EXEC))
		return 2;
	if (ftpad_set_filter(&ops, "traced,traced2", 1) || ftpad_register_ops(&ops))
		return 1;
	sink = traced(1) + traced2(1);
	show("registered");
	if (ftpad_unregister_ops(&ops))
		return 1;
	sink = traced(1) + traced2(1);
	show("unregistered");
	return 0;
}
