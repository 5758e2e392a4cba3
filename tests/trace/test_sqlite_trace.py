# SPDX-License-Identifier: MIT
"""A second real program recorded: SQLite's shell (sqlite3.c and shell.c,
the amalgamation npm's `sqlite3` package bundles; tests/sqlite.py), built
at -O2 with the GCC plugin and exit=1, runs a workload of inserts, indexes,
joins, aggregates, an update and a delete under `ftpad record`.  Every
function's calls in `ftpad report` equal those `uftrace report` counts for
the same workload on a -pg build of the same sources, and a recording
capped by `--size` says in its summary what it dropped and why, and drops
no more than that.

Only the command line is read (`ftpad record`'s summary, `ftpad report`,
the `info` file's keys), not the trace's files, so that the test holds
whatever the trace's encoding.  -pg and the plugin leave GCC's inlining
and cloning as it is (a -pg build counts the same .part and .isra clones),
so the two builds make the same calls.  uftrace records with
--no-libcall, so that it sees the functions ftpad sees; its report adds
rows of its own (linux:schedule, the kernel's scheduling events), left
out by comparing the functions both reports name."""
import collections
import concurrent.futures
import os
import re
import time

import pytest

from conftest import require_tool
from ftpadtest import FTPAD_BIN, PLUGIN, run
from sqlite import build_shells, cached_shell, workload
from test_record import SUMMARY

CFLAGS = ["-O2"]
# 20,000 orders: 7.3 million events (116 MB) in ftpad's trace, a quarter
# second of plain run, a few seconds under uftrace.
ROWS = 20_000
# Well under the trace of ROWS, so that most events are dropped.
CAP_MB = 16
# A pool (docs/runtime.md) that holds every event of ROWS, 128 MiB mapped
# as it fills: on this loaded machine the writer may not run for long
# enough that the default 16 MiB fills, and an event dropped would be a
# call uftrace counts and ftpad does not.
POOL = {"FTPAD_RECORD_CHUNKS": "2048"}


@pytest.fixture(scope="module")
def shells(tmp_path_factory):
    """{"ftpad": the plugin's shell, "pg": the -pg shell}.  The plugin's is
    built afresh for the module; the -pg one is cached with the sources
    (tests/sqlite.py), built here only the first time, beside the other."""
    if not PLUGIN.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{PLUGIN} or {FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp("sqlite")

    def timed(build, *args):
        t0 = time.monotonic()
        return build(*args), time.monotonic() - t0

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pg = pool.submit(timed, cached_shell, "pg", ["gcc", *CFLAGS, "-pg"])
        built, took = timed(build_shells, out, {"ftpad": ["gcc", *CFLAGS, f"-fplugin={PLUGIN}",
                                                          "-fplugin-arg-ftpad-exit=1"]})
        built["pg"], pg_took = pg.result()
    print(f"\nsqlite3 shell: the plugin's built in {took:.0f} s, the -pg one found or built "
          f"in the cache in {pg_took:.0f} s")
    return built


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """The folder every run of the module runs in: the shell resolves the
    database's full path one element at a time, so that the calls of a run
    depend on how deep its folder is."""
    return tmp_path_factory.mktemp("sqlite-run")


def run_shell(argv, cwd, env=None):
    """ARGV (a shell, or a recorder running one on the database file db in
    CWD), fed the workload, with ENV added to the environment; its stdout
    and stderr."""
    (cwd / "db").unlink(missing_ok=True)
    return run(argv, input=workload(ROWS), cwd=cwd, env={**os.environ, **(env or {})})


def report_calls(text):
    """{function: calls} of a `ftpad report` or `uftrace report` table: the
    last two columns of each row (the header and `#` lines aside), summed
    over rows of one name."""
    calls = collections.Counter()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[-2].isdigit() and not line.startswith("#"):
            calls[fields[-1]] += int(fields[-2])
    return calls


def summary_of(stderr):
    m = SUMMARY.search(stderr)
    assert m, stderr
    return {"events": int(m.group(3)), "dropped": int(m.group(4)), "bytes": int(m.group(5))}


@pytest.fixture(scope="module")
def uncapped(shells, work):
    """`ftpad record` of the workload with room for every event: its
    output, its summary, and `ftpad report`'s calls."""
    d = work / "uncapped"
    p = run_shell([FTPAD_BIN, "record", "--size", "4096", "-o", d, "--",
                   shells["ftpad"], "db"], work, POOL)
    summary = summary_of(p.stderr)
    calls = report_calls(run([FTPAD_BIN, "report", "--raw-names", d]).stdout)
    return p.stdout, summary, calls


def test_sqlite_calls_equal_uftrace(shells, uncapped, work):
    require_tool("uftrace")
    out, summary, recorded = uncapped
    last = out.splitlines()[-1]
    assert last.startswith(f"{ROWS * 4 // 5}|"), out
    assert summary["dropped"] == 0, summary

    u = run_shell(["uftrace", "record", "--no-libcall", "-d", work / "uftrace.data",
                   shells["pg"], "db"], work)
    assert u.stdout == out
    assert "LOST" not in u.stderr, u.stderr
    counted = report_calls(run(["uftrace", "report", "-d", work / "uftrace.data"]).stdout)

    both = sorted(set(recorded) & set(counted))
    differ = {f: (recorded[f], counted[f]) for f in both if recorded[f] != counted[f]}
    calls = sum(recorded[f] for f in both)
    print(f"\nsqlite3, {ROWS} rows: {len(both)} functions in both reports, {calls} calls, "
          f"{summary['events']} events; only ftpad's: {sorted(set(recorded) - set(counted))}, "
          f"only uftrace's: {len(set(counted) - set(recorded))}")
    assert differ == {}, differ
    # Every function ftpad saw, uftrace saw, and every call of the run is
    # an entry and an exit in ftpad's trace.
    assert set(recorded) <= set(counted), set(recorded) - set(counted)
    assert summary["events"] == 2 * calls
    assert len(both) > 500 and calls > 3_000_000


def test_sqlite_capped_trace_counts_its_drops(shells, uncapped, work):
    full_out, full, full_calls = uncapped
    capped_dir = work / "capped"
    p = run_shell([FTPAD_BIN, "record", "--size", str(CAP_MB), "-o", capped_dir, "--",
                   shells["ftpad"], "db"], work)
    # The program's run is its own, whatever the trace drops.
    assert p.stdout == full_out
    capped = summary_of(p.stderr)
    print(f"\nsqlite3, {ROWS} rows, --size {CAP_MB}: {capped}; uncapped {full}")
    # The summary says that events were dropped, how many, and that the cap
    # dropped them: with those kept, every event of the uncapped run.
    assert capped["dropped"] > 0 and capped["events"] > 0
    by_cap = re.search(r"^ftpad: (\d+) dropped: --size cap reached", p.stderr, re.M)
    assert by_cap and int(by_cap.group(1)) == capped["dropped"], p.stderr
    assert capped["events"] + capped["dropped"] == full["events"]
    assert capped["bytes"] <= CAP_MB << 20
    info = dict(line.split("=", 1) for line in (capped_dir / "info").read_text()
                .splitlines() if "=" in line)
    assert int(info["events"]) == capped["events"] and int(info["dropped"]) == capped["dropped"]
    # What was kept still reads, and holds no call the full run lacks.
    kept = report_calls(run([FTPAD_BIN, "report", "--raw-names", capped_dir]).stdout)
    assert kept and all(kept[f] <= full_calls[f] for f in kept), {
        f: (kept[f], full_calls[f]) for f in kept if kept[f] > full_calls[f]}
