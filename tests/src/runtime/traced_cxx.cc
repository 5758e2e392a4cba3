// SPDX-License-Identifier: MIT
// traced_cxx.cc - C++ exceptions thrown through traced frames, with
// destructors run during unwinding, compiled with the GCC plugin.  Like
// traced.c: the output must not change when FTPAD_TRACED=1 registers an ops
// (on "*t_*", the mangled names) whose callback destroys the call-clobbered
// registers; the (ip, parent_ip) events go to FTPAD_EVENTS.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "ftpad.h"

#define OPAQUE __attribute__((noipa))

namespace {

struct event {
	unsigned long ip, parent_ip;
};

event events[256];
unsigned int nevents;
int destroyed;

void record(unsigned long ip, unsigned long parent_ip, ftpad_ops *, ftpad_regs *)
{
	unsigned int i = __atomic_fetch_add(&nevents, 1, __ATOMIC_RELAXED);

	if (i < 256)
		events[i] = { ip, parent_ip };
#if defined(__x86_64__)
	__asm__ volatile("xor %%eax, %%eax\n\tmov $-1, %%rcx\n\tmov $-1, %%rdx\n\t"
			 "mov $-1, %%rsi\n\tmov $-1, %%rdi\n\tmov $-1, %%r8\n\t"
			 "mov $-1, %%r9\n\tmov $-1, %%r10\n\tmov $-1, %%r11\n\t"
			 "pcmpeqd %%xmm0, %%xmm0\n\tpcmpeqd %%xmm1, %%xmm1"
			 ::: "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11",
			 "xmm0", "xmm1", "cc");
#elif defined(__aarch64__)
	__asm__ volatile("mov x0, #-1\n\tmov x1, x0\n\tmov x2, x0\n\tmov x3, x0\n\t"
			 "mov x8, x0\n\tmov x9, x0\n\tmov x18, x0\n\tmovi v0.2d, #-1"
			 ::: "x0", "x1", "x2", "x3", "x8", "x9", "x18", "v0", "cc");
#endif
}

ftpad_ops ops = { record, nullptr, FTPAD_OPS_FL_RECURSION, nullptr, {} };

} // namespace

struct t_Guard {
	int id;
	OPAQUE explicit t_Guard(int i) : id(i) {}
	OPAQUE ~t_Guard() { destroyed += id; }
};

OPAQUE void t_thrower(int depth)
{
	t_Guard guard(depth + 1);

	if (depth == 0)
		throw std::runtime_error("boom");
	t_thrower(depth - 1);
}

OPAQUE int t_handled(const char *what)
{
	return (int)std::string(what).size();
}

OPAQUE int t_catcher(int depth)
{
	try {
		t_thrower(depth);
	} catch (const std::exception &e) {
		return t_handled(e.what());
	}
	return -1;
}

OPAQUE int t_after(int x)
{
	return x + 1;
}

int main()
{
	const char *path = getenv("FTPAD_EVENTS");
	bool tracing = getenv("FTPAD_TRACED") && path;
	int err, caught, after;

	if (tracing && ((err = ftpad_set_filter(&ops, "*t_*", 1)) || (err = ftpad_register_ops(&ops)))) {
		std::printf("ftpad: %s\n", ftpad_strerror(err));
		return 1;
	}
	caught = t_catcher(3);
	after = t_after(caught);
	std::printf("exceptions: %d %d %d\n", caught, destroyed, after);
	if (tracing) {
		ftpad_unregister_ops(&ops);
		FILE *f = std::fopen(path, "w");
		Dl_info info;

		dladdr((void *)t_after, &info);
		std::fprintf(f, "mark exe %#lx after 0\n", (unsigned long)info.dli_fbase);
		for (unsigned int i = 0; i < nevents && i < 256; i++)
			std::fprintf(f, "event %d %d %#lx %#lx\n", getpid(), getpid(), events[i].ip,
				     events[i].parent_ip);
		std::fclose(f);
	}
	return 0;
}
