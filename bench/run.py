#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Build bench.c once per kind of function-entry instrumentation, run every
build in the same session, interleaved, and print each one's cost per call
as a ratio against the plain call.  No thresholds: this machine is shared
and noisy, so only ratios measured side by side mean anything.

    bench/run.py [--build DIR] [--calls N] [--rounds R] [--no-callgrind]

Times are the fastest of R rounds (each the best of 3 loops of N calls)
per build, rounds interleaved in shuffled order.  Instructions per call
come from callgrind: (Ir(2M calls) - Ir(1M calls)) / 1M, the whole loop
iteration included, so they are exact and comparable across builds.
"""
import argparse
import os
import pathlib
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


def variants(build):
    """(name, compiler, compile flags, link flags, other sources to link in:
    (file in bench/, its compile flags))."""
    plugin = build / "gcc-plugin" / "ftpad.so"
    libdir = build / "runtime"
    inc = ROOT / "runtime" / "include"
    ftpad_link = [f"-L{libdir}", "-lftpad", f"-Wl,-rpath,{libdir}"]
    v = [
        ("plain call", "gcc", [], [], []),
        ("gcc -fpatchable-function-entry=5", "gcc", ["-fpatchable-function-entry=5"], [], []),
        # Compiled with -pg, linked without: NOPs at entry, no gprof timer.
        ("gcc -mfentry -mnop-mcount (no-pie)", "gcc",
         ["-fno-pie", "-pg", "-mfentry", "-mnop-mcount"], ["-no-pie"], []),
        ("ftpad site disabled", "gcc", [f"-fplugin={plugin}", f"-I{inc}"], ftpad_link, []),
        ("ftpad enabled, empty callback", "gcc",
         [f"-fplugin={plugin}", f"-I{inc}", "-DFTPAD_ENABLE"], ftpad_link, []),
        # Linked statically, the trampoline is within reach of the stubs:
        # a direct jmp instead of an indirect one, and local-exec TLS.
        ("ftpad enabled, libftpad.a", "gcc",
         [f"-fplugin={plugin}", f"-I{inc}", "-DFTPAD_ENABLE"], [str(libdir / "libftpad.a"), "-lzstd"], []),
        ("gcc -finstrument-functions, empty hooks", "gcc", ["-finstrument-functions"], [],
         [("hooks.c", [])]),
    ]
    # The bare trampolines (bare_x86_64.S): a direct `call __fentry__` at
    # the entry, as an enabled ftpad site, into the least code that can
    # call a callback; its callback (bare.c) is built without -pg.
    for name, define in [("bare trampoline: call, ret", "-DBARE_RET"),
                         ("bare trampoline: GPRs, empty callback", "-DBARE_GPRS"),
                         ("bare trampoline: GPRs+xmm, empty callback", "-DBARE_XMM"),
                         ("bare trampoline: GPRs+ymm, empty callback", "-DBARE_YMM")]:
        if define == "-DBARE_YMM" and not cpu_has("avx"):
            continue
        v.append((name, "gcc", ["-fno-pie", "-pg", "-mfentry"], ["-no-pie"],
                  [("bare_x86_64.S", [define]), ("bare.c", [])]))
    if shutil.which("clang-14"):
        xray = ["-fxray-instrument", "-fxray-instruction-threshold=1"]
        v += [("clang-14 XRay, unpatched", "clang-14", xray, ["-fxray-instrument"], []),
              ("clang-14 XRay, patched, empty handler", "clang-14", [*xray, "-DXRAY_PATCH"],
               ["-fxray-instrument"], [])]
    return v


def cpu_has(flag):
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and flag in line.split() for line in f)
    except OSError:
        return False


def build_all(build, out):
    built = []
    for i, (name, cc, cflags, ldflags, extras) in enumerate(variants(build)):
        exe, obj = out / f"b{i}", out / f"b{i}.o"
        objs = [obj]
        cmds = [[cc, "-O2", *cflags, "-c", HERE / "bench.c", "-o", obj]]
        # Built apart: the instrumentation flags must not reach them.
        for k, (src, flags) in enumerate(extras):
            objs.append(out / f"b{i}_{k}.o")
            cmds.append(["gcc", "-O2", *flags, "-c", HERE / src, "-o", objs[-1]])
        cmds.append([cc, *objs, *ldflags, "-o", exe])
        for cmd in cmds:
            p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
            if p.returncode:
                print(f"bench: skipped {name}: {p.stderr.strip()}", file=sys.stderr)
                break
        else:
            built.append((name, exe))
    return built


def time_once(exe, calls):
    """ns per call, and the loop's checksum."""
    env = {**os.environ, "XRAY_OPTIONS": "patch_premain=false"}
    p = subprocess.run([str(exe), str(calls), "3"], capture_output=True, text=True, env=env,
                       check=True)
    m = re.search(r"ns_per_call=([\d.]+) checksum=(\d+)", p.stdout)
    return float(m.group(1)), int(m.group(2))


