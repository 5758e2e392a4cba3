#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Recording cost: added ns per call of a tight loop over a padded function,
`ftpad record` against `uftrace record` (a -pg build) and LLVM XRay's
flight-data recorder (clang-14 -fxray-instrument), in one run.

Each tool records the same program twice, with N and 2N calls; the
difference of the two wall times, less the same difference unrecorded,
over N, is the added cost of one recorded call (start-up, symbol loading
and the final flush cancel out).  Rounds are interleaved in shuffled order
and the fastest of each is kept: the host is shared.  ftpad's graph row
records an entry and an exit per call (a build with exit=1), as uftrace and
XRay do; its entries-only row (a build without exit sites) records one
event per call.  Both take x86_64's fast recording path (trampoline_x86_64.S
"Fast recording").  The ring row is the graph build under `ftpad record
--ring 64`: the same hot path, the writer keeping the chunks in memory and
writing the newest 64 MB at the end (its bytes/event is then the N and 2N
runs' difference, about 0: both write a full ring).  The floor row is the same loop with two 16-byte events
(rdtsc, an id, the stack pointer) written into a ring by the program itself:
what any TSC-stamped recorder pays on this host, mostly rdtsc.  Bytes per
event: the trace's growth from N to 2N calls, over the N or 2N events the
extra calls made (ftpad's version 2 traces compress them, so the dropped
column, the most events ftpad record's summary said it dropped in any run
of the row, tells a writer that fell behind).  Loop ns: the loop's own time per call
in the 2N run, as the program measures it (no start-up, no final flush:
the ring row's end writes 64 MB at once, which makes its N-to-2N
difference noisy).  --baseline DIR adds the
two ftpad rows again with another build's plugin and ftpad (main's, say),
measured in the same rounds, so that a change is compared on the same
load.  Nothing here asserts on time."""
import argparse
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef FLOOR
struct event { unsigned long time; unsigned what, sp; } ring[4096];
unsigned pos;
static inline void event(unsigned what)
{
	unsigned lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	ring[pos++ % 4096] = (struct event){ (unsigned long)hi << 32 | lo, what,
					     (unsigned)(unsigned long)__builtin_frame_address(0) };
}
__attribute__((noinline)) long leaf(long x) { event(1); x = 3 * x + 1; event(2); return x; }
#else
__attribute__((noinline)) long leaf(long x) { return 3 * x + 1; }
#endif
int main(int argc, char **argv)
{
	long n = atol(argv[1]), s = 0;
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		s += leaf(i);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%ld %lld\n", s, (b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec));
	return 0;
}
"""


GRAPH = "ftpad record (graph)"
FLOOR = "floor: rdtsc + store, 2/call"
ENTRIES = "ftpad record (entries)"
RING = "ftpad record --ring 64"
BASELINE = " baseline"  # the --baseline build's rows: GRAPH + BASELINE, ENTRIES + BASELINE
# Events per call: the entries-only row writes one, the others two.
EVENTS_PER_CALL = {GRAPH: 2, ENTRIES: 1, RING: 2, "uftrace record (-pg)": 2, "XRay FDR": 2,
                   GRAPH + BASELINE: 2, ENTRIES + BASELINE: 1}
DROPPED = re.compile(r"^ftpad: \d+ sites, \d+ enabled, \d+ events, (\d+) dropped", re.M)


def sh(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True,
                          **kw)


def build_ftpad(build_dir, out, src, tools, suffix=""):
    """The graph and entries-only rows of the build in build_dir."""
    plugin = build_dir / "gcc-plugin" / "ftpad.so"
    ftpad = build_dir / "bin" / "ftpad"
    graph, entries = out / f"graph{suffix.strip()}", out / f"ftpad{suffix.strip()}"
    sh(["gcc", "-O2", f"-fplugin={plugin}", "-fplugin-arg-ftpad-exit=1", "-o", graph, src])
    tools[GRAPH + suffix] = lambda n, d: [ftpad, "record", "--force", "-o", d, "--", graph, n]
    if not suffix:
        tools[RING] = lambda n, d: [ftpad, "record", "--ring", "64", "--force", "-o", d, "--",
                                    graph, n]
    sh(["gcc", "-O2", f"-fplugin={plugin}", "-o", entries, src])
    tools[ENTRIES + suffix] = lambda n, d: [ftpad, "record", "--force", "-o", d, "--",
                                            entries, n]


