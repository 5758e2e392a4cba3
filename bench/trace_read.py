#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""How fast the viewers read a trace: events a second of `ftpad report`,
`ftpad replay >/dev/null` and `ftpad dump --folded >/dev/null` on one large
trace directory (the goal: at least 50 million a second on one core).

bench/trace_gen.c writes the trace (default 100M events, in a temporary
directory removed at the end) in the documented format: one thread, a tree
of 64 functions down to depth 6; once as version 2 (zstd-coded blocks, as
the recorder writes them), once as version 1 (16-byte events, 1.6 GB), each
read by every command (--versions says which).  Each command runs
--rounds times after one warm-up run (so the file is in the page cache);
the fastest round's user+system CPU time gives events/s, with the wall
time beside it.  No thresholds: the host is shared.

    bench/trace_read.py [--build DIR] [--events N] [--rounds R] [--versions 2,1] [--keep DIR]
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
COMMANDS = [["report"], ["replay"], ["dump", "--folded"]]


def timed(cmd):
    """(wall s, cpu s) of one run of cmd, its output thrown away."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"))
    ap.add_argument("--events", type=int, default=100_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--versions", default="2,1", help="the events files' versions to read")
    ap.add_argument("--keep", help="write the traces here (DIR.v1, DIR.v2) and keep them")
    args = ap.parse_args()
    ftpad = pathlib.Path(args.build).resolve() / "bin" / "ftpad"
    if not ftpad.exists():
        sys.exit(f"trace_read: {ftpad} is missing: build the ftpad_tool target")
    work = pathlib.Path(tempfile.mkdtemp(prefix="ftpad-trace-read."))
    try:
        gen = work / "trace_gen"
        subprocess.run(["gcc", "-std=gnu11", "-O2", "-I", ROOT / "runtime" / "include",
                        "-I", ROOT / "runtime", HERE / "trace_gen.c",
                        ROOT / "runtime" / "record_encode.c", "-lzstd", "-o", gen], check=True)
        for version in args.versions.split(","):
            trace = pathlib.Path(f"{args.keep}.v{version}" if args.keep
                                 else work / f"trace.v{version}")
            events = int(subprocess.run([gen, trace, str(args.events), version], check=True,
                                        capture_output=True, text=True).stdout)
            size = (trace / "1.0" / "1.events").stat().st_size
            print(f"version {version} trace: {events:,} events, {size / 1e6:.1f} MB, "
                  f"{size / events:.2f} bytes/event ({trace})")
            print(f"{'command':<24} {'cpu s':>8} {'wall s':>8} {'M events/s (cpu)':>17}")
            for cmd in COMMANDS:
                full = [ftpad, *cmd, trace]
                timed(full)  # warm-up: the file into the page cache
                wall, cpu = min(timed(full) for _ in range(args.rounds))
                print(f"{' '.join(cmd):<24} {cpu:8.2f} {wall:8.2f} {events / cpu / 1e6:17.1f}")
            if not args.keep:
                shutil.rmtree(trace)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
