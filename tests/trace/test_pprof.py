# SPDX-License-Identifier: MIT
"""`ftpad dump --pprof` (trace/pprof.c) read by Go's own pprof
(`go tool pprof -top`, golang-go): every function's flat self time, cum
time and calls must be `ftpad report`'s self, total and calls, exactly on
a made trace (nanoseconds) and to the digit report shows on a recorded
program.  pprof runs offline: its home, caches and temporary files in the
test's directory, no module proxy, no symbolization."""
import gzip
import os
import re
import shutil

import pytest

from ftpadtest import FTPAD_BIN, PLUGIN, TEST_SRC, run
from test_trace_view import ftpad, gen, scenario_a  # noqa: F401


@pytest.fixture(scope="session")
def go():
    exe = shutil.which("go")
    if not exe:
        pytest.skip("go is missing: scripts/install-deps.sh installs it (golang-go)")
    return exe


def pprof_top(go, tmp_path, profile, index):
    """{function: (flat, cum)} of `go tool pprof -top` on sample type
    INDEX, in nanoseconds for times."""
    home = tmp_path / "pprof-home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GOCACHE": str(home / "cache"),
           "GOPATH": str(home / "go"), "GOPROXY": "off", "GOTOOLCHAIN": "local",
           "GOFLAGS": "", "PPROF_TMPDIR": str(home), "PPROF_BINARY_PATH": str(home)}
    out = run([go, "tool", "pprof", "-top", "-symbolize=none", "-trim=false", "-unit=ns",
               f"-sample_index={index}", profile], env=env).stdout
    assert f"Type: {index}" in out, out
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^\s*(\d+)(?:ns)?\s+\S+%\s+\S+%\s+(\d+)(?:ns)?\s+\S+%\s+(.+)$", line)
        if m:
            rows[m[3]] = (int(m[1]), int(m[2]))
    return rows


def report_ns(cell):
    """A time cell of `ftpad report` in nanoseconds ("1.234 us", "5.000 ms")."""
    value, unit = cell.split()
    whole, frac = value.split(".")
    return (int(whole) * 1000 + int(frac)) * {"us": 1, "ms": 1000, "s": 1000000}[unit]


def as_report_shows(ns):
    """ns cut to the digits report shows: three decimals of us, ms or s."""
    for unit in (1, 1000, 1000000):
        if ns < 1000000 * unit or unit == 1000000:
            return ns // unit * unit


def report_table(trace):
    """{function: (total, self, calls)} of `ftpad report`, times in ns (None: entry only)."""
    rows = {}
    for line in ftpad("report", trace).stdout.splitlines()[2:-1]:
        cells = re.split(r"\s{2,}", line.strip())
        total, self_, calls, name = cells[0], cells[1], int(cells[4]), cells[5]
        name = name.removesuffix(" (entry only)")
        rows[name] = (None if total == "-" else report_ns(total),
                      None if self_ == "-" else report_ns(self_), calls)
    return rows


def compare(go, tmp_path, trace, shown=lambda ns: ns):
    profile = tmp_path / "calls.pb.gz"
    ftpad("dump", "--pprof", trace, "-o", profile)
    assert gzip.decompress(profile.read_bytes())  # gzip'd, as pprof files are
    times = pprof_top(go, tmp_path, profile, "self")
    calls = pprof_top(go, tmp_path, profile, "calls")
    report = report_table(trace)
    assert report
    for name, (total, self_, ncalls) in report.items():
        assert calls[name][0] == ncalls, name
        if total is None:  # entry only: calls, no time
            assert name not in times or times[name] == (0, 0), name
            continue
        flat, cum = times[name]
        assert (shown(flat), shown(cum)) == (self_, total), name
    # what pprof has beyond report: the signal marks, which report leaves out
    assert all(n.startswith("[signal ") for n in set(times) - set(report)), times
    return report


def test_made_trace_agrees_with_report_to_the_nanosecond(tmp_path, gen, go):
    report = compare(go, tmp_path, scenario_a(tmp_path, gen))
    assert report["fib"] == (600, 500, 2) and report["old"] == (None, None, 1)


@pytest.fixture(scope="module")
def calls_prog(tmp_path_factory):
    if not PLUGIN.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{PLUGIN} or {FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp("calls") / "calls"
    run(["gcc", "-O2", f"-fplugin={PLUGIN}", "-fplugin-arg-ftpad-exit=1", "-o", out,
         TEST_SRC / "trace" / "calls.c", "-lpthread"])
    return out


def test_recorded_program_agrees_with_report(tmp_path, go, calls_prog):
    trace = tmp_path / "trace"
    run([FTPAD_BIN, "record", "-o", trace, "--", calls_prog, "100"], cwd=tmp_path)
    report = compare(go, tmp_path, trace, shown=as_report_shows)
    assert report["work"][2] == 150 and report["spin"][2] == 150
    assert report["fib"][2] > 150  # recursion: its inner calls count as calls
