/* SPDX-License-Identifier: MIT */
/*
 * guest_aarch64.c - /init of tests/attach/test_attach_aarch64.py's arm64 QEMU
 * machine, built static: `ftpad attach` on aarch64, where ptrace works (it
 * does not under qemu-user).  It runs /server (tests/src/attach/server.c,
 * built with the aarch64 plugin and exit sites, not linked with libftpad)
 * and attaches to it three times with /ftpad/bin/ftpad:
 *
 *   exact1  hot threads parked, attach -F work_*, resume, wait for every
 *           kind of thread to go on (a client served too), park, Ctrl-C;
 *   free    running, attach with no filter --duration 2 (the stub may run
 *           on a hot thread in the program's own code);
 *   exact2  as exact1, with --graph: a second attach to a process whose
 *           libftpad is loaded already;
 *   sve     /sve_spin (tests/src/attach/sve_spin.c), whose one thread is
 *           nearly always in an SVE loop: attach must say no.
 *
 * Then `ftpad record` of /prog (tests/src/record/prog.c, dynamically
 * linked) in its exec mode, which qemu-user cannot run: the recorder's exec
 * hook must write the first image's buffers before the exec.
 *
 * It prints what the host checks, each line "A64: ...": the server's own
 * lines (its parked counts, its status, its final line), the tool's
 * output and exit status, `ftpad report -s name` of each trace, and
 * whether the text read through /proc/PID/mem is the same as before.
 * The host decides; this program only reports.  Then it powers off.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <asm/hwcap.h>
#include <sys/auxv.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SOCK "/tmp/server.sock"
#define FTPAD "/ftpad/bin/ftpad"
#define MAX_RANGES 64

static FILE *to_server, *from_server;
static pid_t server;
static long pongs;

static void say_line(const char *what, const char *line)
{
	printf("A64: %s %s%s", what, line, strchr(line, '\n') ? "" : "\n");
}

/* Fork and exec argv with stdin from in (or /dev/null) and stdout and
 * stderr into a pipe whose read end is *out. */
