/* SPDX-License-Identifier: MIT */
/*
 * ftpad attach: the process as found before anything is touched (attach.h):
 * the refusals, its mappings, and in its modules the sites, dlopen, a
 * libftpad already there and slack bytes for the stub.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "attach.h"
#include "ftpad_record.h"

/* The kernel's task flag (include/linux/sched.h), set as a thread begins
 * to exit; /proc/PID/stat shows it, no header names it. */
#define PF_EXITING 0x00000004

size_t attach_stub_size(void)
{
	return (size_t)(ftpad_attach_stub_end - ftpad_attach_stub);
}

/* What the command is doing, in its messages: `ftpad patch` shares the
 * getting in with attach, and its failures name the patch. */
static const char *doing_what = "attach to", *doing_ing = "attaching";

void attach_name_command(const char *what, const char *ing)
{
	doing_what = what;
	doing_ing = ing;
}

static void say_why(pid_t pid, const char *fmt, va_list ap)
{
	fprintf(stderr, "ftpad: error: cannot %s process %d: ", doing_what, pid);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/* The reason as it is, for a process known to be there or known not to. */
static int refuse(pid_t pid, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say_why(pid, fmt, ap);
	va_end(ap);
	return 1;
}

/* A process that died meanwhile makes any step fail, each its own way
 * (/proc/PID/exe missing, no maps, EPERM from ptrace): that is said instead. */
int attach_fail(pid_t pid, const char *fmt, ...)
{
	va_list ap;

	if (!attach_alive(pid))
		return attach_gone(pid);
	va_start(ap, fmt);
	say_why(pid, fmt, ap);
	va_end(ap);
	return 1;
}

/* A process that is being killed refuses ptrace with EPERM too, a moment
 * before /proc/PID/stat shows it exiting: give it 200 ms to show it. */
static void let_a_dying_process_show(pid_t pid)
{
	const struct timespec step = { 0, 5 * 1000 * 1000 };

	for (int i = 0; i < 40 && attach_alive(pid); i++)
		nanosleep(&step, NULL);
}

/* What /proc/PID/task/TID/status says of a thread's tracer and seccomp. */
struct thread_status {
	unsigned long tracer, seccomp;
};

static int read_thread_status(pid_t pid, pid_t tid, struct thread_status *st)
{
	char path[96], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	memset(st, 0, sizeof(*st));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "TracerPid: %lu", &st->tracer) != 1)
			sscanf(line, "Seccomp: %lu", &st->seccomp);
	fclose(f);
	return 0;
}

