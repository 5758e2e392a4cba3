# SPDX-License-Identifier: MIT
"""Nothing lost without saying so, nothing lost by default: every event the
recorder drops is counted by its cause (enum ftpad_lost_cause), in the LOST
events' site field, in each image's and info's dropped_by= lines (with the
clock at the first), in `ftpad record`'s summary, and by every viewer; and
without --size the cap follows the free space of the trace's file system
rather than a fixed size (tests/src/trace/steady.c makes the events)."""
import json
import os
import re

from ftpadtest import FTPAD_BIN, run
from test_live import steady  # noqa: F401 (the fixture: the program that makes the events)
from test_record import SUMMARY, Trace
from test_record_hostile import record_on_tmpfs

DROPPED = re.compile(r"^ftpad: (\d+) dropped: (.*), first at ([\d.]+) s$", re.M)


def record(steady, out, *args, opts=(), env=None, cwd=None):
    p = run([FTPAD_BIN, "record", *opts, "-o", out, "--", steady, *map(str, args)],
            env={**os.environ, **(env or {})}, cwd=cwd)
    m = SUMMARY.search(p.stderr)
    assert m, p.stderr
    return p, int(m[3]), int(m[4])


def dropped_by(kv):
    """{cause: (count, first ticks)} from dropped_by= lines (the last of a cause)."""
    out = {}
    for v in kv.get("dropped_by", []):
        cause, n, first = v.split()
        out[cause] = (int(n), int(first))
    return out


def lost_by_site(trace):
    """{LOST event's site: its counts' sum} over every file of the trace."""
    out = {}
    for im in trace.images.values():
        for evs in im.threads.values():
            for _, kind, site, sp in evs:
                if kind == "lost":
                    out[site] = out.get(site, 0) + sp
    return out


def test_size_cap_is_named_everywhere(steady, tmp_path):
    """--size 1 with 1.6 million events: the drops are the cap's, said as
    such by the summary, info, the image, the LOST events and every viewer
    (not "buffer full"), each with the time it first happened."""
    out = tmp_path / "trace"
    p, events, dropped = record(steady, out, "burst", 400000, opts=["--size", "1"])
    assert dropped > 0
    said = {m[2]: int(m[1]) for m in DROPPED.finditer(p.stderr)}
    assert said == {"--size cap reached": dropped}, p.stderr
    trace = Trace(out)
    assert dropped_by(trace.info) == {"size_cap": (dropped, dropped_by(trace.info)["size_cap"][1])}
    [image] = trace.images.values()
    assert dropped_by(image.kv)["size_cap"][0] == dropped
    assert lost_by_site(trace) == {1: dropped}  # FTPAD_LOST_SIZE_CAP
    first = re.compile(r"--size cap reached, first at [\d.]+ [mu]?s")
    replay = run([FTPAD_BIN, "replay", out]).stdout
    assert re.search(r"/\* LOST \d+ events: --size cap reached \*/", replay)
    assert first.search(replay.splitlines()[-1]) and "buffer full" not in replay
    report = run([FTPAD_BIN, "report", out]).stdout
    assert first.search(report.splitlines()[-1]), report[-500:]
    live = run([FTPAD_BIN, "live", "--iterations", "1", out]).stdout
    assert first.search(live), live[-500:]
    chrome = run([FTPAD_BIN, "dump", "--chrome", "-o", tmp_path / "c.json", out])
    assert first.search(chrome.stderr), chrome.stderr
    causes = {e["args"].get("cause") for e in
              json.loads((tmp_path / "c.json").read_text())["traceEvents"] if e["name"] == "LOST"}
    assert causes == {"--size cap reached"}
    for dump in (["dump", "--perfetto", "-o", tmp_path / "p.pb"],
                 ["dump", "--folded", "-o", tmp_path / "f.txt"],
                 ["flame", "-o", tmp_path / "f.html"]):
        r = run([FTPAD_BIN, *dump, out])
        assert first.search(r.stderr), (dump, r.stderr)
    assert b"--size cap reached" in (tmp_path / "p.pb").read_bytes()


def test_default_cap_keeps_free_space(steady, tmp_path):
    """Without --size nothing is kept once the file system is down to the
    share kept free: here all of it (FTPAD_RECORD_MIN_FREE=100), so every
    event is dropped, for that cause.  --size sets a fixed cap instead."""
    out = tmp_path / "trace"
    p, events, dropped = record(steady, out, "burst", 1000,
                                env={"FTPAD_RECORD_MIN_FREE": "100"})
    assert events == 0 and dropped == 4000 + 2, p.stderr  # tick, tock, main: in and out
    assert [m[2] for m in DROPPED.finditer(p.stderr)] == ["free-space limit reached"], p.stderr
    assert lost_by_site(Trace(out)) == {2: dropped}  # FTPAD_LOST_FREE_SPACE
    p, events, dropped = record(steady, out, "burst", 1000, opts=["--size", "10", "--force"],
                                env={"FTPAD_RECORD_MIN_FREE": "100"})
    assert (events, dropped) == (4000 + 2, 0), p.stderr


def test_default_cap_follows_a_small_disk(steady, tmp_path):
    """A trace on a 48 MiB tmpfs with 200 MB of events and no --size: the
    recording stops while 10% of it is free, with no write failing (no
    ENOSPC), and says so."""
    p, copy = record_on_tmpfs(tmp_path, "48m", [], [steady, "burst", 3000000])
    assert p.returncode == 0, p.stderr
    total, used, free = map(int, p.stdout.splitlines()[-1].split()[1:4])
    assert free >= total // 10 - 64, p.stdout  # the trace's own small files aside
    assert "not written" not in p.stderr, p.stderr
    # The burst may also outrun the writer on a busy machine (buffer full).
    causes = {m[2] for m in DROPPED.finditer(p.stderr)}
    assert "free-space limit reached" in causes, p.stderr
    assert causes <= {"free-space limit reached", "buffer full"}, p.stderr
    assert 2 in lost_by_site(Trace(copy))
