#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Recording a real program: SQLite's shell running a workload of inserts,
indexes, joins, aggregates, an update and a delete, under `ftpad record`
and under `uftrace record`, in one run, side by side: plain wall time,
each recorder's wall time over plain, the bytes an event takes on disk,
and each tool's `report` of its trace, in seconds and events a second.

    bench/record_sqlite.py [--build DIR] [--rows N] [--rounds R] [--workdir DIR]
                           [--no-breakdown] [--perf]

The shell (sqlite3.c and shell.c of the amalgamation npm's `sqlite3`
package bundles; tests/sqlite.py fetches it) is built at -O2 with GCC 12
three ways: plain and -pg (for uftrace, run with --no-libcall so that both
recorders see the same functions), cached with the sources, and with the
ftpad plugin and exit=1, built here (into --workdir, which keeps it for
the next run).  The workload is tests/sqlite.py's, N rows (200,000 by
default: 90 million events, a 1.4 GB trace).  ftpad records with --size
large enough for every event and its default pool: what it drops then
(the dropped column), the writer thread did not drain in time.

The breakdown rows, without --no-breakdown, say where recording's time
goes: the trace written to tmpfs rather than disk (the writes' cost), a
pool of 1 GiB (FTPAD_RECORD_CHUNKS: nothing dropped, but the program
touches fresh memory for each chunk the writer has not given back yet),
--size 1024 (the default cap before it followed the free space: the end
of the run dropped), a --size of 1 MB (nearly every event dropped in the program,
nothing written: the dropping path),
every site left off (`-F` naming no function: the preload and the NOPs),
and a build without exit sites (entries only: half the events).
Each row is the fastest of R rounds, rounds interleaved in shuffled
order, and /plain its time over plain's fastest; median is the median
over the rounds of the row's time over the same round's plain time,
steadier when the host's load moves within the run.  CPU is the user and
system time of the run and its children (the program and ftpad's writer
thread).  --perf adds a profile of one more
plain run, one more `ftpad record` run and, with the breakdown, one more
run of the --size 1 row, by `perf record` with the
software clock: CPU seconds by thread and object (the program's own code,
libftpad's recording path, the kernel for the program, the kernel for the
writer thread), and the top symbols."""
import argparse
import os
import pathlib
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from sqlite import build_shells, cached_shell, workload  # noqa: E402

CFLAGS = ["-O2"]
SUMMARY = re.compile(r"ftpad: \d+ sites, \d+ enabled, (\d+) events, (\d+) dropped, (\d+) bytes")
BIG_POOL = {"FTPAD_RECORD_CHUNKS": "16384"}  # 1 GiB of 64 KiB chunks
TMPFS = pathlib.Path("/dev/shm")
PERF_HZ = 1000


def say(text):
    print(text, file=sys.stderr, flush=True)


def dir_bytes(path):
    return sum(p.stat().st_size for p in pathlib.Path(path).rglob("*") if p.is_file())


def timed(argv, cwd, stdin_text=None, env=None, stdout=subprocess.DEVNULL):
    """(wall seconds, CPU seconds of the run's processes, stderr) of ARGV."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([str(a) for a in argv], input=stdin_text, text=True, cwd=cwd,
                       stdout=stdout, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        sys.exit(f"bench/record_sqlite.py: {' '.join(map(str, argv))} failed:\n{p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stderr


def builds(build_dir, work, breakdown):
    """{name: shell}: plain and -pg from the cache, the plugin's in WORK."""
    plugin = build_dir / "gcc-plugin" / "ftpad.so"
    shells = {"plain": cached_shell("plain", ["gcc", *CFLAGS]),
              "pg": cached_shell("pg", ["gcc", *CFLAGS, "-pg"])}
    ours = {"ftpad": ["gcc", *CFLAGS, f"-fplugin={plugin}", "-fplugin-arg-ftpad-exit=1"]}
    if breakdown:
        ours["ftpad-entries"] = ["gcc", *CFLAGS, f"-fplugin={plugin}"]
    for name, cc in ours.items():
        exe = work / name / "sqlite3"
        if not exe.exists():
            say(f"building the shell: {' '.join(cc)}")
            t0 = time.monotonic()
            build_shells(work, {name: cc})
            say(f"  {time.monotonic() - t0:.0f} s")
        shells[name] = exe
    return shells


def rows_of(shells, ftpad, run_dir, tmpfs_dir, breakdown):
    """row: (argv, environment, trace directory or None, the trace's kind)."""
    disk, shm = run_dir / "trace", tmpfs_dir / "trace"
    record = [ftpad, "record", "--force"]
    rows = {
        "plain": ([shells["plain"], "db"], {}, None, None),
        "ftpad record": ([*record, "--size", "65536", "-o", disk, "--", shells["ftpad"], "db"],
                         {}, disk, "ftpad"),
        "uftrace record": (["uftrace", "record", "--no-libcall", "-d", disk, shells["pg"], "db"],
                           {}, disk, "uftrace"),
    }
    if breakdown:
        rows.update({
            "ftpad record, trace on tmpfs": ([*record, "--size", "65536", "-o", shm, "--",
                                              shells["ftpad"], "db"], {}, shm, "ftpad"),
            "ftpad record, a 1 GiB pool": ([*record, "--size", "65536", "-o", disk, "--",
                                            shells["ftpad"], "db"], BIG_POOL, disk, "ftpad"),
            "ftpad record, --size 1024 (the old default cap)": (
                [*record, "--size", "1024", "-o", disk, "--", shells["ftpad"], "db"], {}, disk,
                "ftpad"),
            "ftpad record, --size 1 (all but 1 MB dropped)": (
                [*record, "--size", "1", "-o", disk, "--", shells["ftpad"], "db"], {}, disk,
                "ftpad"),
            "ftpad record, every site off (-F)": (
                [*record, "-F", "no_function_is_named_this", "-o", disk, "--", shells["ftpad"],
                 "db"], {}, disk, "ftpad"),
            "ftpad record, entries only (no exit sites)": (
                [*record, "--size", "65536", "-o", disk, "--", shells["ftpad-entries"], "db"],
                {}, disk, "ftpad"),
        })
    return rows


def uftrace_calls(trace):
    """Calls in `uftrace report`'s table, and the seconds the report took."""
    t0 = time.perf_counter()
    out = subprocess.run(["uftrace", "report", "-d", str(trace)], capture_output=True,
                         text=True, check=True).stdout
    took = time.perf_counter() - t0
    calls = 0
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 2 and f[-2].isdigit() and ":" not in f[-1]:  # not linux:schedule
            calls += int(f[-2])
    return calls, took


def ftpad_report(ftpad, trace):
    t0 = time.perf_counter()
    subprocess.run([str(ftpad), "report", str(trace)], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def perf_profile(argv, cwd, stdin_text, env, out):
    """{(thread name, object): CPU seconds} of one run of ARGV under
    `perf record` with the software clock (a VM has no cycle counter),
    and the top symbols of the run as perf prints them."""
    data = out / "perf.data"
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(PERF_HZ), "-o",
                    str(data), "--", *map(str, argv)], input=stdin_text, text=True, cwd=cwd,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, **(env or {})}, check=True)
    shares = {}
    for sort in ("comm,dso", "comm,sym"):
        text = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--sort", sort,
                               "-F", "sample," + sort], capture_output=True, text=True,
                              check=True).stdout
        rows = []
        for line in text.splitlines():
            f = line.split(None, 2)
            if len(f) == 3 and f[0].isdigit():
                rows.append((int(f[0]) / PERF_HZ, f[1], f[2].strip()))
        shares[sort] = sorted(rows, reverse=True)
    data.unlink()
    return shares


