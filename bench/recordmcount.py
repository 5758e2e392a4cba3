#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Wall time of recordmcount-ng against Linux 6.12's own scripts/recordmcount
over every object of a real kernel build, as Kbuild runs them (one process
per object) and in batches of 100 objects per process.

The objects are the ones Kbuild handed to recordmcount in the kernel tests'
recordmcount builds (tests/kbuild/kernel.py, `rmc=True`): x86_64 with
recordmcount forced, and mips (malta), kept as gcc wrote them (but those
Linux's recordmcount fails on, which it cannot time).  The folders
are built (a few minutes each) if the cache does not hold them yet.  The
reference is the scripts/recordmcount Kbuild built in that folder.  Each
round copies the objects afresh into a tmpfs for each tool (the copy is not
timed), and the tools take turns; the fastest round of each is printed, with
the ratio ng / Linux (below 1: recordmcount-ng is faster), in wall time and
in CPU time (user + system of the tools' processes).  No thresholds.

    bench/recordmcount.py [--build DIR] [--rounds R] [--arch x86_64|mips ...]
"""
import argparse
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "kbuild"))
import kernel  # noqa: E402
import rmcompare  # noqa: E402


def copy_objects(out, rels, dest):
    for rel in rels:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / rmcompare.KEEP / rel, dest / rel)


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(tool, rels, cwd, per_process):
    """(wall, CPU) seconds to run `tool` over every object, `per_process`
    objects per run.  The CPU time (user + system of the tool's processes)
    moves less than the wall time on a shared host."""
    t0, c0 = time.perf_counter(), cpu_children()
    for i in range(0, len(rels), per_process):
        p = subprocess.run([str(tool), *map(str, rels[i:i + per_process])], cwd=cwd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise SystemExit(f"{tool} failed on {rels[i]}...: {p.stderr.decode()[:500]}")
    return time.perf_counter() - t0, cpu_children() - c0


def bench_arch(arch, ng, rounds, scratch):
    out = kernel.rmc_build(arch)
    # Linux's own, as Kbuild built it in that folder (moved aside where the
    # keeping wrapper took its place).
    ref = out / "scripts" / "recordmcount.ref"
    if not ref.exists():
        ref = out / "scripts" / "recordmcount"
    # Both tools on the same objects: leave out those Linux's fails on.
    failed = rmcompare.linux_failures(out)
    rels = [r for r in rmcompare.kept_objects(out) if str(r) not in failed]
    size = sum((out / rmcompare.KEEP / r).stat().st_size for r in rels)
    best = {}
    for r in range(rounds):
        order = [("Linux", ref), ("ng", ng)]
        if r % 2:
            order.reverse()
        for mode, per in (("1 object per run", 1), ("100 objects per run", 100)):
            for name, tool in order:
                work = pathlib.Path(tempfile.mkdtemp(dir=scratch))
                copy_objects(out, rels, work)
                wall, cpu = timed(tool, rels, work, per)
                shutil.rmtree(work)
                key = (mode, name)
                old = best.get(key, (wall, cpu))
                best[key] = (min(old[0], wall), min(old[1], cpu))
    print(f"\n{arch}: {len(rels)} objects, {size / 1e6:.1f} MB, best of {rounds} rounds"
          + (f" (left out, Linux's fails on them: {', '.join(failed)})" if failed else ""))
    print("| mode | Linux wall s | ng wall s | ng / Linux | Linux CPU s | ng CPU s | ng / Linux |")
    print("|---|---|---|---|---|---|---|")
    for mode in ("1 object per run", "100 objects per run"):
        (lw, lc), (nw, nc) = best[(mode, "Linux")], best[(mode, "ng")]
        print(f"| {mode} | {lw:.3f} | {nw:.3f} | {nw / lw:.2f} | {lc:.3f} | {nc:.3f} "
              f"| {nc / lc:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"),
                    help="ftpad build folder (default build/ or $FTPAD_BUILD)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--arch", action="append", choices=("x86_64", "mips"),
                    help="default: both")
    args = ap.parse_args()
    ng = pathlib.Path(args.build).resolve() / "recordmcount" / "recordmcount-ng"
    if not ng.exists():
        raise SystemExit(f"{ng} is missing: build ftpad first")
    scratch = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    for arch in args.arch or ("x86_64", "mips"):
        bench_arch(arch, ng, args.rounds, scratch)


if __name__ == "__main__":
    main()
