#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Attaching to a running process: `ftpad attach` against bpftrace's uprobes,
in one run, on a generated program with many padded functions (100,000 by
default) whose main loop calls one of them, leaf(), without end.

    bench/attach.py [--build DIR] [--functions N] [--files F] [--runs R]
                    [--workdir DIR] [--no-bpftrace]

Measured, the fastest and the median of R runs each:
- attach latency: from starting the command to the first event.  ftpad:
  the first event's time in the trace (TSC ticks), put on CLOCK_MONOTONIC
  with the trace's clock_sync pairs, less the CLOCK_MONOTONIC time at
  which the command was started; the time at which the tool said
  "started" is printed beside it.  bpftrace: its probe prints `nsecs`
  (CLOCK_MONOTONIC) at its first hit.  Each with leaf() alone chosen and
  with every function chosen (ftpad: no filter).  bpftrace refuses more
  than 512 probes (BPFTRACE_MAX_PROBES) and attaches them one at a time,
  about 0.1 s each on the 100,000-function program: its "every function"
  row is a sample, the functions named fn999* (111 of 100,000), then leaf,
  with the limit raised, and the time per probe is printed with what
  every function would take.
- detach latency: from the SIGINT to the command's exit (ftpad: sites
  disabled, buffers drained, trace written; bpftrace: probes removed,
  maps printed).