def callgrind_ir(exe, calls, tmp):
    out = tmp / "cg.out"
    env = {**os.environ, "XRAY_OPTIONS": "patch_premain=false"}
    subprocess.run(["valgrind", "--tool=callgrind", "--smc-check=all",
                    f"--callgrind-out-file={out}", str(exe), str(calls), "1"],
                   capture_output=True, check=True, env=env)
    m = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"))
    ap.add_argument("--calls", type=int, default=20_000_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--no-callgrind", action="store_true")
    args = ap.parse_args()
    build = pathlib.Path(args.build).resolve()
    if not (build / "gcc-plugin" / "ftpad.so").exists():
        sys.exit(f"bench/run.py: {build}: no gcc-plugin/ftpad.so; build first or pass --build")
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        built = build_all(build, tmp)
        times = {name: [] for name, _ in built}
        sums = {}
        for _ in range(args.rounds):
            order = list(built)
            random.shuffle(order)
            for name, exe in order:
                t, sums[name] = time_once(exe, args.calls)
                times[name].append(t)
        # The instrumentation must not change what the loop computes.
        wrong = [name for name in sums if sums[name] != sums["plain call"]]
        if wrong:
            sys.exit(f"bench/run.py: a different checksum from the plain call's: {wrong}")
        irs = {}
        if not args.no_callgrind and shutil.which("valgrind"):
            for name, exe in built:
                irs[name] = (callgrind_ir(exe, 2_000_000, tmp) -
                             callgrind_ir(exe, 1_000_000, tmp)) / 1_000_000
    floor = min(times["plain call"])
    floor_ir = irs.get("plain call")
    xray = "clang-14 XRay, patched, empty handler"
    print(f"{'variant':42} {'ns/call min':>11} {'median':>7} {'x plain':>7} "
          f"{'added ns':>8} {'Ir/call':>8} {'added Ir':>8}")
    for name, _ in built:
        t = min(times[name])
        ir = irs.get(name)
        ir_cols = f"{ir:8.1f} {ir - floor_ir:+8.1f}" if ir is not None else f"{'-':>8} {'-':>8}"
        print(f"{name:42} {t:11.2f} {statistics.median(times[name]):7.2f} {t / floor:7.2f} "
              f"{t - floor:+8.2f} {ir_cols}")
    # Each enabled ftpad build's added cost against XRay's (the
    # enabled-call target) and against the bare trampoline that keeps what docs/design.md
    # asks for (its floor), both measured in this run.
    for peer in (xray, "bare trampoline: GPRs+xmm, empty callback",
                 "bare trampoline: GPRs+ymm, empty callback"):
        if peer not in times:
            continue
        added = min(times[peer]) - floor
        print(f"added cost as a fraction of {peer}'s ({added:.2f} ns):")
        for name, _ in built:
            if name.startswith("ftpad enabled"):
                print(f"  {name:40} {(min(times[name]) - floor) / added:5.2f}x")


if __name__ == "__main__":
    main()