def build(build_dir, out, baseline=None):
    src = out / "loop.c"
    src.write_text(SOURCE)
    tools = {}
    sh(["gcc", "-O2", "-o", out / "plain", src])
    tools["plain"] = lambda n, d: [out / "plain", n]
    sh(["gcc", "-O2", "-DFLOOR", "-o", out / "floor", src])
    tools[FLOOR] = lambda n, d: [out / "floor", n]
    build_ftpad(build_dir, out, src, tools)
    if baseline:
        build_ftpad(baseline, out, src, tools, BASELINE)
    if shutil.which("uftrace"):
        sh(["gcc", "-O2", "-pg", "-o", out / "pg", src])
        tools["uftrace record (-pg)"] = lambda n, d: ["uftrace", "record", "-d", d,
                                                      out / "pg", n]
    else:
        print("uftrace not found: its row is skipped", file=sys.stderr)
    if shutil.which("clang-14"):
        sh(["clang-14", "-O2", "-fxray-instrument", "-fxray-instruction-threshold=1",
            "-o", out / "xray", src])
        tools["XRay FDR"] = lambda n, d: [out / "xray", n]
    else:
        print("clang-14 not found: the XRay row is skipped", file=sys.stderr)
    return tools


def time_run(cmd, tmp):
    """The run's wall time and the loop's own, in s (the program times
    it), and the events ftpad record said it dropped."""
    env = dict(os.environ, XRAY_OPTIONS=f"patch_premain=true xray_mode=xray-fdr "
               f"xray_logfile_base={tmp}/xray-log.")
    t0 = time.perf_counter()
    p = subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, errors="replace", env=env, cwd=tmp)
    took = time.perf_counter() - t0
    m = DROPPED.search(p.stderr)
    return took, int(p.stdout.split()[-1]) / 1e9, int(m.group(1)) if m else 0


def trace_bytes(tmp):
    """Bytes the last run wrote: its trace directory or XRay's logs."""
    files = [f for f in (tmp / "trace").rglob("*") if f.is_file()]
    files += list(tmp.glob("xray-log.*"))
    return sum(f.stat().st_size for f in files)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"),
                    type=pathlib.Path)
    ap.add_argument("--calls", type=int, default=5_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", type=pathlib.Path,
                    help="another build whose ftpad rows run in the same rounds")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ftpad-record-bench-") as tmpname:
        tmp = pathlib.Path(tmpname)
        tools = build(args.build.resolve(), tmp,
                      args.baseline.resolve() if args.baseline else None)
        best = {(name, k): float("inf") for name in tools for k in (1, 2)}
        loop = dict(best)
        size, dropped = {}, dict.fromkeys(tools, 0)
        for _ in range(args.rounds):
            order = [(name, k) for name in tools for k in (1, 2)]
            random.shuffle(order)
            for name, k in order:
                d = tmp / "trace"
                shutil.rmtree(d, ignore_errors=True)
                for f in tmp.glob("xray-log.*"):
                    f.unlink()
                cmd = tools[name](args.calls * k, d)
                took, inside, lost = time_run(cmd, tmp)
                best[name, k] = min(best[name, k], took)
                loop[name, k] = min(loop[name, k], inside)
                dropped[name] = max(dropped[name], lost)
                size[name, k] = trace_bytes(tmp)
        n = args.calls
        added = {}
        plain = (best["plain", 2] - best["plain", 1]) / n * 1e9
        print(f"{'tool':32} {'ns/call':>8} {'added ns':>9} {'loop ns':>8} {'bytes/event':>12} "
              f"{'dropped':>8}")
        for name in tools:
            per = (best[name, 2] - best[name, 1]) / n * 1e9
            added[name] = per - plain
            row = f"{name:32} {per:8.1f} {added[name]:9.1f} {loop[name, 2] / (2 * n) * 1e9:8.1f}"
            if name in EVENTS_PER_CALL:
                grown = size[name, 2] - size[name, 1]
                # XRay FDR writes only on __xray_log_flushLog(), never called here
                row += (f" {grown / (n * EVENTS_PER_CALL[name]):12.2f}" if grown
                        else f" {'not written':>12}")
                if name.startswith("ftpad"):
                    row += f" {dropped[name]:8}"
            print(row)
        for ours in (GRAPH, ENTRIES):
            for peer in ("uftrace record (-pg)", "XRay FDR"):
                if ours in added and peer in added and added[peer] > 0:
                    print(f"{ours} / {peer}: {added[ours] / added[peer]:.2f}x "
                          f"({'entry + exit' if ours == GRAPH else 'entries only'}; "
                          f"{peer}: entry + exit)")


if __name__ == "__main__":
    main()