/* "process M (comm)": the tracer, named as ps would. */
static void describe_process(unsigned long pid, char *out, size_t size)
{
	char path[64], comm[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%lu/comm", pid);
	f = fopen(path, "r");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	snprintf(out, size, *comm ? "process %lu (%s)" : "process %lu", pid, comm);
}

int attach_check_threads(pid_t pid, bool seccomp)
{
	char path[64], who[96];
	struct dirent *d;
	DIR *dir;
	int err = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return attach_gone(pid);
	while (!err && (d = readdir(dir))) {
		pid_t tid = atoi(d->d_name);
		struct thread_status st;

		if (tid <= 0 || read_thread_status(pid, tid, &st))
			continue; /* a thread that ended meanwhile */
		if (st.tracer && st.tracer != (unsigned long)getpid()) {
			describe_process(st.tracer, who, sizeof(who));
			err = tid == pid ? attach_fail(pid, "it is already traced by %s", who)
					 : attach_fail(pid, "its thread %d is already traced by %s",
						       tid, who);
		} else if (seccomp && st.seccomp) {
			err = attach_fail(pid, "it runs under seccomp (Seccomp: %lu in "
					  "/proc/%d/task/%d/status); libftpad's mmap, socket and "
					  "clone calls could get it killed", st.seccomp, pid, tid);
		}
	}
	closedir(dir);
	return err;
}

int attach_permission_error(pid_t pid, uid_t uid)
{
	char scope[32] = "";
	FILE *f;

	let_a_dying_process_show(pid);
	/* ptrace's EPERM for a thread another tracer holds (one that came
	 * after the checks, or that traces a thread only). */
	if (attach_check_threads(pid, false))
		return 1;
	f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");

	if (f) {
		if (fgets(scope, sizeof(scope), f))
			scope[strcspn(scope, "\n")] = 0;
		fclose(f);
	}
	attach_fail(pid, "permission denied: ptrace needs the process's own user (uid %u; this is "
	     "uid %u) or CAP_SYS_PTRACE%s%s%s", (unsigned)uid, (unsigned)geteuid(),
	     *scope ? ", and Yama's /proc/sys/kernel/yama/ptrace_scope is " : "", scope,
	     *scope ? " (1: only a parent may attach, 2: only CAP_SYS_PTRACE, 3: none)" : "");
	return 1;
}

int attach_gone(pid_t pid)
{
	return refuse(pid, "process %d exited while %s", pid, doing_ing);
}

/* Alive: neither a zombie nor dying.  A killed process closes its files
 * (the control socket) before it is a zombie, but it is marked exiting
 * before that, in the flags of /proc/PID/stat. */
bool attach_alive(pid_t pid)
{
	char path[64], buf[1024], state = 0, *after;
	unsigned flags = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	after = strrchr(buf, ')'); /* the name may hold ')' too */
	if (!after || sscanf(after + 1, " %c %*d %*d %*d %*d %*d %u", &state, &flags) != 2)
		return false;
	return state != 'Z' && state != 'X' && !(flags & PF_EXITING);
}

/* ---- the checks made before anything is touched ---- */

/* /proc/PID/status: zombie, its uid and gid; then every thread: traced,
 * seccomp. */
static int check_status(struct target *t)
{
	char path[64], line[256], state = 0;
	unsigned ruid, euid, rgid, egid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", t->pid);
	f = fopen(path, "r");
	if (!f)
		return refuse(t->pid, "no such process");
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "State: %c", &state) == 1)
			continue;
		if (sscanf(line, "Uid: %u %u", &ruid, &euid) == 2)
			t->uid = euid;
		else if (sscanf(line, "Gid: %u %u", &rgid, &egid) == 2)
			t->gid = egid;
	}
	fclose(f);
	if (state == 'Z' || state == 'X')
		return refuse(t->pid, "it is a zombie (it has exited)");
	return attach_check_threads(t->pid, true);
}

static int check_machine(struct target *t)
{
	char path[64];
	unsigned char id[EI_NIDENT + 4];
	int fd;
	uint16_t machine;

	snprintf(path, sizeof(path), "/proc/%d/exe", t->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && (errno == EACCES || errno == EPERM))
		return attach_permission_error(t->pid, t->uid);
	if (fd < 0)
		return attach_fail(t->pid, "%s: %s", path, strerror(errno));
	if (pread(fd, id, sizeof(id), 0) != (ssize_t)sizeof(id) || memcmp(id, ELFMAG, SELFMAG)) {
		close(fd);
		return attach_fail(t->pid, "its program is not an ELF file");
	}
	close(fd);
	memcpy(&machine, id + EI_NIDENT + 2, sizeof(machine));
	if (id[EI_CLASS] != ELFCLASS64)
		return attach_fail(t->pid, "it is a 32-bit process; ftpad attaches to 64-bit ones");
	if (machine != attach_elf_machine)
		return attach_fail(t->pid, "its program is for another machine (ELF machine %u)", machine);
	return 0;
}

