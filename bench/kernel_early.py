#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Very early kernel tracing (kbuild/0006): what tracing N functions from
the start of start_kernel() costs the boot, against the same boot tracing
none, and what the mailing-list design (every function's mcount call
live, each one searching the filter) would cost, all in one run.

    bench/kernel_early.py [--arch x86_64|arm64-Os] [--runs R] [--build DIR]

Boots the cached early-tracing kernel of tests/kbuild/test_kbuild_early.py (built
if missing) under QEMU TCG, R times each with:
- `ftpad_early=` a glob that matches nothing: the tracer starts, patches
  no site and measures its span (start_kernel() to ftrace_init());
- `ftpad_early=` the chosen functions of the test (setup_arch,
  mm_core_init, memblock_*);
- `ftpad_early=*`: every site, so that every call made before
  ftrace_init() goes through the trampoline and is counted (recorded or
  lost), the number the seed's design would search for.

The span is the kernel's own "ftpad_early: E events, L lost, in U us" line,
measured with the counter the events use.  QEMU runs with `-icount
shift=0`: the guest's clock advances one nanosecond per instruction it
executes, whatever the host is doing, so a span is a count of guest
instructions (U us = U * 1000 instructions; on x86_64 the guest is told its
TSC runs at 1 GHz, which it then does) and the same boot gives the same
number every time: one run is enough, and more runs must agree.  The
seed's cost is estimated as every call before ftrace_init() paying what a
traced call pays here (call, saved registers, one callback); its binary
search would come on top.  Instructions of a TCG guest, not time on
hardware: read the ratios."""
import argparse
import os
import pathlib
import re
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "kbuild"))

SPAN = re.compile(r"ftpad_early: (\d+) events, (\d+) lost, in (\d+) us; (\d+) sites back")
PATCHED = re.compile(r"ftpad_early: (\d+) sites patched")


# Guest time = guest instructions (see above).
ICOUNT = ["-icount", "shift=0"]


def boot_args(arch, early_args):
    """The command line: on x86_64 the TSC's rate, which under ICOUNT is
    1 GHz (nothing in the guest can calibrate it)."""
    return f"{early_args} tsc_early_khz=1000000" if arch == "x86_64" else early_args


def measure(kernel, arch, build, workdir, append):
    text, _ = kernel.boot(arch, build, workdir, append=append, qemu_extra=ICOUNT)
    span, patched = SPAN.search(text), PATCHED.search(text)
    if not span or not patched:
        raise SystemExit(f"{arch}: no ftpad_early lines in the boot log of {append!r}:\n"
                         + text[-2000:])
    events, lost, us, _ = (int(g) for g in span.groups())
    return dict(sites=int(patched.group(1)), calls=events + lost, us=us)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="x86_64", choices=["x86_64", "arm64-Os"])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"))
    ap.add_argument("--workdir", default="/tmp/ftpad-bench-kernel-early")
    args = ap.parse_args()
    os.environ["FTPAD_BUILD"] = str(args.build)
    import kernel
    import test_kbuild_early as early

    build = early.early_build(args.arch)
    cases = [("none", "ftpad_early=ftpad_bench_matches_nothing"),
             ("chosen", f"ftpad_early={early.CHOSEN}"),
             ("all", "ftpad_early=*")]
    results = {}
    for name, append in cases:
        runs = [measure(kernel, args.arch, build, pathlib.Path(args.workdir) / f"{name}-{i}",
                        boot_args(args.arch, append)) for i in range(args.runs)]
        results[name] = dict(runs[0], us=statistics.median(r["us"] for r in runs),
                             all_us=[r["us"] for r in runs])
    base = results["none"]["us"]
    per_call = (results["all"]["us"] - base) / max(results["all"]["calls"], 1)
    print(f"{args.arch}, TCG -icount shift=0, median of {args.runs} boots; span = "
          "start_kernel() to ftrace_init(), in guest microseconds = thousands of "
          "guest instructions")
    print("| ftpad_early= | sites patched | calls traced | span us (runs) | added us | "
          "span / none |")
    print("|---|---|---|---|---|---|")
    for name, _ in cases:
        r = results[name]
        print(f"| {name} | {r['sites']} | {r['calls']} | {r['us']:.0f} "
              f"({', '.join(str(u) for u in r['all_us'])}) | {r['us'] - base:.0f} | "
              f"{r['us'] / base:.2f} |")
    seed = results["all"]["calls"] * per_call
    print(f"\nper traced call: {per_call * 1000:.0f} guest instructions")
    print(f"mcount-call design, chosen functions: every one of the "
          f"{results['all']['calls']} calls before ftrace_init() pays a call and a "
          f"search, at least {seed:.0f} us; ftpad pays "
          f"{results['chosen']['us'] - base:.0f} us for the chosen "
          f"{results['chosen']['calls']} calls; ratio ftpad / seed = "
          f"{(results['chosen']['us'] - base) / seed:.3f}")


if __name__ == "__main__":
    main()
