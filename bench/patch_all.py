#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Enable and disable every site of a generated program with many functions,
with ftpad (register/unregister of one ops on all of them, every step of the
int3 protocol included) and with XRay (__xray_patch/__xray_unpatch), and the
start-up of the same program with nothing enabled.  Prints the fastest of R
runs of each; no thresholds.  Each run enables and disables twice: the first
time pays the kernel's copy-on-write of every text page written (both
ftpad and XRay), the second ("again") does not.

    bench/patch_all.py [--build DIR] [--functions N] [--runs R] [--workdir DIR]

ftpad is measured linked with libftpad.so and with libftpad.a (same
objects), and writing code both ways: /proc/self/mem (the default) and
mprotect (FTPAD_TEXT_WRITE=mprotect).  The site tables are read by a first
ftpad_get_stats(), timed apart ("scan"): XRay reads its tables at start-up.
--workdir keeps the generated sources and objects, and reuses them.
"""
import argparse
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent

MAIN = r"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef FTPAD
#include <fcntl.h>
#include <link.h>
#include <unistd.h>
#include "ftpad.h"
static void empty(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		  struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
}
static struct ftpad_ops ops = { .func = empty, .flags = FTPAD_OPS_FL_RECURSION };
#endif
#ifdef XRAY
extern int __xray_patch(void), __xray_unpatch(void);
#endif
static int enable(void)
{
#ifdef FTPAD
	return ftpad_register_ops(&ops) == 0;
#endif
#ifdef XRAY
	return __xray_patch() == 1;
#endif
	return 1;
}
static int disable(void)
{
#ifdef FTPAD
	return ftpad_unregister_ops(&ops) == 0;
#endif
#ifdef XRAY
	return __xray_unpatch() == 1;
#endif
	return 1;
}
static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
#ifdef FTPAD
/* The executable's code segment. */
static int exec_segment(struct dl_phdr_info *info, size_t size, void *range)
{
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			((unsigned long *)range)[0] = info->dlpi_addr + ph->p_vaddr;
			((unsigned long *)range)[1] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
			return 1;
		}
	}
	return 1; /* the first object is the executable */
}
/*
 * What the int3 protocol's three passes cost the kernel alone through
 * /proc/self/mem: the code segment, copied into a buffer and written back
 * unchanged, three times, in ftpad's 128 KiB runs.  No site walk, no
 * sync: a floor for the /proc/self/mem method on this kernel.
 */
static double three_writes_us(void)
{
	static char buf[128 * 1024];
	unsigned long range[2] = { 0, 0 };
	int fd, ok = 1;
	double t0;
	dl_iterate_phdr(exec_segment, range);
	fd = range[0] ? open("/proc/self/mem", O_RDWR | O_CLOEXEC) : -1;
	if (fd < 0)
		return -1;
	t0 = now_us();
	for (int pass = 0; ok && pass < 3; pass++) {
		for (unsigned long a = range[0]; ok && a < range[1]; a += sizeof(buf)) {
			size_t n = range[1] - a < sizeof(buf) ? range[1] - a : sizeof(buf);
			memcpy(buf, (const void *)a, n);
			ok = pwrite(fd, buf, n, (off_t)a) == (ssize_t)n;
		}
	}
	t0 = now_us() - t0;
	close(fd);
	return ok ? t0 : -1;
}
#endif
int main(int argc, char **argv)
{
	double t0, t1, t2, t3, t4, scan = 0, writes3 = 0;
	int ok = 1;
	if (argc < 2 || strcmp(argv[1], "patch"))
		return 0; /* start-up only */
#ifdef FTPAD
	/* Reading the site tables happens at the first call that needs them:
	 * timed apart (XRay reads its tables at start-up). */
	struct ftpad_stats st = { .sz = sizeof(st) };
	t0 = now_us();
	ok = ftpad_get_stats(&st) == 0;
	scan = now_us() - t0;
#endif
	t0 = now_us();
	ok &= enable();
	t1 = now_us();
	ok &= disable();
	t2 = now_us();
	/* Again: the text pages are this process's own copies now. */
	ok &= enable();
	t3 = now_us();
	ok &= disable();
	t4 = now_us();
#ifdef FTPAD
	writes3 = three_writes_us();
	ok &= writes3 >= 0;
#endif
	printf("enable_us=%.0f disable_us=%.0f enable2_us=%.0f disable2_us=%.0f scan_us=%.0f "
	       "floor_us=%.0f ok=%d\n", t1 - t0, t2 - t1, t3 - t2, t4 - t3, scan, writes3, ok);
	return !ok;
}
"""


def generate(path, n):
    with open(path, "w") as f:
        for i in range(n):
            f.write(f"__attribute__((noinline)) int fn{i}(int x) {{ return x * {i % 7 + 2} + {i}; }}\n")


