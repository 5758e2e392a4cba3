// SPDX-License-Identifier: MIT
// /init for the arm64 and mips kernel tests (no busybox for them on this
// host): the same steps as the busybox script in kernel.py.  Built static
// with aarch64-linux-gnu-gcc or mips-linux-gnu-gcc.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <time.h>
#include <unistd.h>

#define T "/sys/kernel/tracing/"

static void put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		printf("E2E: cannot write %s to %s\n", s, path);
	if (fd >= 0)
		close(fd);
}

static void append(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		printf("E2E: cannot append %s to %s\n", s, path);
	if (fd >= 0)
		close(fd);
}

static char buf[1 << 20];

static size_t slurp(const char *path)
{
	int fd = open(path, O_RDONLY);
	size_t n = 0;
	ssize_t r;
	if (fd < 0)
		return 0;
	while (n < sizeof(buf) - 1 && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += r;
	buf[n] = 0;
	close(fd);
	return n;
}

static int count(const char *needle)
{
	int c = 0;
	for (const char *p = buf; (p = strstr(p, needle)); p++)
		c++;
	return c;
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, NULL);
	printf("E2E: init reached\n");
	slurp(T "available_tracers");
	printf("E2E: available_tracers: %s", buf);
	slurp(T "available_filter_functions");
	printf("E2E: available_filter_functions: %d\n", count("\n"));
	put(T "set_ftrace_filter", "vfs_read");
	append(T "set_ftrace_filter", "schedule");
	put(T "current_tracer", "function");
	slurp(T "current_tracer");
	printf("E2E: current_tracer: %s", buf);
	for (int i = 0; i < 3; i++) {
		struct timespec ts = { 1, 0 };
		slurp("/proc/version");
		if (nanosleep(&ts, NULL))
			printf("E2E: nanosleep: %s\n", strerror(errno));
		sched_yield(); // schedule(), should the sleep not
	}
	put(T "tracing_on", "0");
	slurp(T "trace");
	int r = count(" vfs_read <-"), s = count(" schedule <-");
	fwrite(buf, 1, strlen(buf) > 3000 ? 3000 : strlen(buf), stdout);
	printf("\nE2E: vfs_read hits=%d schedule hits=%d\n", r, s);
	printf("E2E: FTRACE-RESULT %s\n", r > 0 && s > 0 ? "PASS" : "FAIL");
	if (slurp(T "instances/ftpad_early/trace")) // CONFIG_FTPAD_EARLY_TRACE
		printf("E2E-EARLY-BEGIN\n%sE2E-EARLY-END\n", buf);
	sync();
#ifdef __mips__
	// malta powers off only through the PIIX4 (PCI, not in this config);
	// a reset ends QEMU as well, given -no-reboot.
	reboot(RB_AUTOBOOT);
#else
	reboot(RB_POWER_OFF);
#endif
	return 0;
}