int attach_read_maps(struct target *t)
{
	char path[64], line[PATH_MAX + 128];
	FILE *f;
	size_t cap = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", t->pid);
	f = fopen(path, "r");
	if (!f && (errno == EACCES || errno == EPERM))
		return attach_permission_error(t->pid, t->uid);
	if (!f)
		return attach_gone(t->pid);
	free(t->maps);
	t->maps = NULL;
	t->nmaps = 0;
	while (fgets(line, sizeof(line), f)) {
		struct mapping m = { 0 };
		int name = 0;

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &m.start, &m.end, m.perms, &m.offset,
			   &name) < 4)
			continue;
		line[strcspn(line, "\n")] = 0;
		if (name)
			snprintf(m.path, sizeof(m.path), "%s", line + name);
		if (t->nmaps == cap) {
			struct mapping *more = realloc(t->maps, (cap = cap * 2 + 64) * sizeof(m));

			if (!more) {
				fclose(f);
				return attach_fail(t->pid, "out of memory");
			}
			t->maps = more;
		}
		t->maps[t->nmaps++] = m;
	}
	fclose(f);
	return 0;
}

const struct mapping *attach_mapping_at(const struct target *t, uint64_t addr)
{
	for (size_t i = 0; i < t->nmaps; i++)
		if (addr >= t->maps[i].start && addr < t->maps[i].end)
			return &t->maps[i];
	return NULL;
}

/* A mapped ELF file, read through its section and program headers. */
struct elf {
	const unsigned char *data;
	size_t size;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	const char *shstr;
};

static void elf_close(struct elf *e)
{
	if (e->data)
		munmap((void *)e->data, e->size);
	e->data = NULL;
}

static bool in_file(const struct elf *e, uint64_t off, uint64_t len)
{
	return off <= e->size && len <= e->size - off;
}

/* A module's file as the process maps it, never what took its place at
 * its path: a FIFO there ("X (deleted)", or put where X was) would block
 * the open for ever, and with it the tool, Ctrl-C blocked.  The mapping
 * itself through /proc/PID/map_files (CAP_SYS_ADMIN), the program's
 * through /proc/PID/exe; else the path, opened without waiting nor
 * following a link, if it is a regular file.  A descriptor, or -1. */