static pid_t spawn(char *const argv[], int in, int *out, int err_to_console)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (!pid) {
		dup2(in >= 0 ? in : open("/dev/null", O_RDONLY), 0);
		dup2(p[1], 1);
		if (!err_to_console)
			dup2(p[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	*out = p[0];
	return pid;
}

static void start_server(void)
{
	char *argv[] = { "/server", SOCK, "2000", NULL };
	int in[2], out;
	char line[256];

	if (pipe(in))
		return;
	server = spawn(argv, in[0], &out, 1);
	close(in[0]);
	to_server = fdopen(in[1], "w");
	from_server = fdopen(out, "r");
	if (fgets(line, sizeof(line), from_server))
		say_line("server", line);
}

/* One command, its one-line answer printed and kept in line. */
static int command(const char *cmd, char *line, int size)
{
	fprintf(to_server, "%s\n", cmd);
	fflush(to_server);
	if (!fgets(line, size, from_server)) {
		printf("A64: server ended at %s\n", cmd);
		return -1;
	}
	say_line("server", line);
	return 0;
}

/* A client: "ping" in, "pong N" back, N the next number. */
static void ping(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char reply[64] = "";
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ssize_t n = 0, r;

	strcpy(a.sun_path, SOCK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    write(fd, "ping\n", 5) != 5) {
		printf("A64: ping failed: %s\n", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	while (n < (ssize_t)sizeof(reply) - 1 && !strchr(reply, '\n') &&
	       (r = read(fd, reply + n, sizeof(reply) - 1 - n)) > 0)
		n += r;
	close(fd);
	pongs++;
	printf("A64: ping %ld %s", pongs, strchr(reply, '\n') ? reply : "(none)\n");
}

struct status {
	long errors, accepts, reads, sleeps, trips;
};

static int status(struct status *s)
{
	char line[256];

	return command("status", line, sizeof(line)) ||
	       sscanf(line, "status errors=%ld accepts=%ld reads=%ld sleeps=%ld trips=%ld",
		      &s->errors, &s->accepts, &s->reads, &s->sleeps, &s->trips) != 5 ? -1 : 0;
}

/* Every kind of thread has gone on since *before (which becomes now);
 * "A64: progress ok" or "A64: progress stuck" after 120 s. */
static void progress(struct status *before)
{
	struct status now;
	time_t deadline = time(NULL) + 120;

	ping();
	while (!status(&now)) {
		if (now.accepts > before->accepts && now.reads > before->reads &&
		    now.sleeps > before->sleeps && now.trips > before->trips) {
			printf("A64: progress ok\n");
			*before = now;
			return;
		}
		if (time(NULL) > deadline)
			break;
		usleep(50000);
	}
	printf("A64: progress stuck\n");
}

/* ---- the text, through /proc/PID/mem ---- */

struct range {
	unsigned long start, end;
	unsigned char *bytes;
};

static int snapshot(pid_t pid, struct range *r)
{
	char path[64], line[512];
	FILE *maps;
	int n = 0, mem;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	maps = fopen(path, "r");
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	mem = open(path, O_RDONLY);
	while (maps && mem >= 0 && n < MAX_RANGES && fgets(line, sizeof(line), maps)) {
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &r[n].start, &r[n].end, perms) != 3 ||
		    perms[2] != 'x')
			continue;
		r[n].bytes = malloc(r[n].end - r[n].start);
		if (pread(mem, r[n].bytes, r[n].end - r[n].start, (off_t)r[n].start) !=
		    (ssize_t)(r[n].end - r[n].start))
			continue; /* [vdso] and the like may not read */
		n++;
	}
	if (maps)
		fclose(maps);
	if (mem >= 0)
		close(mem);
	return n;
}

/* Every range that was executable before holds the same bytes now (the
 * process has libftpad's ranges too after the first attach). */
static void compare_text(const char *round, struct range *before, int n)
{
	struct range now[MAX_RANGES];
	int m = snapshot(server, now), same = 0;

	for (int i = 0; i < n; i++) {
		int j = 0;

		while (j < m && (now[j].start != before[i].start || now[j].end != before[i].end))
			j++;
		if (j < m && !memcmp(now[j].bytes, before[i].bytes, now[j].end - now[j].start))
			same++;
		else
			printf("A64: text %s changed %lx-%lx\n", round, before[i].start, before[i].end);
	}
	printf("A64: text %s %s ranges=%d\n", round, same == n ? "same" : "CHANGED", n);
	for (int i = 0; i < m; i++)
		free(now[i].bytes);
}

/* ---- the tool ---- */

struct tool {
	pid_t pid;
	FILE *out;
};

/* `ftpad attach SERVER args -o dir`, its output read until it says the
 * sites are enabled (or it ends). */
static struct tool attach(const char *round, char **args)
{
	char pid[16], dir[64], *argv[16] = { FTPAD, "attach", pid };
	char line[512];
	int n = 3, fd;
	struct tool t;

	snprintf(pid, sizeof(pid), "%d", server);
	snprintf(dir, sizeof(dir), "/tmp/%s", round);
	while (*args)
		argv[n++] = *args++;
	argv[n++] = "-o";
	argv[n++] = dir;
	argv[n] = NULL;
	t.pid = spawn(argv, -1, &fd, 0);
	t.out = fdopen(fd, "r");
	while (fgets(line, sizeof(line), t.out)) {
		say_line("tool", line);
		if (strstr(line, "ftpad: attached to process"))
			break;
	}
	return t;
}

static void finish(const char *round, struct tool *t, int sigint)
{
	char line[512];
	int st = 0;

	if (sigint)
		kill(t->pid, SIGINT);
	while (fgets(line, sizeof(line), t->out))
		say_line("tool", line);
	fclose(t->out);
	waitpid(t->pid, &st, 0);
	printf("A64: tool-exit %s %d\n", round, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static void report(const char *round)
{
	char dir[64], line[512], *argv[] = { FTPAD, "report", "-s", "name", dir, NULL };
	int fd, st;
	pid_t pid;
	FILE *f;

	snprintf(dir, sizeof(dir), "/tmp/%s", round);
	pid = spawn(argv, -1, &fd, 0);
	f = fdopen(fd, "r");
	while (fgets(line, sizeof(line), f))
		printf("A64: report %s %s%s", round, line, strchr(line, '\n') ? "" : "\n");
	fclose(f);
	waitpid(pid, &st, 0);
	printf("A64: report-exit %s %d\n", round, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* Parked at both ends, -F work_*: the counts between the two "paused"
 * lines are what the trace must hold. */
static void exact_round(const char *round, char **args, struct status *st)
{
	char line[256];
	struct tool t;

	command("pause", line, sizeof(line));
	printf("A64: start %s %s", round, line);
	t = attach(round, args);
	command("resume", line, sizeof(line));
	progress(st);
	command("pause", line, sizeof(line));
	printf("A64: end %s %s", round, line);
	finish(round, &t, 1);
	command("resume", line, sizeof(line));
	report(round);
}

/* /sve_spin, one thread nearly always in an SVE loop: attach must refuse
 * it (the stub's frame would not give its Z registers back), and its
 * sums must stay right. */
static void sve_round(void)
{
	char *argv[] = { "/sve_spin", "/tmp/sve.stop", NULL }, *args[] = { "--duration", "1", NULL };
	char line[256];
	int fd, st = 0;
	struct tool t;
	pid_t saved = server;
	FILE *out;

	if (!(getauxval(AT_HWCAP) & HWCAP_SVE)) {
		printf("A64: sve absent\n"); /* the kernel has no CONFIG_ARM64_SVE */
		return;
	}
	server = spawn(argv, -1, &fd, 1);
	out = fdopen(fd, "r");
	if (fgets(line, sizeof(line), out))
		say_line("sve", line);
	sleep(1);
	t = attach("sve", args);
	finish("sve", &t, 0);
	close(open("/tmp/sve.stop", O_CREAT | O_WRONLY, 0644));
	while (fgets(line, sizeof(line), out))
		say_line("sve", line);
	fclose(out);
	waitpid(server, &st, 0);
	printf("A64: sve-exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	server = saved;
}

/* `ftpad record -- /prog exec`: its output, exit status, the replay's
 * thread lines and the report, as "rec ..." lines. */
static void record_round(void)
{
	char *argv[] = { FTPAD, "record", "-o", "/tmp/rec", "--", "/prog", "exec", NULL };
	char *replay[] = { FTPAD, "replay", "/tmp/rec", NULL };
	char line[512];
	int fd, st;
	pid_t pid = spawn(argv, -1, &fd, 0);
	FILE *f = fdopen(fd, "r");

	while (fgets(line, sizeof(line), f))
		say_line("rec", line);
	fclose(f);
	waitpid(pid, &st, 0);
	printf("A64: rec-exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	pid = spawn(replay, -1, &fd, 0);
	f = fdopen(fd, "r");
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "# thread", 8))
			say_line("rec-replay", line);
	fclose(f);
	waitpid(pid, &st, 0);
	report("rec");
}

int main(void)
{
	char *exact1[] = { "-F", "work_*", NULL };
	char *exact2[] = { "-F", "work_*", "--graph", NULL };
	char *free_args[] = { "--duration", "2", NULL };
	struct range text[MAX_RANGES];
	struct status st;
	char line[512];
	int n, ws;

	setvbuf(stdout, NULL, _IONBF, 0);
	mount("proc", "/proc", "proc", 0, NULL);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	mkdir("/tmp", 0777);
	printf("A64: init reached\n");
	start_server();
	if (!server || status(&st)) {
		printf("A64: no server\n");
		goto off;
	}
	n = snapshot(server, text);
	progress(&st);

	exact_round("exact1", exact1, &st);
	compare_text("exact1", text, n);
	progress(&st);

	{
		struct tool t = attach("free", free_args);

		progress(&st);
		finish("free", &t, 0);
		report("free");
	}
	compare_text("free", text, n);
	progress(&st);

	exact_round("exact2", exact2, &st);
	compare_text("exact2", text, n);
	progress(&st);

	fprintf(to_server, "quit\n");
	fflush(to_server);
	while (fgets(line, sizeof(line), from_server))
		say_line("server", line);
	waitpid(server, &ws, 0);
	printf("A64: server-exit %d\n", WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
	sve_round();
	record_round();
off:
	printf("A64: done\n");
	sync();
	reboot(RB_POWER_OFF);
	return 0;
}
