# SPDX-License-Identifier: MIT
"""`ftpad record --ring MB`, the flight recorder (runtime/record_ring.c),
on tests/src/record/ring.c, a program that runs far longer than the ring
holds: the trace keeps only the newest events (the program's own counts
of its last phase are all there, its first phase is cut), the frames
entered before the ring's start are shown as cut, a crash writes the
ring, `ftpad snapshot` writes it while the program goes on, and
--trigger takes a snapshot when a function is entered."""
import os
import pathlib
import re
import subprocess

import pytest

from ftpadtest import FTPAD_BIN, PLUGIN, TEST_SRC, run
from test_record import SUMMARY, Trace, counts

SRC = TEST_SRC / "record" / "ring.c"
RING = 1 << 20  # --ring 1
CHUNK = 4096 * 16  # a chunk's bytes: the one each thread is filling is kept too
# Room beside the ring for every event while the writer is kept off the
# CPU by a loaded host: no drops, so the program's counts are exact.
POOL = {"FTPAD_RECORD_CHUNKS": "1024"}


@pytest.fixture(scope="module")
def ring_prog(tmp_path_factory):
    if not PLUGIN.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{PLUGIN} or {FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp("ring") / "ring"
    run(["gcc", "-O2", "-Wall", "-Werror", f"-fplugin={PLUGIN}", "-fplugin-arg-ftpad-exit=1",
         "-o", out, SRC])
    return out


def ftpad(*args, check=True):
    return run([FTPAD_BIN, *map(str, args)], check=check)


def record(prog, tmp_path, *args, opts=("--ring", "1")):
    out = tmp_path / "trace"
    p = run([FTPAD_BIN, "record", *opts, "-o", out, "--", prog, *map(str, args)], check=False,
            cwd=tmp_path, env={**os.environ, **POOL})
    m = SUMMARY.search(p.stderr)
    assert m, p.stderr
    assert m.group(4) == "0", p.stderr  # dropped
    return p, out, int(m.group(3))


def snapshots(out):
    return sorted((d for d in out.iterdir() if d.name.startswith("snapshot-")),
                  key=lambda d: int(d.name.split("-")[1]))


def test_ring_keeps_only_the_newest_events(ring_prog, tmp_path):
    """2,000,000 calls of old_work (64 MB of events), then 1,000 of
    new_work: a 1 MB ring keeps every new_work call and only the last of
    the old ones, and says how many it let go."""
    n, m = 2000000, 1000
    p, out, events = record(ring_prog, tmp_path, "long", n, m)
    assert p.returncode == 0, p.stderr
    own = counts(p.stdout)[0]
    assert own == {"old_work": n, "new_work": m}
    [image] = Trace(out).images.values()
    calls = image.calls()
    assert calls["new_work"] == m, calls
    assert 0 < calls["old_work"] < n // 10, calls
    assert events == image.events()
    assert image.events() * 16 <= RING + CHUNK
    assert int(image.kv["overwritten"][-1]) + events >= 2 * (n + m)
    assert int(image.kv["ring"][-1]) == RING


def test_frames_cut_at_the_start_are_shown_cut(ring_prog, tmp_path):
    """main and phase_a were entered before the ring's oldest event: their
    exits close frames marked cut, never stray exits or a wrong tree."""
    p, out, _ = record(ring_prog, tmp_path, "long", 300000, 100)
    assert p.returncode == 0, p.stderr
    replay = ftpad("replay", out).stdout
    lines = [l.split("| ", 1)[1] for l in replay.splitlines() if "| " in l]
    assert lines[:2] == ["main() { /* cut at start */", "  phase_a() { /* cut at start */"]
    assert "  } /* phase_a, cut at start */" in lines
    assert lines[-1] == "} /* main, cut at start */"
    assert "  phase_b() {" in lines and "    new_work();" in lines
    # and the old_work whose exit begins the ring, if its entry went
    cut = 2 + (lines[2] == "    old_work(); /* cut at start */")
    assert replay.splitlines()[-1].endswith(f"{cut} frames cut at the start")
    assert "without an entry" not in replay
    report = ftpad("report", out).stdout
    assert re.search(r"\d+  main \(1 cut at start\)$", report, re.M), report
    assert re.search(r"\d+  phase_a \(1 cut at start\)$", report, re.M), report
    assert re.search(r"\b100  new_work$", report, re.M), report
    assert report.splitlines()[-1].endswith(f"{cut} frames cut at the start")
    chrome = tmp_path / "t.json"
    ftpad("dump", "--chrome", out, "-o", chrome)
    assert chrome.read_text().count('"cut_at_start":true') == cut


def test_crash_writes_the_ring(ring_prog, tmp_path):
    p, out, events = record(ring_prog, tmp_path, "crash", 300000, 100)
    assert p.returncode == 128 + 11, p.stderr
    [image] = Trace(out).images.values()
    calls = image.calls()
    assert calls["new_work"] == 100 and calls["crash_here"] == 1, calls
    assert events == image.events()
    assert "crash_here(); /* unwound */" in ftpad("replay", out).stdout


def test_snapshot_of_a_running_program(ring_prog, tmp_path):
    """`ftpad snapshot PID`, then `ftpad snapshot DIR`: each a trace of its
    own that the viewers read while the program goes on; the end writes
    the ring into the trace itself."""
    out = tmp_path / "trace"
    rec = subprocess.Popen([FTPAD_BIN, "record", "--ring", "1", "-o", out, "--", ring_prog,
                            "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        # after its first round: main is open, and its entry in the ring
        pid = int(rec.stdout.readline().split("=")[1])
        first = pathlib_of(ftpad("snapshot", pid).stdout)
        assert first.name == "snapshot-1"
        for viewer in (["replay"], ["report"], ["dump", "--folded"]):
            assert "tick" in ftpad(*viewer, first).stdout
        assert rec.poll() is None, "the program goes on"
        assert re.search(r"frames? running at the snapshot",
                         ftpad("report", first).stdout.splitlines()[-1])
        [image] = Trace(first).images.values()
        assert image.calls()["tick"] > 0 and image.kv["snapshot"] == ["1"]
        assert "snapshot=1" in (first / "info").read_text()
        rec.stdin.write("x" * 100 + "e" * 10)
        rec.stdin.flush()
        second = pathlib_of(ftpad("snapshot", first.parent).stdout)
        assert second.name == "snapshot-2" and second.parent == first.parent
        assert "tick" in ftpad("report", second).stdout
        assert rec.poll() is None
        rec.stdin.close()
        rec.wait(timeout=120)
        err = rec.stderr.read()
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait()
    assert rec.returncode == 0, err
    assert [d.name for d in snapshots(out)] == ["snapshot-1", "snapshot-2"]
    [image] = Trace(out).images.values()
    assert image.kv["snapshots"] == ["2"]
    assert image.calls()["tick"] > 0
    for d in snapshots(out):
        assert "tick" in ftpad("report", d).stdout
    # the trace with its snapshots is a trace --force may replace
    p, _, _ = record(ring_prog, tmp_path, "long", 10, 10, opts=("--ring", "1", "--force"))
    assert p.returncode == 0, p.stderr


def pathlib_of(stdout):
    [line] = stdout.splitlines()
    return pathlib.Path(line)


def test_snapshot_needs_a_ring(ring_prog, tmp_path):
    rec = subprocess.Popen([ring_prog, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True)
    try:
        pid = int(rec.stdout.readline().split("=")[1])
        p = ftpad("snapshot", pid, check=False)
        assert p.returncode == 1 and "records no ring" in p.stderr, p.stderr
    finally:
        rec.stdin.close()
        rec.wait(timeout=60)


def test_trigger_takes_snapshots(ring_prog, tmp_path):
    """on_error() entered 300 times: the snapshots hold on_error calls
    (each one the ring as the writer found it just after a hit, so a hit's
    own entry may be its last, unwritten slot); hits while one is pending
    join it, and no process takes more than 16."""
    p, out, _ = record(ring_prog, tmp_path, "trigger", 300000, 1000,
                       opts=("--ring", "1", "--trigger", "on_err*"))
    assert p.returncode == 0, p.stderr
    assert counts(p.stdout)[0] == {"tick": 300000, "on_error": 300}
    shots = snapshots(out)
    assert 1 <= len(shots) <= 16
    [image] = Trace(out).images.values()
    assert image.kv["snapshots"] == [str(len(shots))]
    on_error = [Trace(d).images[image.name].calls()["on_error"] for d in shots]
    assert sum(on_error) > 0, on_error
    # every call an error: still 16 at most, the other hits counted
    p, out, _ = record(ring_prog, tmp_path, "trigger", 1000000, 1,
                       opts=("--ring", "1", "--trigger", "on_error", "--force"))
    assert p.returncode == 0, p.stderr
    assert 1 <= len(snapshots(out)) <= 16


def test_ring_options_are_checked(ring_prog, tmp_path):
    for opts, why in [(["--trigger", "f"], "needs --ring MB"),
                      (["--ring", "1", "--size", "5"], "use one of them"),
                      (["--ring", "0"], "--ring takes a number of MB")]:
        p = run([FTPAD_BIN, "record", *opts, "-o", tmp_path / "t", "--", ring_prog, "long",
                 "1", "1"], check=False)
        assert p.returncode == 2 and why in p.stderr, (opts, p.stderr)
