# SPDX-License-Identifier: MIT
"""The benchmarks under bench/ still build and run, on small inputs, and
print every row they promise.  Their numbers are not checked: this host is
too noisy for timed assertions.  What is checked is what must hold at any
speed: every build of the call loop computes the plain call's checksum
(run.py fails otherwise), and every patch_all.py program enables and
disables all its sites (ok=1, or it fails)."""
import re
import subprocess
import sys

import ftpadtest
from conftest import require_tool

BENCH = ftpadtest.ROOT / "bench"


def bench(script, *args, tmp_path=None):
    p = subprocess.run([sys.executable, str(BENCH / script), "--build", str(ftpadtest.BUILD),
                        *args], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_call_cost_rows(plugin, libftpad, tmp_path):
    require_tool("clang-14")
    out = bench("run.py", "--calls", "100000", "--rounds", "1", "--no-callgrind",
                tmp_path=tmp_path)
    for row in ["plain call", "ftpad site disabled", "ftpad enabled, empty callback",
                "ftpad enabled, libftpad.a", "bare trampoline: call, ret",
                "bare trampoline: GPRs, empty callback",
                "bare trampoline: GPRs+xmm, empty callback",
                "clang-14 XRay, patched, empty handler"]:
        assert re.search(rf"^{re.escape(row)} +\d+\.\d+ ", out, re.M), (row, out)
    # ftpad's added cost against both peers, each measured in this run.
    assert "fraction of clang-14 XRay, patched, empty handler's" in out, out
    assert "fraction of bare trampoline: GPRs+xmm, empty callback's" in out, out


def test_patch_all_rows(plugin, libftpad, tmp_path):
    require_tool("clang-14")
    out = bench("patch_all.py", "--functions", "2000", "--runs", "1", "--workdir",
                str(tmp_path / "work"), tmp_path=tmp_path)
    for row in ["ftpad /proc/self/mem", "ftpad mprotect", "ftpad .a /proc/self/mem",
                "ftpad .a mprotect", "XRay"]:
        assert re.search(rf"^{re.escape(row)} +\d+ +[+-]\d+ +\d+ +\d+ +\d+ +\d+ +\d+$", out,
                         re.M), (row, out)
    assert re.search(r"^ftpad /proc/self/mem: three writes of the code alone [1-9]\d* us = "
                     r"\d+\.\d+x XRay's enable again$", out, re.M), out


def test_trace_read_rows(tmp_path):
    # bench/trace_read.py: the generated trace is read by every viewer it
    # times (each run must succeed), and each prints its row.
    out = bench("trace_read.py", "--events", "200000", "--rounds", "1",
                "--keep", str(tmp_path / "trace"))
    for version in (2, 1):  # both versions of the events files, each read by every viewer
        m = re.search(rf"^version {version} trace: (200,00\d) events", out, re.M)
        assert m, out
        report = subprocess.run([ftpadtest.FTPAD_BIN, "report", tmp_path / f"trace.v{version}"],
                                capture_output=True, text=True, check=True).stdout
        # every entry has its exit: a call per two events
        calls = sum(int(line.split()[-2]) for line in report.splitlines()[2:-1])
        assert calls * 2 == int(m.group(1).replace(",", ""))
    for row in ["report", "replay", "dump --folded"]:
        assert len(re.findall(rf"^{row} +[0-9.]+ +[0-9.]+ +[0-9.]+$", out, re.M)) == 2, (row, out)


def test_export_rows(tmp_path):
    # bench/export.py: every dump of the generated trace succeeds and
    # prints its row of sizes and speed.
    out = bench("export.py", "--events", "200000", "--rounds", "1",
                "--keep", str(tmp_path / "work"))
    assert re.search(r"^trace: 200,00\d events, raw 16\.\d\d bytes an event", out, re.M), out
    for fmt in ["--perfetto", "--chrome", "--folded", "--pprof"]:
        assert re.search(rf"^{fmt} +[0-9,]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+"
                         r" +[0-9.]+$", out, re.M), (fmt, out)


def test_attach_rows(plugin, libftpad, tmp_path):
    # bench/attach.py: every attach finds an event in its trace (or the
    # script fails), the program under `ftpad record` runs its rounds.
    out = bench("attach.py", "--functions", "1000", "--files", "2", "--runs", "1",
                "--calls", "100000", "--rounds", "1", "--no-bpftrace",
                "--workdir", str(tmp_path / "work"), tmp_path=tmp_path)
    for row in ["ftpad -F leaf, first", "ftpad -F leaf, again", "ftpad every function, first",
                "ftpad every function, again"]:
        assert len(re.findall(rf"^{re.escape(row)} +\d+\.\d +\d+\.\d$", out, re.M)) == 3, (
            row, out)
    for row in ["plain", "ftpad attach", "ftpad record"]:
        assert re.search(rf"^{row} +\d+\.\d +-?\d+\.\d$", out, re.M), (row, out)
    assert re.search(r"^ftpad attach / ftpad record, added ns per call: \d+\.\d+x$", out, re.M)
    assert "bpftrace: not measured (--no-bpftrace); published: a kernel uprobe" in out, out


def test_flame_deep_rows(plugin):
    # bench/flame_deep.py: both ways of drawing each depth succeed, and
    # print their row and the growth lines.
    out = bench("flame_deep.py", "--depths", "200,400", "--rounds", "1")
    for depth in ["200", "400"]:
        assert re.search(rf"^ +{depth} +[0-9.]+ +\d+ +[0-9.]+ +\d+ +[0-9.]+$", out, re.M), out
    assert re.search(r"^200 -> 400 deep: direct CPU x[0-9.]+, folded CPU x[0-9.]+$", out, re.M), out
