# SPDX-License-Identifier: MIT
"""`ftpad attach --depth N` and `--time-filter DUR` (also as `ftpad record
-p PID`), with the real libftpad, x86_64 natively: tests/src/attach/
levels.c, built with the GCC plugin and exit sites, loops over a chain of
calls four deep (level1..level4), a call that sleeps 20 ms (slow_call) and
one that does nearly nothing (fast_call), and checks its own counts.
Which functions the trace holds is asserted, never how long they took.
Bad values are refused as `ftpad record` refuses them, before the process
is looked at.  And `enabled=` counts what `ftpad record`'s counts: the
functions enabled (their entry sites), with or without --graph."""
import re

import pytest

from attachtest import (ReadyProcess, assert_text_unchanged, attach_program, libftpad_maps,
                        text_snapshot)
from ftpadtest import FTPAD_BIN, TEST_SRC, run
from test_record import SUMMARY, Trace

SRC = TEST_SRC / "attach" / "levels.c"
LEVELS = ("level1", "level2", "level3", "level4")


@pytest.fixture(scope="module")
def levels_exe(tmp_path_factory):
    return attach_program(tmp_path_factory, SRC, "levels")


@pytest.fixture
def levels(levels_exe):
    v = ReadyProcess([levels_exe])  # levels.c; its stdin's end of file ends it
    yield v
    v.kill()


def attach(pid, out, *args, command=("attach",)):
    """The trace of a 0.5 s attach (at least 20 rounds of the loop), and
    the summary's numbers."""
    p = run([FTPAD_BIN, *command, str(pid), *args, "-o", out, "--duration", "0.5"])
    m = SUMMARY.search(p.stderr)
    assert m, p.stderr
    # The start's line says what the summary says.
    assert re.search(rf"^ftpad: attached to process {pid}: {m[1]} sites, {m[2]} enabled",
                     p.stderr, re.M), p.stderr
    [image] = Trace(out).images.values()
    return image, tuple(map(int, m.groups()[:2]))


def exits(image):
    """Exit events per function name."""
    names = [image.sites[s][3] for evs in image.threads.values() for _, k, s, _ in evs
             if k in ("exit", "tail-exit")]
    return {n: names.count(n) for n in set(names)}


@pytest.mark.parametrize("depth, command", [("2", ("attach",)), ("3", ("record", "-p"))],
                         ids=["attach", "record-p"])
def test_depth_keeps_the_frames_up_to_depth(levels, tmp_path, depth, command):
    """Only level1..levelN, each with its exits (--depth turns --graph on),
    and as many calls of each kept level as of level1, give or take the
    call cut at the start or the end."""
    image, _ = attach(levels.pid, tmp_path / "t", "-F", "level*", "--depth", depth,
                      command=command)
    calls = image.calls()
    kept = LEVELS[:int(depth)]
    assert set(calls) == set(kept), calls
    assert calls["level1"] >= 10, calls
    assert all(abs(calls[f] - calls["level1"]) <= 1 for f in kept), calls
    assert set(exits(image)) == set(kept), exits(image)
    levels.finish()


def test_without_depth_every_level_is_there(levels, tmp_path):
    """The control: the same attach without --depth holds all four."""
    image, _ = attach(levels.pid, tmp_path / "t", "-F", "level*", "--graph")
    assert set(image.calls()) == set(LEVELS), image.calls()
    levels.finish()


def test_without_graph_the_viewers_show_entries_only(levels, tmp_path):
    """Without --graph the trace holds entries only, although levels.c has
    exit sites: every site is written `noexit`, so `ftpad report` marks each
    function "(entry only)" and never closes a frame as unwound (it showed
    every call unwound, with made-up times).  With --graph, exits again."""
    attach(levels.pid, tmp_path / "entries", "-F", "level*")
    sites = (tmp_path / "entries").glob("*/sites")
    flags = {ln.split("\t")[3] for f in sites for ln in f.read_text().splitlines()}
    assert flags == {"noexit"}, flags
    report = run([FTPAD_BIN, "report", tmp_path / "entries"]).stdout
    rows = [ln for ln in report.splitlines() if re.search(r"\blevel\d\b", ln)]
    assert len(rows) == len(LEVELS) and all("(entry only)" in r for r in rows), report
    assert "unwound" not in report, report
    image, _ = attach(levels.pid, tmp_path / "graph", "-F", "level*", "--graph")
    assert set(exits(image)) == set(LEVELS), exits(image)
    report = run([FTPAD_BIN, "report", tmp_path / "graph"]).stdout
    assert "entry only" not in report, report
    levels.finish()


