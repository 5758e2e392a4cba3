#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""How small and how fast the exports are: `ftpad dump --perfetto`,
`--chrome`, `--folded` and `--pprof` of one trace directory, each written
to a file: bytes an event (against the raw trace's 16 and against Chrome
JSON) and events a second (the goal for --perfetto: at most 12 bytes an
event, at least 20 million events a second).

bench/trace_gen.c writes the trace (default 20M events, one thread, a
tree of 64 functions down to depth 6, 10 ns apart: every step a one-byte
varint, the best case for --perfetto's timestamps).  Each dump runs
--rounds times after one warm-up; the fastest round's user+system CPU
time gives events/s, with the wall time beside it.  No thresholds: the
host is shared.

    bench/export.py [--build DIR] [--events N] [--rounds R] [--keep DIR]
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from trace_read import timed

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
FORMATS = ["--perfetto", "--chrome", "--folded", "--pprof"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"))
    ap.add_argument("--events", type=int, default=20_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", help="write the trace and the dumps here and keep them")
    args = ap.parse_args()
    ftpad = pathlib.Path(args.build).resolve() / "bin" / "ftpad"
    if not ftpad.exists():
        sys.exit(f"export: {ftpad} is missing: build the ftpad_tool target")
    work = pathlib.Path(args.keep) if args.keep else pathlib.Path(
        tempfile.mkdtemp(prefix="ftpad-export."))
    work.mkdir(parents=True, exist_ok=True)
    try:
        gen = work / "trace_gen"
        subprocess.run(["gcc", "-std=gnu11", "-O2", "-I", ROOT / "runtime" / "include",
                        "-I", ROOT / "runtime", HERE / "trace_gen.c",
                        ROOT / "runtime" / "record_encode.c", "-lzstd", "-o", gen], check=True)
        trace = work / "trace"
        # version 1: "raw" is the 16-byte events the dumps are set against
        events = int(subprocess.run([gen, trace, str(args.events), "1"], check=True,
                                    capture_output=True, text=True).stdout)
        raw = (trace / "1.0" / "1.events").stat().st_size
        print(f"trace: {events:,} events, raw {raw / events:.2f} bytes an event ({trace})")
        print(f"{'dump':<12} {'bytes':>14} {'bytes/event':>12} {'x raw':>7} {'x chrome':>9}"
              f" {'cpu s':>7} {'wall s':>7} {'M events/s':>11}")
        rows = []
        for fmt in FORMATS:
            out = work / f"dump{fmt.replace('--', '.')}"
            cmd = [ftpad, "dump", fmt, trace, "-o", out]
            timed(cmd)  # warm-up: the events into the page cache
            wall, cpu = min(timed(cmd) for _ in range(args.rounds))
            rows.append((fmt, out.stat().st_size, cpu, wall))
        chrome = next(size for fmt, size, _, _ in rows if fmt == "--chrome")
        for fmt, size, cpu, wall in rows:
            print(f"{fmt:<12} {size:>14,} {size / events:>12.2f} {size / raw:>7.3f}"
                  f" {size / chrome:>9.3f} {cpu:>7.2f} {wall:>7.2f} {events / cpu / 1e6:>11.1f}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