- added ns per call: the program times its own rounds of calls to leaf();
  the fastest round begun once attached (after ftpad said "started", after
  bpftrace's first hit; each round prints its start) less the fastest round
  of the same program
  unattached, against the same under `ftpad record -F leaf` and under
  bpftrace.  Entries only (the program has no exit sites), as bpftrace's
  uprobe counts entries.
Nothing here asserts on time; the goals (attach and detach under 50 ms)
are printed beside the figures."""
import argparse
import concurrent.futures
import os
import pathlib
import queue
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
GOAL_MS = 50
# How long bpftrace gets to detach (112 probes take about 12 s here).
BPFTRACE_EXIT_S = 120
# bpftrace's published figure, for when it cannot run here.
UPROBE_NS = "a kernel uprobe costs 3,224 ns per event (bpftime #97)"

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) long leaf(long x) { return 3 * x + 1; }
static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}
int main(int argc, char **argv)
{
	long calls = atol(argv[1]), rounds = atol(argv[2]), s = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	for (long r = 0; !rounds || r < rounds; r++) {
		double t0 = now_ns();
		for (long i = 0; i < calls; i++)
			s += leaf(i);
		printf("round %ld start=%.0f ns=%.3f s=%ld\n", r, t0, (now_ns() - t0) / calls,
		       s & 1);
	}
	return 0;
}
"""


def generate(work, functions, files):
    """FILES sources with FUNCTIONS functions fn0... between them, and
    main.c; a file is rewritten only when its text changes."""
    def put(path, text):
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    put(work / "main.c", MAIN)
    per = -(-functions // files)
    sources = [work / "main.c"]
    for f in range(files):
        lines = [f"__attribute__((noinline)) int fn{i}(int x) {{ return x * {i % 7 + 2} + {i}; }}\n"
                 for i in range(f * per, min(functions, (f + 1) * per))]
        put(work / f"funcs{f}.c", "".join(lines))
        sources.append(work / f"funcs{f}.c")
    return sources


def compile_one(cc, src):
    """SRC's object, compiled only when the source is newer."""
    obj = src.with_suffix(".o")
    if not obj.exists() or obj.stat().st_mtime < src.stat().st_mtime:
        subprocess.run([*cc, "-c", str(src), "-o", str(obj) + ".tmp"], check=True)
        os.rename(str(obj) + ".tmp", obj)
    return obj


def build(work, functions, files, build_dir, jobs):
    """The program, built with the plugin at -O1, JOBS compilers at a
    time; the seconds it took (0 for objects already there)."""
    plugin = build_dir / "gcc-plugin" / "ftpad.so"
    cc = ["gcc", "-O1", f"-fplugin={plugin}"]
    sources = generate(work, functions, files)
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        objs = list(pool.map(lambda s: compile_one(cc, s), sources))
    # Not "prog": on a shared machine a process of that name is easily
    # someone else's to kill (two such SIGKILLs in one afternoon here).
    exe = work / "attach-bench-prog"
    subprocess.run(["gcc", *map(str, objs), "-o", str(exe)], check=True)
    return exe, time.perf_counter() - t0


def line_queue(stream):
    """A queue that a daemon thread fills with STREAM's lines (None at its
    end), so that a writer never blocks on a full pipe."""
    q = queue.Queue()

    def pump():
        for line in stream:
            q.put(line)
        q.put(None)
    threading.Thread(target=pump, daemon=True).start()
    return q


class Program:
    """The generated program running, printing a line per round, for
    ROUNDS rounds (0: until killed).  Its lines are read as they come."""

    def __init__(self, cmd, calls, rounds=0):
        self.p = subprocess.Popen([*map(str, cmd), str(calls), str(rounds)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines = line_queue(self.p.stdout)
        line = self.lines.get()
        assert line == "ready\n", line

    def rounds(self, n, after=0):
        """ns per call of the next N rounds that started after AFTER
        (CLOCK_MONOTONIC ns): rounds begun earlier are skipped."""
        out = []
        while len(out) < n:
            line = self.lines.get()
            m = re.match(r"round \d+ start=(\d+) ns=([\d.]+) ", line or "")
            assert m, f"{self.p.args}: {line!r}"
            if int(m.group(1)) > after:
                out.append(float(m.group(2)))
        return out

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def clock_sync(info):
    """The trace's (ticks, ns) pairs, first and last."""
    pairs = [tuple(map(int, line.split("=", 1)[1].split()))
             for line in info.read_text().splitlines() if line.startswith("clock_sync=")]
    if len(pairs) < 2:
        raise SystemExit(f"{info}: fewer than two clock_sync lines")
    return pairs[0], pairs[-1]


def first_event_ns(trace):
    """CLOCK_MONOTONIC ns of the earliest event in TRACE, from each
    thread's first event and the clock_sync pairs (docs/format.md)."""
    (t0, n0), (t1, n1) = clock_sync(trace / "info")
    first = None
    for f in trace.glob("*/*.events"):
        with open(f, "rb") as fh:
            data = fh.read(64 + 40)
        if len(data) < 64 + 16:
            continue
        # version 1: the first event's time; version 2: the first block's
        # first_time, which is its first event's (the recorder writes it so)
        version = struct.unpack_from("<H", data, 8)[0]
        if version == 1:
            ticks = struct.unpack_from("<Q", data, 64)[0]
        elif len(data) == 64 + 40:
            ticks = struct.unpack_from("<Q", data, 64 + 32)[0]
        else:
            continue
        first = ticks if first is None else min(first, ticks)
    if first is None:
        raise SystemExit(f"{trace}: no event")
    return n0 + (first - t0) * (n1 - n0) / (t1 - t0)


def ftpad_attach(ftpad, prog, trace, filters, rounds=0):
    """One attach to PROG, ROUNDS of it timed while attached (at least one
    is waited for, so that the trace has an event even when the scheduler
    kept the program off the CPU for the first milliseconds), and the
    detach: (attach ms to the first event, ms to "started", detach ms,
    the ROUNDS' ns per call)."""
    pid = prog.p.pid
    shutil.rmtree(trace, ignore_errors=True)
    start = time.monotonic_ns()
    p = subprocess.Popen([str(ftpad), "attach", str(pid), *filters, "-o", str(trace)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = ""
    for line in p.stdout:
        out += line
        if re.match(r"ftpad: attached to process \d+", line):
            break
    else:
        p.wait()
        raise SystemExit(f"ftpad attach exited {p.returncode}:\n{out}")
    started = time.monotonic_ns()
    timed = prog.rounds(max(rounds, 1), after=started)[:rounds]
    stop = time.monotonic_ns()
    p.send_signal(signal.SIGINT)
    rest, _ = p.communicate()
    detach = time.monotonic_ns() - stop
    if p.returncode:
        raise SystemExit(f"ftpad attach exited {p.returncode}:\n{out}{rest}")
    return ((first_event_ns(trace) - start) / 1e6, (started - start) / 1e6, detach / 1e6,
            timed)


def bpftrace_attach(exe, pid, probes, timeout, prog=None, rounds=0, max_probes=None):
    """The same with bpftrace: (attach ms to the first event, detach ms,
    ns per call), or None when it did not start within TIMEOUT s.
    max_probes: BPFTRACE_MAX_PROBES, when more than its default 512."""
    script = (f"{probes} {{ if (@first == 0) {{ @first = nsecs; "
              f"printf(\"first %lld\\n\", nsecs); }} @c = count(); }}")
    start = time.monotonic_ns()
    env = dict(os.environ, **({"BPFTRACE_MAX_PROBES": str(max_probes)} if max_probes else {}))
    p = subprocess.Popen(["bpftrace", "-p", str(pid), "-e", script], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env)
    out, first = "", None
    lines = line_queue(p.stdout)
    deadline = time.monotonic() + timeout
    while first is None:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:  # no hit within TIMEOUT
            break
        if line is None:
            break
        out += line
        m = re.match(r"first (\d+)", line)
        first = int(m.group(1)) if m else None
    if first is None:
        p.kill()
        p.wait()
        return None, out
    timed = prog.rounds(rounds, after=first) if prog else []
    stop = time.monotonic_ns()
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=BPFTRACE_EXIT_S)
    except subprocess.TimeoutExpired:
        # Seen twice in four runs here: bpftrace went on after the SIGINT.
        p.kill()
        p.wait()
        return None, out + f"ERROR: still running {BPFTRACE_EXIT_S} s after SIGINT; killed\n"
    detach = time.monotonic_ns() - stop
    while (line := lines.get()) is not None:
        out += line
    return ((first - start) / 1e6, detach / 1e6, timed), out


def bpftrace_runs(exe):
    """Why bpftrace cannot run here, or None when it can."""
    if not shutil.which("bpftrace"):
        return "cannot run here: not installed"
    prog = Program([exe], 100000)
    try:
        res, out = bpftrace_attach(exe, prog.p.pid, f"uprobe:{exe}:leaf", 30)
    finally:
        prog.stop()
    return None if res else f"cannot run here: {out.strip()[-300:]}"


def fmt(values):
    return f"{min(values):9.1f} {statistics.median(values):9.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"))
    ap.add_argument("--functions", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=1_000_000, help="calls per timed round")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per run")
    ap.add_argument("--workdir")
    ap.add_argument("--no-bpftrace", action="store_true")
    ap.add_argument("--bpftrace-timeout", type=float, default=120,
                    help="seconds bpftrace gets to attach its sample of functions")
    args = ap.parse_args()
    build_dir = pathlib.Path(args.build).resolve()
    ftpad = build_dir / "bin" / "ftpad"
    for need in (build_dir / "gcc-plugin" / "ftpad.so", ftpad,
                 build_dir / "runtime" / "libftpad.so"):
        if not need.exists():
            sys.exit(f"bench/attach.py: {need} is missing; build first")
    with tempfile.TemporaryDirectory(prefix="ftpad-attach-bench-") as d:
        tmp = pathlib.Path(d)
        work = pathlib.Path(args.workdir) if args.workdir else tmp / "work"
        work.mkdir(parents=True, exist_ok=True)
        exe, secs = build(work, args.functions, args.files, build_dir, args.jobs)
        print(f"{args.functions} functions in {args.files} files, gcc -O1 with the plugin, "
              f"-j{args.jobs}: built in {secs:.1f} s")
        why_not = "not measured (--no-bpftrace)" if args.no_bpftrace else bpftrace_runs(exe)

        # ftpad: the first attach to a process (libftpad is loaded) and the
        # next (it is there already), with -F leaf and with every function.
        rows = [f"{f}, {n}" for f in ("-F leaf", "every function") for n in ("first", "again")]
        attach, started, detach = ({k: [] for k in rows} for _ in range(3))
        per_call = {"plain": [], "ftpad attach": [], "ftpad record": []}
        bpf = {"bpftrace, leaf": [], "bpftrace, every function": []}
        bpf_detach = {k: [] for k in bpf}
        bpf_note = {}
        trace = tmp / "trace"
        for run in range(args.runs):
            for which, filters in (("-F leaf", ["-F", "leaf"]), ("every function", [])):
                prog = Program([exe], args.calls)
                try:
                    if filters:
                        per_call["plain"] += prog.rounds(args.rounds, after=time.monotonic_ns())
                    for n in ("first", "again"):
                        key = f"{which}, {n}"
                        timed = args.rounds if filters and n == "first" else 0
                        a, s, dt, rounds = ftpad_attach(ftpad, prog, trace, filters, timed)
                        attach[key].append(a)
                        started[key].append(s)
                        detach[key].append(dt)
                        per_call["ftpad attach"] += rounds
                    if not why_not:
                        bpftrace_run(exe, prog, which, args, bpf, bpf_detach, bpf_note,
                                     per_call)
                finally:
                    prog.stop()
            # It ends by itself: killing `ftpad record` would leave it running.
            prog = Program([ftpad, "record", "--force", "-F", "leaf", "-o", trace, "--", exe],
                           args.calls, args.rounds)
            try:
                per_call["ftpad record"] += prog.rounds(args.rounds)
                prog.p.wait(timeout=60)
            finally:
                prog.stop()
        report(args, attach, started, detach, per_call, bpf, bpf_detach, bpf_note, why_not)


def bpftrace_run(exe, prog, which, args, bpf, bpf_detach, bpf_note, per_call):
    """bpftrace's row for WHICH functions, on PROG: leaf() alone, timed
    while attached, or every function (which it may refuse)."""
    key = "bpftrace, leaf" if which == "-F leaf" else "bpftrace, every function"
    if key in bpf_note:
        return
    leaf = key.endswith("leaf")
    # leaf last: bpftrace attaches in order, and the first event is leaf's
    spec = f"uprobe:{exe}:leaf" if leaf else f"uprobe:{exe}:{SAMPLE}*,uprobe:{exe}:leaf"
    res, out = bpftrace_attach(exe, prog.p.pid, spec, 60 if leaf else args.bpftrace_timeout,
                               prog if leaf else None, args.rounds,
                               None if leaf else sample_size(args.functions) + 1)
    if res is None:
        lines = [line for line in out.splitlines() if line.startswith("ERROR")]
        bpf_note[key] = (lines or out.strip().splitlines() or ["no output"])[-1]
        return
    bpf[key].append(res[0])
    bpf_detach[key].append(res[1])
    per_call.setdefault("bpftrace", []).extend(res[2])


# bpftrace's "every function": leaf and the functions whose names start so.
SAMPLE = "fn999"


def sample_size(functions):
    """How many of fn0 .. fn<functions-1> SAMPLE* names."""
    return sum(1 for i in range(functions) if f"fn{i}".startswith(SAMPLE))


def table(title, ours, peers=None, notes=None):
    """A table of ms: OURS' rows, then PEERS' that measured something, and
    NOTES' why a peer did not."""
    print(f"{title:38} {'min':>9} {'median':>9}")
    for key, vals in ours.items():
        print(f"{'ftpad ' + key:38} {fmt(vals)}")
    for key, vals in (peers or {}).items():
        if vals:
            print(f"{key:38} {fmt(vals)}")
        elif notes and key in notes:
            print(f"{key:38} could not attach: {notes[key]}")


def report(args, attach, started, detach, per_call, bpf, bpf_detach, bpf_note, why_not):
    print(f"\nfastest and median of {args.runs} runs, in ms (goal: under {GOAL_MS} ms)")
    table("attach, to the first event", attach, bpf, bpf_note)
    table("attach, to the line started", started)
    table("detach, SIGINT to exit", detach, bpf_detach)

    plain = min(per_call["plain"])
    print(f"\nns per call of leaf(), fastest round of {args.calls} calls")
    print(f"{'':38} {'ns/call':>9} {'added ns':>9}")
    added = {}
    for key, vals in per_call.items():
        added[key] = min(vals) - plain
        print(f"{key:38} {min(vals):9.1f} {added[key]:9.1f}")
    print()
    print(f"ftpad attach / ftpad record, added ns per call: "
          f"{added['ftpad attach'] / added['ftpad record']:.2f}x")
    if "bpftrace" in added:
        print(f"ftpad attach / bpftrace uprobe, added ns per call: "
              f"{added['ftpad attach'] / added['bpftrace']:.3f}x")
        print(f"ftpad -F leaf, first / bpftrace, leaf, attach to the first event: "
              f"{statistics.median(attach['-F leaf, first']) / statistics.median(bpf['bpftrace, leaf']):.3f}x "
              f"(medians)")
        if bpf["bpftrace, every function"]:
            n = sample_size(args.functions) + 1
            ms = statistics.median(bpf["bpftrace, every function"])
            print(f"bpftrace, every function: {n} probes ({SAMPLE}* and leaf, the last) to the "
                  f"first event in {ms:.0f} ms (median), {ms / n:.1f} ms a probe; all "
                  f"{args.functions + 1} would take about "
                  f"{ms / n * (args.functions + 1) / 60000:.0f} min, against ftpad's "
                  f"{statistics.median(attach['every function, first']):.1f} ms")
    else:
        print(f"bpftrace: {why_not}; published: {UPROBE_NS}; "
              f"ftpad attach adds {added['ftpad attach']:.1f} ns per event here")
    for key in attach:
        a, d = statistics.median(attach[key]), statistics.median(detach[key])
        print(f"ftpad {key}: attach {a:.1f} ms ({'within' if a < GOAL_MS else 'over'} "
              f"{GOAL_MS}), detach {d:.1f} ms ({'within' if d < GOAL_MS else 'over'} "
              f"{GOAL_MS}), medians")

if __name__ == "__main__":
    main()