static int open_module(const struct target *t, const char *path, bool is_exe)
{
	char proc[96];
	struct stat st;
	int fd = -1;

	for (size_t i = 0; i < t->nmaps; i++) {
		if (!strcmp(t->maps[i].path, path)) {
			snprintf(proc, sizeof(proc), "/proc/%d/map_files/%llx-%llx", t->pid,
				 (unsigned long long)t->maps[i].start,
				 (unsigned long long)t->maps[i].end);
			fd = open(proc, O_RDONLY | O_CLOEXEC);
			break;
		}
	}
	if (fd < 0 && is_exe) {
		snprintf(proc, sizeof(proc), "/proc/%d/exe", t->pid);
		fd = open(proc, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0)
		fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* fd's ELF file mapped (fd closed): 0, or -1. */
static int elf_open(int fd, struct elf *e)
{
	struct stat st;

	memset(e, 0, sizeof(*e));
	if (fd < 0 || fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	e->size = (size_t)st.st_size;
	e->data = mmap(NULL, e->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (e->data == MAP_FAILED) {
		e->data = NULL;
		return -1;
	}
	e->eh = (const Elf64_Ehdr *)e->data;
	if (memcmp(e->data, ELFMAG, SELFMAG) || e->data[EI_CLASS] != ELFCLASS64 ||
	    !in_file(e, e->eh->e_phoff, (uint64_t)e->eh->e_phnum * sizeof(Elf64_Phdr))) {
		elf_close(e);
		return -1;
	}
	if (e->eh->e_shnum && e->eh->e_shstrndx < e->eh->e_shnum &&
	    in_file(e, e->eh->e_shoff, (uint64_t)e->eh->e_shnum * sizeof(Elf64_Shdr))) {
		e->sh = (const Elf64_Shdr *)(e->data + e->eh->e_shoff);
		if (in_file(e, e->sh[e->eh->e_shstrndx].sh_offset, e->sh[e->eh->e_shstrndx].sh_size))
			e->shstr = (const char *)e->data + e->sh[e->eh->e_shstrndx].sh_offset;
	}
	return 0;
}

static const Elf64_Shdr *elf_section(const struct elf *e, const char *name, uint32_t type)
{
	for (size_t i = 0; e->shstr && i < e->eh->e_shnum; i++) {
		const Elf64_Shdr *s = &e->sh[i];

		if ((!type || s->sh_type == type) && (!name || (s->sh_name < e->sh[e->eh->e_shstrndx].sh_size &&
							       !strcmp(e->shstr + s->sh_name, name))))
			return s;
	}
	return NULL;
}

/* A defined function's value in the symbol table of type (SHT_DYNSYM or
 * SHT_SYMTAB), or 0. */
static uint64_t elf_function(const struct elf *e, uint32_t type, const char *name)
{
	const Elf64_Shdr *syms = elf_section(e, NULL, type), *strs;
	const Elf64_Sym *sym;

	if (!syms || syms->sh_link >= e->eh->e_shnum || !in_file(e, syms->sh_offset, syms->sh_size))
		return 0;
	strs = &e->sh[syms->sh_link];
	if (!in_file(e, strs->sh_offset, strs->sh_size))
		return 0;
	sym = (const Elf64_Sym *)(e->data + syms->sh_offset);
	for (size_t i = 0; i < syms->sh_size / sizeof(*sym); i++) {
		if (sym[i].st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC ||
		    sym[i].st_name >= strs->sh_size)
			continue;
		if (!strcmp((const char *)e->data + strs->sh_offset + sym[i].st_name, name))
			return sym[i].st_value;
	}
	return 0;
}

static const Elf64_Phdr *elf_phdrs(const struct elf *e)
{
	return (const Elf64_Phdr *)(e->data + e->eh->e_phoff);
}

/* Whether bias is where the module was loaded: each executable segment's
 * page is mapped there, executable, from the right file offset.  (Other
 * mappings of the same file at offset 0 exist: libftpad maps a module's
 * file to read its section headers.) */
static bool loaded_at(const struct target *t, const char *path, const struct elf *e,
		      uint64_t bias)
{
	bool any = false;

	for (size_t i = 0; i < e->eh->e_phnum; i++) {
		const Elf64_Phdr *ph = &elf_phdrs(e)[i];
		const struct mapping *m;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		m = attach_mapping_at(t, bias + ph->p_vaddr);
		if (!m || strcmp(m->path, path) || !strchr(m->perms, 'x') ||
		    m->offset + (bias + ph->p_vaddr - m->start) != ph->p_offset)
			return false;
		any = true;
	}
	return any;
}

/* The module's load bias: the offset-0 mapping of its file that its first
 * PT_LOAD's page is at, its executable segments where they belong. */
static bool load_bias(const struct target *t, const char *path, const struct elf *e,
		      uint64_t *bias)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), first = UINT64_MAX;

	for (size_t i = 0; i < e->eh->e_phnum; i++)
		if (elf_phdrs(e)[i].p_type == PT_LOAD && elf_phdrs(e)[i].p_vaddr < first)
			first = elf_phdrs(e)[i].p_vaddr;
	for (size_t i = 0; first != UINT64_MAX && i < t->nmaps; i++) {
		uint64_t b = t->maps[i].start - (first & ~(page - 1));

		if (!t->maps[i].offset && !strcmp(t->maps[i].path, path) && loaded_at(t, path, e, b)) {
			*bias = b;
			return true;
		}
	}
	return false;
}

/* Slack bytes past an executable segment's file size, in its last page,
 * in an r-x mapping: never executed, so the stub may borrow them. */
static void find_slack(struct target *t, const struct elf *e, uint64_t bias)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

	for (size_t i = 0; !t->slack && i < e->eh->e_phnum; i++) {
		const Elf64_Phdr *ph = &elf_phdrs(e)[i];
		uint64_t at = (bias + ph->p_vaddr + ph->p_filesz + 15) & ~15ull;
		uint64_t page_end = (bias + ph->p_vaddr + ph->p_filesz + page - 1) & ~(page - 1);
		const struct mapping *m = attach_mapping_at(t, at);

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || ph->p_memsz != ph->p_filesz ||
		    at + attach_stub_size() > page_end || !m || strcmp(m->perms, "r-xp") ||
		    at + attach_stub_size() > m->end)
			continue;
		t->slack = t->slack_start = at;
		t->slack_end = page_end < m->end ? page_end : m->end;
	}
}