def print_profile(name, shares, top):
    by_dso = shares["comm,dso"]
    total = sum(s for s, _, _ in by_dso)
    print(f"{name}: {total:.2f} s of CPU sampled (perf, cpu-clock at {PERF_HZ} Hz)")
    for seconds, comm, dso in by_dso:
        if seconds / total >= 0.005:
            print(f"  {comm:16} {dso:28} {seconds:7.2f} s {100 * seconds / total:5.1f} %")
    for seconds, comm, sym in shares["comm,sym"][:top]:
        print(f"    {comm:16} {sym:48} {seconds:7.2f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"))
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", help="keeps the plugin's builds for the next run")
    ap.add_argument("--no-breakdown", action="store_true",
                    help="only plain, ftpad record and uftrace record")
    ap.add_argument("--perf", action="store_true",
                    help="then one more run of plain and of ftpad record under perf record: "
                    "CPU by thread and object, and the top symbols")
    args = ap.parse_args()
    build_dir = pathlib.Path(args.build).resolve()
    ftpad = build_dir / "bin" / "ftpad"
    for need in ("gcc-plugin/ftpad.so", "bin/ftpad"):
        if not (build_dir / need).exists():
            sys.exit(f"bench/record_sqlite.py: {build_dir}: no {need}; build first")
    if args.perf and not shutil.which("perf"):
        sys.exit("bench/record_sqlite.py: --perf needs perf (Debian's linux-perf)")
    if not shutil.which("uftrace"):
        sys.exit("bench/record_sqlite.py: uftrace is not installed "
                 "(scripts/install-deps.sh installs it)")
    breakdown = not args.no_breakdown
    sql = workload(args.rows)
    with tempfile.TemporaryDirectory(prefix="ftpad-sqlite-bench-") as d, \
         tempfile.TemporaryDirectory(prefix="ftpad-sqlite-bench-", dir=TMPFS) as shm:
        tmp = pathlib.Path(d)
        work = pathlib.Path(args.workdir).resolve() if args.workdir else tmp / "work"
        work.mkdir(parents=True, exist_ok=True)
        shells = builds(build_dir, work, breakdown)
        rows = rows_of(shells, ftpad, tmp, pathlib.Path(shm), breakdown)

        def one(name):
            argv, env, trace, _ = rows[name]
            if trace:
                shutil.rmtree(trace, ignore_errors=True)
            (tmp / "db").unlink(missing_ok=True)
            return timed(argv, tmp, sql, env)

        # The output of each build is the plain one's; then the rounds.
        expect = subprocess.run([str(shells["plain"]), "db"], input=sql, text=True, cwd=tmp,
                                capture_output=True, check=True).stdout
        (tmp / "db").unlink()
        for name in ("pg", "ftpad") + (("ftpad-entries",) if breakdown else ()):
            got = subprocess.run([str(shells[name]), "db"], input=sql, text=True, cwd=tmp,
                                 capture_output=True, check=True).stdout
            (tmp / "db").unlink()
            if got != expect:
                sys.exit(f"bench/record_sqlite.py: the {name} shell's output differs")
        best = {name: (float("inf"), 0.0) for name in rows}
        ratios = {name: [] for name in rows}  # wall / the same round's plain wall
        facts = {}
        for r in range(args.rounds):
            order = list(rows)
            random.shuffle(order)
            walls = {}
            for name in order:
                wall, cpu, err = one(name)
                walls[name] = wall
                say(f"round {r + 1}: {name}: {wall:.2f} s")
                if wall < best[name][0]:
                    best[name] = (wall, cpu)
                _, _, trace, kind = rows[name]
                if kind == "ftpad":
                    m = SUMMARY.search(err)
                    if not m:
                        sys.exit(f"bench/record_sqlite.py: no summary from ftpad record:\n{err}")
                    facts[name] = (int(m.group(1)), int(m.group(2)), dir_bytes(trace))
                elif kind == "uftrace":
                    facts[name] = (0, 0, dir_bytes(trace))  # its events: from its report
            for name, wall in walls.items():
                ratios[name].append(wall / walls["plain"])
        # The reports, of the traces of the two main rows, made once more.
        report = {}
        for name in ("ftpad record", "uftrace record"):
            one(name)
            trace = rows[name][2]
            if name == "ftpad record":
                report[name] = min(ftpad_report(ftpad, trace) for _ in range(args.rounds))
            else:
                runs = [uftrace_calls(trace) for _ in range(args.rounds)]
                report[name] = min(took for _, took in runs)
                facts[name] = (2 * runs[0][0], 0, facts[name][2])
            shutil.rmtree(trace)

        plain = best["plain"][0]
        print(f"sqlite3 shell, {args.rows} rows, fastest of {args.rounds} rounds; "
              f"plain output {len(expect.splitlines())} lines, as every build's")
        print(f"{'row':48} {'wall s':>7} {'cpu s':>7} {'/plain':>7} {'median':>7} "
              f"{'events':>11} {'dropped':>11} {'bytes/event':>11}")
        for name in rows:
            wall, cpu = best[name]
            events, dropped, size = facts.get(name, (0, 0, 0))
            per = f"{size / events:11.2f}" if events else f"{'':11}"
            ev = f"{events:11d} {dropped:11d} {per}" if name in facts else ""
            median = statistics.median(ratios[name])
            print(f"{name:48} {wall:7.2f} {cpu:7.2f} {wall / plain:6.2f}x {median:6.2f}x {ev}")
        print(f"{'report':48} {'seconds':>7} {'events/s':>12}")
        for name, took in report.items():
            tool = name.split()[0]
            events = facts[name][0]
            print(f"{tool + ' report':48} {took:7.2f} {events / took:12.3g}")
        print(f"ftpad report / uftrace report: "
              f"{report['ftpad record'] / report['uftrace record']:.3f}x the time")
        if args.perf:
            drops = "ftpad record, --size 1 (all but 1 MB dropped)"
            for name in ("plain", "ftpad record") + ((drops,) if breakdown else ()):
                argv, env, trace, _ = rows[name]
                if trace:
                    shutil.rmtree(trace, ignore_errors=True)
                (tmp / "db").unlink(missing_ok=True)
                print_profile(name, perf_profile(argv, tmp, sql, env, tmp), 12)


if __name__ == "__main__":
    main()
