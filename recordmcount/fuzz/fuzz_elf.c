/* SPDX-License-Identifier: MIT */
/*
 * A libFuzzer target for recordmcount-ng's ELF reading: every input is
 * written to a file and run through every mode, as the command line would
 * (--list, --check, the drop-in, --format=ftpad).  Bad objects must give
 * errors, never crashes, leaks or undefined behaviour.  Built and run by
 * tests/recordmcount/test_recordmcount_fuzz.py:
 *
 *   clang-14 -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -I pad recordmcount/fuzz/fuzz_elf.c \
 *     $(recordmcount sources but main.c) pad/*.c -lelf -o fuzz_elf
 *   ./fuzz_elf -max_total_time=30 corpus/
 *
 * The tool's own messages go to /dev/null; the sanitizers' reports still
 * reach file descriptor 2.
 */
#define _GNU_SOURCE
#include <libelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../rmc.h"

static char path[4096];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	static char dir[256];
	FILE *quiet = fopen("/dev/null", "w");

	(void)argc, (void)argv;
	snprintf(dir, sizeof(dir), "%s/rmc-fuzz-XXXXXX", base);
	if (!mkdtemp(dir) || !quiet)
		abort();
	snprintf(path, sizeof(path), "%s/in.o", dir);
	stdout = quiet;	/* --list and --check print; the fuzzer needs none of it */
	stderr = quiet;
	elf_version(EV_CURRENT);
	return 0;
}

static void put_file(const uint8_t *data, size_t size)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum rmc_mode reading[] = { RMC_MODE_LIST, RMC_MODE_CHECK };
	static const enum rmc_mode writing[] = { RMC_MODE_MCOUNT, RMC_MODE_FTPAD };
	struct rmc_opts opts = { .warn_notrace = true };

	put_file(data, size);
	for (size_t i = 0; i < sizeof(reading) / sizeof(reading[0]); i++) {
		opts.mode = reading[i];
		(opts.mode == RMC_MODE_LIST ? rmc_list_file : rmc_check_file)(&opts, path);
	}
	opts.warn_notrace = false;
	for (size_t i = 0; i < sizeof(writing) / sizeof(writing[0]); i++) {
		opts.mode = writing[i];
		put_file(data, size);
		(opts.mode == RMC_MODE_MCOUNT ? rmc_process_file : rmc_ftpad_file)(&opts, path);
		/* and once more over its own output: a second run must be harmless */
		(opts.mode == RMC_MODE_MCOUNT ? rmc_process_file : rmc_ftpad_file)(&opts, path);
	}
	unlink(path);
	return 0;
}