/* The runtime's own test (runtime/module.c): a module with sites has a
 * non-empty __ftpad_sites section. */
static bool has_sites(const struct elf *e)
{
	const Elf64_Shdr *s = elf_section(e, "__ftpad_sites", 0);

	return s && s->sh_size;
}

static bool seen_path(const struct target *t, size_t upto, const char *path)
{
	for (size_t i = 0; i < upto; i++)
		if (!strcmp(t->maps[i].path, path))
			return true;
	return false;
}

/* One mapped module: sites?  dlopen?  libftpad?  slack? */
static void look_at_module(struct target *t, const char *path, bool is_exe)
{
	struct elf e;
	uint64_t bias, v;

	if (elf_open(open_module(t, path, is_exe), &e))
		return;
	if (!load_bias(t, path, &e, &bias)) {
		elf_close(&e);
		return;
	}
	t->has_sites |= has_sites(&e);
	/* libc's three, not a module's interposer of one (libftpad.so's
	 * dlopen, dlclose). */
	if (!t->dlopen && elf_function(&e, SHT_DYNSYM, "dlopen") &&
	    elf_function(&e, SHT_DYNSYM, "dlsym") && elf_function(&e, SHT_DYNSYM, "dlerror")) {
		t->dlopen = bias + elf_function(&e, SHT_DYNSYM, "dlopen");
		t->dlsym = bias + elf_function(&e, SHT_DYNSYM, "dlsym");
		t->dlerror = bias + elf_function(&e, SHT_DYNSYM, "dlerror");
	}
	/* libftpad already there: the same copy is opened again, never a
	 * second one; linked in (libftpad.a): called as it is. */
	if (elf_function(&e, SHT_DYNSYM, FTPAD_ATTACH_ENTRY))
		snprintf(t->lib, sizeof(t->lib), "%s", path);
	else if (is_exe && (v = elf_function(&e, SHT_SYMTAB, FTPAD_ATTACH_ENTRY)))
		t->start = bias + v;
	find_slack(t, &e, bias);
	elf_close(&e);
}

static int look_at_modules(struct target *t)
{
	char path[64], exe[PATH_MAX];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", t->pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n < 0)
		return attach_gone(t->pid);
	exe[n] = 0;
	look_at_module(t, exe, true); /* first: its slack is preferred */
	for (size_t i = 0; i < t->nmaps; i++) {
		const char *p = t->maps[i].path;

		if (p[0] == '/' && strcmp(p, exe) && !seen_path(t, i, p))
			look_at_module(t, p, false);
	}
	if (!t->has_sites)
		return attach_fail(t->pid, "none of its modules has ftpad sites (no __ftpad_sites "
			    "section: built without the ftpad plugin?)");
	if (!t->start && !t->dlopen)
		return attach_fail(t->pid, "no dlopen, dlsym and dlerror found in its libc, and its "
			    "program does not link libftpad.a");
	if (!t->slack)
		return attach_fail(t->pid, "no room for the loader stub: no executable segment ends "
			    "%zu bytes before its page does", attach_stub_size());
	return 0;
}

int attach_mem_read(struct target *t, uint64_t addr, void *buf, size_t len)
{
	return pread(t->mem, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

int attach_mem_write(struct target *t, uint64_t addr, const void *buf, size_t len)
{
	return pwrite(t->mem, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

int attach_check_target(struct target *t)
{
	char path[64];

	if (check_status(t) || check_machine(t) || attach_read_maps(t) || look_at_modules(t))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/mem", t->pid);
	t->mem = open(path, O_RDWR | O_CLOEXEC);
	if (t->mem < 0)
		return errno == EACCES || errno == EPERM ? attach_permission_error(t->pid, t->uid)
							 : attach_gone(t->pid);
	return 0;
}
