/* SPDX-License-Identifier: MIT */
/*
 * exe_as_32bit.c PROGRAM - a 64-bit process whose /proc/PID/exe is
 * PROGRAM, a 32-bit one: ftpad attach's refusal of 32-bit processes can be
 * checked where the kernel cannot run one (IA32 emulation off).
 *
 * prctl(PR_SET_MM, PR_SET_MM_MAP) with an exe_fd (CAP_SYS_ADMIN or
 * CAP_CHECKPOINT_RESTORE, where PR_SET_MM_EXE_FILE would also need
 * CAP_SYS_RESOURCE) makes PROGRAM the exe file, but only once this
 * program's own file is no longer mapped.  So the last steps (unmap it,
 * the prctl, say "ready", wait) run from a copy of a few instructions in
 * an anonymous page.  The memory map given to the prctl is the one the
 * kernel shows in /proc/self/stat, unchanged.  A failing prctl or munmap
 * exits with its errno; any other failure exits 1.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/prctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STR(x) STR_(x)
#define STR_(x) #x

struct last_steps {
	uintptr_t start, len;		/* this program's file, mapped */
	struct prctl_mm_map *map;
	uintptr_t map_size;
};

/*
 * last_steps(struct last_steps *): position-independent and referring to
 * nothing outside itself, as it runs from a copy after this program's file
 * is unmapped.  Never returns.
 */
__asm__(".pushsection .text.last_steps, \"ax\"\n"
	"last_steps:\n"
	"	mov	%rdi, %rbx\n"
	"	mov	0(%rbx), %rdi\n"
	"	mov	8(%rbx), %rsi\n"
	"	mov	$" STR(SYS_munmap) ", %eax\n"
	"	syscall\n"
	"	test	%rax, %rax\n"
	"	jnz	2f\n"
	"	mov	$" STR(PR_SET_MM) ", %edi\n"
	"	mov	$" STR(PR_SET_MM_MAP) ", %esi\n"
	"	mov	16(%rbx), %rdx\n"
	"	mov	24(%rbx), %r10\n"
	"	xor	%r8d, %r8d\n"
	"	mov	$" STR(SYS_prctl) ", %eax\n"
	"	syscall\n"
	"	test	%rax, %rax\n"
	"	jnz	2f\n"
	"	mov	$1, %edi\n"
	"	lea	3f(%rip), %rsi\n"
	"	mov	$6, %edx\n"
	"	mov	$" STR(SYS_write) ", %eax\n"
	"	syscall\n"
	"1:	mov	$" STR(SYS_pause) ", %eax\n"
	"	syscall\n"
	"	jmp	1b\n"
	"2:	mov	%eax, %edi\n"
	"	neg	%edi\n"
	"	mov	$" STR(SYS_exit_group) ", %eax\n"
	"	syscall\n"
	"3:	.ascii	\"ready\\n\"\n"
	"last_steps_end:\n"
	".popsection\n");

extern const char last_steps[], last_steps_end[];
extern const char __executable_start[], _end[];

/* The kernel's memory map of this process, as /proc/self/stat shows it. */
static int read_memory_map(struct prctl_mm_map *m)
{
	unsigned long long field[53] = { 0 };
	char buf[4096], *p, *save;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* Fields are numbered from 1 as in proc(5); the 3rd, the state, is a letter. */
	p = strtok_r(p + 1, " ", &save);
	for (int i = 3; p && i < 53; i++, p = strtok_r(NULL, " ", &save))
		field[i] = i == 3 ? 0 : strtoull(p, NULL, 10);
	if (!field[51])
		return -1;
	m->start_code = field[26];
	m->end_code = field[27];
	m->start_stack = field[28];
	m->start_data = field[45];
	m->end_data = field[46];
	m->start_brk = field[47];
	m->brk = syscall(SYS_brk, 0);
	m->arg_start = field[48];
	m->arg_end = field[49];
	m->env_start = field[50];
	m->env_end = field[51];
	return 0;
}

int main(int argc, char **argv)
{
	struct prctl_mm_map map = { 0 };
	struct last_steps steps;
	long page_size = sysconf(_SC_PAGESIZE);
	void *page;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PROGRAM\n", argv[0]);
		return 1;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	if (read_memory_map(&map)) {
		fprintf(stderr, "cannot read /proc/self/stat\n");
		return 1;
	}
	map.exe_fd = fd;
	page = mmap(NULL, page_size, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	if (page == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memcpy(page, last_steps, last_steps_end - last_steps);
	steps.start = (uintptr_t)__executable_start & -page_size;
	steps.len = (((uintptr_t)_end + page_size - 1) & -page_size) - steps.start;
	steps.map = &map;
	steps.map_size = sizeof(map);
	((void (*)(struct last_steps *))page)(&steps);
	return 1;
}