def build(out, n, build_dir):
    plugin = build_dir / "gcc-plugin" / "ftpad.so"
    libdir = build_dir / "runtime"
    inc = ROOT / "runtime" / "include"
    if not (out / "main.c").exists() or (out / "main.c").read_text() != MAIN:
        (out / "main.c").write_text(MAIN)
        for old in out.glob("*main.c.o"):
            old.unlink()
    if not (out / "funcs.c").exists():
        generate(out / "funcs.c", n)
    progs = {}
    specs = [
        ("plain gcc", ["gcc", "-O1"], []),
        ("ftpad", ["gcc", "-O1", f"-fplugin={plugin}", f"-I{inc}", "-DFTPAD"],
         [f"-L{libdir}", "-lftpad", f"-Wl,-rpath,{libdir}"]),
        ("ftpad .a", ["gcc", "-O1", f"-fplugin={plugin}", f"-I{inc}", "-DFTPAD"],
         [str(libdir / "libftpad.a"), "-lzstd"]),
    ]
    if shutil.which("clang-14"):
        specs.append(("XRay", ["clang-14", "-O1", "-fxray-instrument",
                               "-fxray-instruction-threshold=1", "-DXRAY"], ["-fxray-instrument"]))
    for name, cc, ld in specs:
        tag = re.sub(r"\W", "_", name)
        objs = []
        for src in ("main.c", "funcs.c"):
            # Objects are the compiler's: the same flags give the same ones.
            key = hashlib.sha1(" ".join(cc).encode()).hexdigest()[:12]
            obj = out / f"{key}_{src}.o"
            if not obj.exists():
                subprocess.run([*cc, "-c", str(out / src), "-o", str(obj) + ".tmp"], check=True)
                os.rename(str(obj) + ".tmp", obj)
            objs.append(str(obj))
        subprocess.run([cc[0], *objs, *ld, "-o", str(out / tag)], check=True)
        progs[name] = out / tag
    return progs


def best_startup_us(exe, runs):
    env = {**os.environ, "XRAY_OPTIONS": "patch_premain=false"}
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([str(exe)], check=True, env=env)
        best = min(best, (time.perf_counter() - t0) * 1e6)
    return best


def best_patch(exe, runs, extra_env=None):
    """Fastest (enable, disable, enable again, disable again, scan, three
    writes of the code through /proc/self/mem) in us."""
    env = {**os.environ, "XRAY_OPTIONS": "patch_premain=false", **(extra_env or {})}
    best = [float("inf")] * 6
    for _ in range(runs):
        p = subprocess.run([str(exe), "patch"], capture_output=True, text=True, check=True,
                           env=env)
        m = re.search(r"enable_us=(\d+) disable_us=(\d+) enable2_us=(\d+) disable2_us=(\d+) "
                      r"scan_us=(\d+) floor_us=(\d+) ok=1", p.stdout)
        best = [min(b, float(x)) for b, x in zip(best, m.groups())]
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"))
    ap.add_argument("--functions", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workdir")
    args = ap.parse_args()
    build_dir = pathlib.Path(args.build).resolve()
    if not (build_dir / "gcc-plugin" / "ftpad.so").exists():
        sys.exit(f"bench/patch_all.py: {build_dir}: no gcc-plugin/ftpad.so; build first")
    with tempfile.TemporaryDirectory() as d:
        work = pathlib.Path(args.workdir or d)
        work.mkdir(parents=True, exist_ok=True)
        progs = build(work, args.functions, build_dir)
        start = {name: best_startup_us(exe, args.runs * 4) for name, exe in progs.items()}
        print(f"{args.functions} functions; fastest of {args.runs} runs "
              f"({args.runs * 4} for start-up); scan = reading the site tables")
        print(f"{'program':26} {'start-up us':>11} {'added':>7} {'scan us':>8} "
              f"{'enable us':>10} {'disable us':>10} {'again':>7} {'again':>7}")
        rows = []
        for name, exe in progs.items():
            variants = [(name, None)]
            if name.startswith("ftpad"):
                variants = [(f"{name} /proc/self/mem", {"FTPAD_TEXT_WRITE": "procmem"}),
                            (f"{name} mprotect", {"FTPAD_TEXT_WRITE": "mprotect"})]
            for label, env in variants:
                patch = best_patch(exe, args.runs, env) if name != "plain gcc" else None
                rows.append((label, name, patch))
        xray = next((p for label, _, p in rows if label == "XRay"), None)
        for label, name, patch in rows:
            cols = (f"{patch[4]:8.0f} {patch[0]:10.0f} {patch[1]:10.0f} {patch[2]:7.0f} "
                    f"{patch[3]:7.0f}" if patch
                    else f"{'-':>8} {'-':>10} {'-':>10} {'-':>7} {'-':>7}")
            print(f"{label:26} {start[name]:11.0f} {start[name] - start['plain gcc']:+7.0f} {cols}")
        if xray:
            print("ratios to XRay (enable, disable, enable again, disable again):")
            for label, name, patch in rows:
                if patch and label != "XRay":
                    print(f"  {label:24} " +
                          " ".join(f"{patch[i] / xray[i]:5.2f}x" for i in range(4)))
        # The three passes of the int3 protocol, written by the kernel
        # alone: what no change to ftpad can go below through
        # /proc/self/mem.
        for label, name, patch in rows:
            if patch and label.endswith("/proc/self/mem"):
                line = f"{label}: three writes of the code alone {patch[5]:.0f} us"
                if xray:
                    line += f" = {patch[5] / xray[2]:.2f}x XRay's enable again"
                print(line)


if __name__ == "__main__":
    main()