@pytest.mark.parametrize("command", [("attach",), ("record", "-p")], ids=["attach", "record-p"])
def test_time_filter_keeps_only_the_long_calls(levels, tmp_path, command):
    """slow_call sleeps 20 ms, fast_call returns at once: with
    --time-filter 5ms only slow_call is left, entries and exits; without
    it, both are there."""
    image, _ = attach(levels.pid, tmp_path / "all", "-F", "slow_call", "-F", "fast_call",
                      "--graph", command=command)
    assert set(image.calls()) == {"slow_call", "fast_call"}, image.calls()
    image, _ = attach(levels.pid, tmp_path / "t", "-F", "slow_call", "-F", "fast_call",
                      "--time-filter", "5ms", command=command)
    assert set(image.calls()) == {"slow_call"}, image.calls()
    assert image.calls()["slow_call"] >= 10
    assert set(exits(image)) == {"slow_call"}, exits(image)
    levels.finish()


@pytest.mark.parametrize("args, message", [
    (["--depth", "0"], "--depth takes a depth from 1 to 1048576, not '0'"),
    (["--depth", "1048577"], "--depth takes a depth from 1 to 1048576, not '1048577'"),
    (["--depth", "two"], "--depth takes a depth from 1 to 1048576, not 'two'"),
    (["--time-filter", "0"], "--time-filter takes a duration such as 500ns, 10us, 1ms or 2s, "
     "not '0'"),
    (["--time-filter", "5xs"], "--time-filter takes a duration such as 500ns, 10us, 1ms or 2s, "
     "not '5xs'"),
    (["--time-filter", "0.1ns"], "--time-filter takes a duration such as 500ns, 10us, 1ms or "
     "2s, not '0.1ns'"),
])
@pytest.mark.parametrize("command", [("attach",), ("record", "-p")], ids=["attach", "record-p"])
def test_bad_values_are_refused_and_the_process_is_untouched(levels, tmp_path, args, message,
                                                             command):
    """The message `ftpad record` gives, in attach's name, exit 2; no trace,
    nothing loaded, the text and the threads as they were."""
    before = text_snapshot(levels.pid)
    r = run([FTPAD_BIN, *command, str(levels.pid), *args, "-o", tmp_path / "t"], check=False)
    assert r.returncode == 2 and f"ftpad: error: attach: {message}\n" in r.stderr, r.stderr
    assert not list(tmp_path.iterdir())
    assert not libftpad_maps(levels.pid) and levels.state() not in "tT"
    assert_text_unchanged(levels.pid, before)
    rec = run([FTPAD_BIN, "record", *args, "-o", tmp_path / "r", "--", "true"], check=False)
    assert rec.returncode == 2 and f"ftpad: error: record: {message}\n" in rec.stderr, rec.stderr
    levels.finish()


def test_enabled_counts_the_functions_as_record_does(levels_exe, levels, tmp_path):
    """docs/format.md: sites= every site of the image (entries and exits),
    enabled= the functions enabled (their entry sites).  The same filter
    gives the same two numbers under `ftpad record`, `ftpad attach` and
    `ftpad attach --graph`, though only the last two differ in what they
    patch (record and --graph enable the exit sites too)."""
    chosen = ("-F", "level*", "-F", "slow_call", "-F", "fast_call")
    _, graph = attach(levels.pid, tmp_path / "graph", *chosen, "--graph")
    image, entries = attach(levels.pid, tmp_path / "entries", *chosen)
    levels.finish()
    rec = run([FTPAD_BIN, "record", *chosen, "-o", tmp_path / "rec", "--", levels_exe],
              input="", cwd=tmp_path)
    recorded = tuple(map(int, SUMMARY.search(rec.stderr).groups()[:2]))
    assert graph == entries == recorded == (len(image.sites), 6), (graph, entries, recorded)
    assert sum(s[0] == "exit" for s in image.sites.values()) > 0
