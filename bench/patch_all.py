#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Enable and disable every site of a generated program with many functions,
with ftpad (register/unregister of one ops on all of them, every step of the
int3 protocol included) and with XRay (__xray_patch/__xray_unpatch), and the
start-up of the same program with nothing enabled.  Prints the fastest of R
runs of each; no thresholds.

    bench/patch_all.py [--build DIR] [--functions N] [--runs R]
"""
import argparse
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef FTPAD
#include "ftpad.h"
static void empty(unsigned long ip, unsigned long parent_ip, struct ftpad_ops *ops,
		  struct ftpad_regs *regs)
{
	(void)ip, (void)parent_ip, (void)ops, (void)regs;
}
static struct ftpad_ops ops = { .func = empty };
#endif
#ifdef XRAY
extern int __xray_patch(void), __xray_unpatch(void);
#endif
static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
int main(int argc, char **argv)
{
	double t0, t1, t2;
	int ok = 1;
	if (argc < 2 || strcmp(argv[1], "patch"))
		return 0; /* start-up only */
	t0 = now_us();
#ifdef FTPAD
	ok = ftpad_register_ops(&ops) == 0;
#endif
#ifdef XRAY
	ok = __xray_patch() == 1;
#endif
	t1 = now_us();
#ifdef FTPAD
	ok &= ftpad_unregister_ops(&ops) == 0;
#endif
#ifdef XRAY
	ok &= __xray_unpatch() == 1;
#endif
	t2 = now_us();
	printf("enable_us=%.0f disable_us=%.0f ok=%d\n", t1 - t0, t2 - t1, ok);
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
    (out / "main.c").write_text(MAIN)
    generate(out / "funcs.c", n)
    progs = {}
    specs = [
        ("plain gcc", ["gcc", "-O1"], []),
        ("ftpad", ["gcc", "-O1", f"-fplugin={plugin}", f"-I{inc}", "-DFTPAD"],
         [f"-L{libdir}", "-lftpad", f"-Wl,-rpath,{libdir}"]),
    ]
    if shutil.which("clang-14"):
        specs.append(("XRay", ["clang-14", "-O1", "-fxray-instrument",
                               "-fxray-instruction-threshold=1", "-DXRAY"], ["-fxray-instrument"]))
    for name, cc, ld in specs:
        tag = re.sub(r"\W", "_", name)
        objs = []
        for src in ("main.c", "funcs.c"):
            obj = out / f"{tag}_{src}.o"
            subprocess.run([*cc, "-c", str(out / src), "-o", str(obj)], check=True)
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


def best_patch(exe, runs):
    env = {**os.environ, "XRAY_OPTIONS": "patch_premain=false"}
    en, dis = float("inf"), float("inf")
    for _ in range(runs):
        p = subprocess.run([str(exe), "patch"], capture_output=True, text=True, check=True,
                           env=env)
        m = re.search(r"enable_us=(\d+) disable_us=(\d+) ok=1", p.stdout)
        en, dis = min(en, float(m.group(1))), min(dis, float(m.group(2)))
    return en, dis


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"))
    ap.add_argument("--functions", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    build_dir = pathlib.Path(args.build).resolve()
    if not (build_dir / "gcc-plugin" / "ftpad.so").exists():
        sys.exit(f"bench/patch_all.py: {build_dir}: no gcc-plugin/ftpad.so; build first")
    with tempfile.TemporaryDirectory() as d:
        progs = build(pathlib.Path(d), args.functions, build_dir)
        start = {name: best_startup_us(exe, args.runs * 4) for name, exe in progs.items()}
        print(f"{args.functions} functions; fastest of {args.runs} runs "
              f"({args.runs * 4} for start-up)")
        print(f"{'program':10} {'start-up us':>11} {'added':>8} {'enable all us':>13} "
              f"{'disable all us':>14}")
        for name, exe in progs.items():
            patch = best_patch(exe, args.runs) if name != "plain gcc" else None
            cols = f"{patch[0]:13.0f} {patch[1]:14.0f}" if patch else f"{'-':>13} {'-':>14}"
            print(f"{name:10} {start[name]:11.0f} {start[name] - start['plain gcc']:+8.0f} {cols}")


if __name__ == "__main__":
    main()
