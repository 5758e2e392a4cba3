# SPDX-License-Identifier: MIT
"""The trace viewers (`ftpad replay/report/dump/live`, trace/) on trace
directories written in the documented format (docs/format.md "The trace
directory") by tests/src/trace/gen_trace.c through <ftpad_trace.h>: exact
trees, exact report numbers, folded lines one by one, Chrome JSON that
loads and pairs, and clear errors on bad input (test_perfetto.py decodes
the Perfetto file)."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

import ftpadtest
from ftpadtest import FTPAD_BIN, INCLUDE, TEST_SRC, run

GEN_SOURCE = TEST_SRC / "trace" / "gen_trace.c"


@pytest.fixture(scope="session")
def gen(tmp_path_factory):
    exe = tmp_path_factory.mktemp("gen") / "gen_trace"
    run(["gcc", "-std=c11", "-O1", "-Wall", "-Werror", "-I", INCLUDE, GEN_SOURCE, "-o", exe])
    if not FTPAD_BIN.exists():
        pytest.fail(f"{FTPAD_BIN} is missing: build the ftpad_tool target first")
    return exe


KIND_SITES = ("entry", "exit", "tail-exit")


class Scenario:
    """A trace directory, said in gen_trace's script: functions get an entry,
    an exit and a tail-exit site each (entry only for `noexit` ones)."""

    def __init__(self, path, sync=((0, 0), (1000000, 1000000))):
        self.path = path
        self.lines = [f"dir {path}", "info format=1", "info arch=x86_64", "info clock=tsc",
                      "info command=prog"]
        self.lines += [f"info clock_sync={t} {ns}" for t, ns in sync]
        self.sites = {}

    def image(self, name, exe, funcs, noexit=(), **info):
        self.lines.append(f"image {name}")
        self.lines.append(f"imageinfo pid={name.split('.')[0]}")
        self.lines.append(f"imageinfo exe={exe}")
        self.lines += [f"imageinfo {k}={v}" for k, v in info.items()]
        self.sites = {}
        site = 0
        for i, f in enumerate(funcs):
            kinds = KIND_SITES[:1] if f in noexit else KIND_SITES
            for kind in kinds:
                flags = "noexit" if f in noexit else "-"
                self.lines.append(f"site {site} {kind} {0x401000 + 0x40 * i:x} {flags} {f} {exe}")
                self.sites[f, kind] = site
                site += 1
        return self

    def thread(self, tid, comm):
        self.lines.append(f"thread {tid} {comm}")
        return self

    def ev(self, t, kind, what, sp):
        """kind: entry/exit/tail (what: a function), or lost/signal/sigreturn/
        unwind (what: a number), or a raw kind number."""
        if kind in ("entry", "exit", "tail"):
            what = self.sites[what, {"tail": "tail-exit"}.get(kind, kind)]
        self.lines.append(f"ev {t} {kind} {what} {sp}")
        return self

    def evs(self, events):
        for e in events:
            self.ev(*e)
        return self

    def raw(self, line):
        self.lines.append(line)
        return self

    def write(self, gen):
        run([gen], input="\n".join(self.lines) + "\n")
        return self.path


def ftpad(*args, check=True):
    return run([FTPAD_BIN, *args], check=check)


# --- scenario A: nesting, recursion, a tail call, entries only, LOST, a signal

EVENTS_A = [
    (0, "entry", "main", 10000),
    (100, "entry", "fib", 9900),
    (200, "entry", "fib", 9800),   # recursion
    (300, "entry", "leaf", 9700),
    (400, "exit", "leaf", 9700),
    (500, "exit", "fib", 9800),
    (700, "exit", "fib", 9900),
    (1000, "entry", "tailer", 9900),
    (1100, "tail", "tailer", 9900),  # tailer jumps to target:
    (1100, "entry", "target", 9900),  # ... its sibling, as in the source
    (1500, "exit", "target", 9900),
    (1600, "entry", "old", 9900),  # an object without exit sites
    (1700, "lost", 0, 2),  # LOST: the count is in sp
    (1800, "signal", 10, 9500),
    (1900, "entry", "handler", 9400),
    (2000, "exit", "handler", 9400),
    (2100, "sigreturn", 10, 0),
    (2500, "exit", "main", 10000),
]


def scenario_a(tmp_path, gen):
    s = Scenario(tmp_path / "a.trace")
    s.image("100.0", "/bin/prog", ["main", "fib", "leaf", "tailer", "target", "old", "handler"],
            noexit=["old"])
    return s.thread(100, "prog").evs(EVENTS_A).write(gen)


REPLAY_A = """\
# DURATION     TID     FUNCTION
#
# thread 100 (prog) of 100.0 /bin/prog
           [   100] | main() {
           [   100] |   fib() {
           [   100] |     fib() {
  0.100 us [   100] |       leaf();
  0.300 us [   100] |     } /* fib */
  0.600 us [   100] |   } /* fib */
  0.100 us [   100] |   tailer();
  0.400 us [   100] |   target();
           [   100] |   old(); /* entry only */
           [   100] |   /* LOST 2 events: buffer full */
           [   100] |   [signal SIGUSR1] {
  0.100 us [   100] |     handler();
  0.300 us [   100] |   } /* [signal SIGUSR1] */
  2.500 us [   100] | } /* main */
# 17 events, 2 LOST (buffer full, first at 1.700 us)
"""


def test_replay_nesting_recursion_tail_signal_lost_entry_only(tmp_path, gen):
    assert ftpad("replay", scenario_a(tmp_path, gen)).stdout == REPLAY_A


# main: 2500 less fib 600, tailer 100, target 400 and the handler's 300;
# fib: recursion counted once in total (600), self 300 + 200.
REPORT_A = """\
       Total        Self         Avg         Max       Calls  Function
  ==========  ==========  ==========  ==========  ==========  ====================
    2.500 us    1.100 us    2.500 us    2.500 us           1  main
    0.600 us    0.500 us    0.300 us    0.600 us           2  fib
    0.400 us    0.400 us    0.400 us    0.400 us           1  target
    0.100 us    0.100 us    0.100 us    0.100 us           1  handler
    0.100 us    0.100 us    0.100 us    0.100 us           1  leaf
    0.100 us    0.100 us    0.100 us    0.100 us           1  tailer
           -           -           -           -           1  old (entry only)
# 17 events, 2 LOST (buffer full, first at 1.700 us)
"""


def test_report_numbers(tmp_path, gen):
    assert ftpad("report", scenario_a(tmp_path, gen)).stdout == REPORT_A


def report_rows(text):
    return [line.split()[-1] if "(" not in line else line.split("  ")[-1].split(" (")[0]
            for line in text.splitlines()[2:-1]]


@pytest.mark.parametrize("key,order", [
    ("calls", ["fib", "handler", "leaf", "main", "old", "tailer", "target"]),
    ("self", ["main", "fib", "target", "handler", "leaf", "tailer", "old"]),
    ("avg", ["main", "target", "fib", "handler", "leaf", "tailer", "old"]),
    ("max", ["main", "fib", "target", "handler", "leaf", "tailer", "old"]),
    ("name", ["fib", "handler", "leaf", "main", "old", "tailer", "target"]),
])
def test_report_sort_keys_break_ties_by_name(tmp_path, gen, key, order):
    out = ftpad("report", "-s", key, scenario_a(tmp_path, gen)).stdout
    assert [line.split()[-1] if "entry only" not in line else "old"
            for line in out.splitlines()[2:-1]] == order


FOLDED_A = [
    "main 1100",
    "main;[signal SIGUSR1] 200",
    "main;[signal SIGUSR1];handler 100",
    "main;fib 300",
    "main;fib;fib 200",
    "main;fib;fib;leaf 100",
    "main;tailer 100",
    "main;target 400",
]


def test_folded_lines(tmp_path, gen):
    lines = ftpad("dump", "--folded", scenario_a(tmp_path, gen)).stdout.splitlines()
    for got, want in zip(lines, FOLDED_A):
        assert got == want
    assert len(lines) == len(FOLDED_A)


# --- scenario B: frames left without their exits

EVENTS_B = [
    (0, "entry", "main", 10000),
    (10, "entry", "a", 9900),
    (20, "entry", "b", 9800),
    (30, "entry", "c", 9700),
    (40, "exit", "c", 9700),
    (50, "entry", "c", 9700),
    # longjmp from c back into main, seen by sp: an entry at a's sp closes
    # c, b and a, at the last event inside them
    (60, "entry", "d", 9900),
    (80, "exit", "d", 9900),
    # an exception thrown in h and caught in f: f's exit closes h and g
    (100, "entry", "f", 9900),
    (110, "entry", "g", 9800),
    (120, "entry", "h", 9700),
    (130, "exit", "f", 9900),
    # an UNWIND event: frames entered below its sp are left at its time
    (200, "entry", "a", 9900),
    (210, "entry", "b", 9800),
    (220, "unwind", 0, 9850),
    (230, "exit", "a", 9900),
    # siglongjmp out of a handler: the mark closes like a frame
    (300, "entry", "g", 9900),
    (310, "signal", 14, 9600),
    (320, "entry", "hand", 9500),
    (330, "entry", "h", 9900),
    (340, "exit", "h", 9900),
    # an exit with no open frame of its function, then frames open at the end
    (400, "entry", "b", 9900),
    (410, "entry", "c", 9800),
    (420, "exit", "d", 9800),
    (450, "entry", "d", 9700),
]


def scenario_b(tmp_path, gen):
    s = Scenario(tmp_path / "b.trace")
    s.image("200.0", "/bin/jump", ["main", "a", "b", "c", "d", "f", "g", "h", "hand"])
    return s.thread(200, "jump").evs(EVENTS_B).write(gen)


REPLAY_B = """\
# DURATION     TID     FUNCTION
#
# thread 200 (jump) of 200.0 /bin/jump
           [   200] | main() {
           [   200] |   a() {
           [   200] |     b() {
  0.010 us [   200] |       c();
  0.000 us [   200] |       c(); /* unwound */
  0.030 us [   200] |     } /* b, unwound */
  0.040 us [   200] |   } /* a, unwound */
  0.020 us [   200] |   d();
           [   200] |   f() {
           [   200] |     g() {
  0.000 us [   200] |       h(); /* unwound */
  0.010 us [   200] |     } /* g, unwound */
  0.030 us [   200] |   } /* f */
           [   200] |   a() {
  0.010 us [   200] |     b(); /* unwound */
  0.030 us [   200] |   } /* a */
           [   200] |   g() {
           [   200] |     [signal SIGALRM] {
  0.000 us [   200] |       hand(); /* unwound */
  0.010 us [   200] |     } /* [signal SIGALRM], unwound */
  0.020 us [   200] |   } /* g, unwound */
  0.010 us [   200] |   h();
           [   200] |   b() {
           [   200] |     c() {
  0.000 us [   200] |       d(); /* unwound */
  0.040 us [   200] |     } /* c, unwound */
  0.050 us [   200] |   } /* b, unwound */
  0.450 us [   200] | } /* main, unwound */
# 25 events, 13 frames unwound, 1 exit without an entry skipped
"""


def test_replay_unwound_frames(tmp_path, gen):
    assert ftpad("replay", scenario_b(tmp_path, gen)).stdout == REPLAY_B


def test_report_counts_unwound_calls(tmp_path, gen):
    out = ftpad("report", "-s", "name", scenario_b(tmp_path, gen)).stdout
    rows = {line.split("  ")[-1] for line in out.splitlines()[2:-1]}
    assert rows == {"a (1 unwound)", "b (3 unwound)", "c (2 unwound)", "d (1 unwound)", "f",
                    "g (2 unwound)", "h (1 unwound)", "hand (1 unwound)", "main (1 unwound)"}


# --- scenario C: threads, a forked child, an exec

def scenario_c(tmp_path, gen):
    s = Scenario(tmp_path / "c.trace")
    s.image("300.0", "/bin/par", ["main", "work", "leaf"])
    s.thread(300, "par").evs([(0, "entry", "main", 5000), (10, "entry", "work", 4900),
                              (20, "exit", "work", 4900), (30, "exit", "main", 5000)])
    s.thread(301, "worker").evs([(5, "entry", "work", 7000), (9, "entry", "leaf", 6900),
                                 (12, "exit", "leaf", 6900), (15, "exit", "work", 7000)])
    # the exec'd program: the same pid, an image of its own
    s.image("300.1", "/bin/next", ["main", "step"], exec_from="300.0")
    s.thread(300, "next").evs([(100, "entry", "main", 5000), (110, "entry", "step", 4900),
                               (111, "exit", "step", 4900), (130, "exit", "main", 5000)])
    # the child starts inside work(), whose entry is in its parent's file:
    # work and main are cut at its start
    s.image("302.0", "/bin/par", ["main", "work", "leaf"], forked_from="300.0", ppid=300)
    s.thread(302, "par").evs([(11, "entry", "leaf", 4800), (13, "exit", "leaf", 4800),
                              (14, "exit", "work", 4900), (16, "exit", "main", 5000)])
    return s.write(gen)


REPLAY_C = """\
# DURATION     TID     FUNCTION
#
# thread 300 (par) of 300.0 /bin/par
           [   300] | main() {
  0.010 us [   300] |   work();
  0.030 us [   300] | } /* main */
# 4 events
#
# thread 301 (worker) of 300.0 /bin/par
           [   301] | work() {
  0.003 us [   301] |   leaf();
  0.010 us [   301] | } /* work */
# 4 events
#
# thread 300 (next) of 300.1 /bin/next, exec from 300.0
           [   300] | main() {
  0.001 us [   300] |   step();
  0.030 us [   300] | } /* main */
# 4 events
#
# thread 302 (par) of 302.0 /bin/par, forked from 300.0
           [   302] | main() { /* cut at start */
           [   302] |   work() { /* cut at start */
  0.002 us [   302] |     leaf();
  0.003 us [   302] |   } /* work, cut at start */
  0.005 us [   302] | } /* main, cut at start */
# 4 events, 2 frames cut at the start
"""


def test_replay_threads_fork_exec(tmp_path, gen):
    assert ftpad("replay", scenario_c(tmp_path, gen)).stdout == REPLAY_C


def test_replay_filters(tmp_path, gen):
    trace = scenario_c(tmp_path, gen)
    only_worker = ftpad("replay", "--tid", "301", trace).stdout
    assert "worker" in only_worker and "(par)" not in only_worker and "(next)" not in only_worker
    # -F: work and what it calls, from depth 0
    f = ftpad("replay", "-F", "work", trace).stdout
    assert [l.split("| ")[1] for l in f.splitlines() if "| " in l] == [
        "work();", "work() {", "  leaf();", "} /* work */",
        "work() { /* cut at start */", "  leaf();", "} /* work, cut at start */"]
    # -N: work and what it calls are gone, the forked child's cut work too
    n = [l.split("| ")[1] for l in ftpad("replay", "-N", "w*", trace).stdout.splitlines()
         if "| " in l]
    assert not [l for l in n if "work" in l or "leaf" in l]
    assert n == ["main();", "main() {", "  step();", "} /* main */",
                 "main(); /* cut at start */"]


def test_report_merges_threads_and_images(tmp_path, gen):
    out = ftpad("report", "-s", "name", scenario_c(tmp_path, gen)).stdout
    rows = [line.split("  ")[-2:] for line in out.splitlines()[2:-1]]
    calls = {name: int(n) for n, name in rows}
    # the forked child's main and work are cut at its start, and counted
    assert calls == {"leaf": 2, "main (1 cut at start)": 3, "step": 1,
                     "work (1 cut at start)": 3}


# --- ticks to nanoseconds

def test_clock_sync_interpolation(tmp_path, gen):
    # ns = 5000 + (ticks - 1000) / 2, from the first and the last pairs
    s = Scenario(tmp_path / "d.trace", sync=((1000, 5000), (2000, 5500), (3000, 6000)))
    s.image("1.0", "/bin/x", ["main", "f"]).thread(1, "x")
    s.evs([(1000, "entry", "main", 100), (1200, "entry", "f", 90), (1401, "exit", "f", 90),
           (3000, "exit", "main", 100)])
    out = ftpad("replay", s.write(gen)).stdout
    assert "  0.100 us [     1] |   f();" in out  # 201 ticks: 100.5 ns, rounded down
    assert "  1.000 us [     1] | } /* main */" in out


def test_one_clock_sync_point_warns(tmp_path, gen):
    s = Scenario(tmp_path / "e.trace", sync=((7, 7),))
    s.image("1.0", "/bin/x", ["main"]).thread(1, "x").evs(
        [(1000, "entry", "main", 100), (3000, "exit", "main", 100)])
    p = ftpad("replay", s.write(gen))
    assert "one clock_sync point only" in p.stderr
    assert "  2.000 us [     1] | main();" in p.stdout


# --- errors

def test_missing_directory(tmp_path):
    p = ftpad("replay", tmp_path / "nothing", check=False)
    assert p.returncode == 1
    assert f"{tmp_path / 'nothing'}: No such file or directory" in p.stderr


@pytest.mark.parametrize("viewer", [["replay"], ["report"], ["dump", "--folded"],
                                    ["dump", "--chrome"], ["flame", "-o", "-"],
                                    ["live", "--iterations", "1", "--interval", "1"]],
                         ids=lambda v: "-".join(v[:2]).strip("-"))
def test_viewers_read_ftpad_data_by_default(tmp_path, gen, viewer):
    """Without a directory, a viewer reads ./ftpad.data: what `ftpad record`
    writes without -o."""
    s = Scenario(tmp_path / "ftpad.data")
    s.image("100.0", "/bin/prog", ["main", "fib", "leaf", "tailer", "target", "old", "handler"],
            noexit=["old"])
    s.thread(100, "prog").evs(EVENTS_A).write(gen)
    named = run([FTPAD_BIN, *viewer, "ftpad.data"], cwd=tmp_path)
    default = run([FTPAD_BIN, *viewer], cwd=tmp_path)
    assert default.stdout == named.stdout and default.stdout
    p = run([FTPAD_BIN, *viewer], cwd=tmp_path / "ftpad.data" / "100.0", check=False)
    assert p.returncode == 1 and "ftpad.data: No such file or directory" in p.stderr


NO_EXITS = "no exit sites, so no call has a duration for {}: compile with " \
    "-fplugin-arg-ftpad-exit=1 (CMake: ftpad_instrument(TARGET EXIT))"


def test_a_trace_without_exits_says_so(tmp_path, gen):
    """Entries only: report warns (its calls are still counted), while
    dump --folded and flame, which would write nothing, fail."""
    s = Scenario(tmp_path / "e.trace").image("1.0", "/bin/x", ["main", "f"], noexit=["main", "f"])
    trace = s.thread(1, "x").evs([(0, "entry", "main", 100), (5, "entry", "f", 90)]).write(gen)
    p = ftpad("report", trace)
    assert f"ftpad: warning: {trace}: {NO_EXITS.format('report')}" in p.stderr, p.stderr
    assert re.search(r"\bmain\b", p.stdout)
    for args, cmd in [(["dump", "--folded", trace], "dump --folded"),
                      (["flame", trace, "-o", tmp_path / "f.svg"], "flame")]:
        p = ftpad(*args, check=False)
        assert p.returncode == 1 and p.stdout == "", args
        assert f"ftpad: error: {trace}: {NO_EXITS.format(cmd)}" in p.stderr, p.stderr
    assert not (tmp_path / "f.svg").exists()
    # One function with exits is enough: the usual output, no word said.
    s = Scenario(tmp_path / "x.trace").image("1.0", "/bin/x", ["main", "f"], noexit=["main"])
    trace = s.thread(1, "x").evs([(0, "entry", "main", 100), (5, "entry", "f", 90),
                                  (9, "exit", "f", 90)]).write(gen)
    for args in (["report", trace], ["dump", "--folded", trace]):
        assert "exit sites" not in ftpad(*args).stderr


@pytest.mark.parametrize("viewer", [["replay"], ["report"], ["dump", "--chrome"]])
def test_missing_events_file_or_empty_info_is_an_error(tmp_path, gen, viewer):
    """Each names the file: an image that says it wrote events but has no
    events file, and an empty info."""
    s = Scenario(tmp_path / "m.trace").image("1.0", "/bin/x", ["main"], events=2)
    trace = s.thread(1, "x").evs([(0, "entry", "main", 100), (9, "exit", "main", 100)]).write(gen)
    assert ftpad(*viewer, trace).returncode == 0
    (trace / "1.0" / "1.events").unlink()
    p = ftpad(*viewer, trace, check=False)
    assert p.returncode == 1 and p.stdout == ""
    assert f"{trace}/1.0/<tid>.events: missing: {trace}/1.0/image says events=2" in p.stderr
    (trace / "info").write_text("")
    p = ftpad(*viewer, trace, check=False)
    assert p.returncode == 1 and p.stdout == ""
    assert f"ftpad: error: {trace}/info: empty: a trace's info starts with format=2" in p.stderr


@pytest.mark.parametrize("attached", [False, True], ids=["record", "attach"])
def test_frames_open_at_the_end(tmp_path, gen, attached):
    """At the end of an attach (info's attach=) the open frames were still
    running; at the end of a recorded process they were unwound.  Counts
    say "1 frame", and events as the summary counts them: a LOST record
    is not one."""
    s = Scenario(tmp_path / "o.trace")
    if attached:
        s.raw("info attach=1")
    s.image("1.0", "/bin/x", ["main", "f"]).thread(1, "x")
    trace = s.evs([(0, "entry", "main", 100), (5, "lost", 0, 3), (9, "entry", "f", 90)]).write(gen)
    p = ftpad("replay", trace)
    how = "running" if attached else "unwound"
    said = "2 frames running at detach" if attached else "2 frames unwound"
    assert p.stdout.splitlines()[-3:] == [f"  0.000 us [     1] |   f(); /* {how} */",
                                          f"  0.009 us [     1] | }} /* main, {how} */",
                                          f"# 2 events, 3 LOST (buffer full, first at 0.005 us), {said}"]
    s = Scenario(tmp_path / "one.trace").image("1.0", "/bin/x", ["main"]).thread(1, "x")
    trace = s.evs([(0, "entry", "main", 100)]).write(gen)
    assert ftpad("replay", trace).stdout.splitlines()[-1] == "# 1 event, 1 frame unwound"


def test_not_a_trace_directory(tmp_path):
    p = ftpad("report", tmp_path, check=False)
    assert p.returncode == 1 and "not a trace directory" in p.stderr


def test_format_of_another_version(tmp_path, gen):
    s = Scenario(tmp_path / "v.trace")
    s.lines[1] = "info format=3"
    s.image("1.0", "/bin/x", ["main"]).thread(1, "x")
    p = ftpad("replay", s.write(gen), check=False)
    assert p.returncode == 1
    assert "v.trace/info: trace format 3 is not one this ftpad reads (1, 2)" in p.stderr


@pytest.mark.parametrize("field,value,message", [
    ("magic", "NOTATRCE", "not an ftpad events file"),
    ("version", "7", "events format version 7 is not one this ftpad reads (1, 2)"),
    ("event_size", "24", "header says 64-byte header and 24-byte events; want 64 and 16"),
])
def test_events_file_of_another_format(tmp_path, gen, field, value, message):
    s = Scenario(tmp_path / "h.trace").image("1.0", "/bin/x", ["main"])
    s.raw(f"header {field} {value}").thread(1, "x").ev(0, "entry", "main", 10)
    p = ftpad("dump", "--folded", s.write(gen), check=False)
    assert p.returncode == 1
    assert f"h.trace/1.0/1.events: {message}" in p.stderr


def test_truncated_events_file(tmp_path, gen):
    s = Scenario(tmp_path / "t.trace").image("1.0", "/bin/x", ["main", "f"]).thread(1, "x")
    s.evs([(0, "entry", "main", 100), (10, "entry", "f", 90), (20, "exit", "f", 90)])
    s.raw("bytes 9")  # the process died in the middle of an event
    p = ftpad("replay", s.write(gen))
    assert "t.trace/1.0/1.events: cut short: read to its last whole event (3), " \
           "9 stray bytes ignored" in p.stderr
    assert "  0.010 us [     1] |   f();\n  0.020 us [     1] | } /* main, unwound */" in p.stdout


def test_unknown_kinds_and_sites_are_skipped_and_counted(tmp_path, gen):
    s = Scenario(tmp_path / "u.trace").image("1.0", "/bin/x", ["main"]).thread(1, "x")
    s.evs([(0, "entry", "main", 100), (5, 9, 0, 0), (6, 15, 3, 3), (7, 0, 99, 50),
           (10, "exit", "main", 100)])
    p = ftpad("replay", s.write(gen))
    assert "u.trace/1.0/1.events: 2 events of unknown kinds and 1 of unknown site ids skipped" \
        in p.stderr
    assert p.stdout.endswith("  0.010 us [     1] | main();\n"
                             "# 5 events, 3 unknown events skipped\n")


def test_usage_errors(tmp_path):
    for args, message in [(["dump", tmp_path], "say which format"),
                          (["report", "-s", "size", tmp_path], "unknown sort key 'size'"),
                          (["replay", tmp_path, tmp_path], "want one trace directory")]:
        p = ftpad(*args, check=False)
        assert p.returncode == 2 and message in p.stderr, args


# --- Chrome JSON

def check_chrome_pairs(events):
    """Every B is closed by an E of the same name on its thread, in order,
    at a time not before it; returns the B count per (pid, tid)."""
    stacks, begins = {}, {}
    for e in events:
        if e["ph"] not in "BE":
            continue
        assert isinstance(e["ts"], float)
        key = e["pid"], e["tid"]
        stack = stacks.setdefault(key, [])
        if e["ph"] == "B":
            stack.append(e)
            begins[key] = begins.get(key, 0) + 1
        else:
            assert stack, f"E without B: {e}"
            b = stack.pop()
            assert (b["name"], b["cat"]) == (e["name"], e["cat"])
            assert e["ts"] >= b["ts"]
    assert all(not s for s in stacks.values()), stacks
    return begins


def test_chrome_json_loads_and_pairs(tmp_path, gen):
    for make, frames in [(scenario_a, {(100, 100): 9}),
                         (scenario_b, {(200, 200): 18}),
                         (scenario_c, {(300, 300): 4, (300, 301): 2, (302, 302): 3})]:
        out = tmp_path / f"{make.__name__}.json"
        ftpad("dump", "--chrome", make(tmp_path, gen), "-o", out)
        doc = json.loads(out.read_text())
        assert check_chrome_pairs(doc["traceEvents"]) == frames
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {(300, 300): "next", (300, 301): "worker", (302, 302): "par"}


def test_chrome_json_marks(tmp_path, gen):
    ftpad("dump", "--chrome", scenario_a(tmp_path, gen), "-o", tmp_path / "a.json")
    events = json.loads((tmp_path / "a.json").read_text())["traceEvents"]
    assert [e["ts"] for e in events if e["name"] == "main"] == [0.0, 2.5]
    assert [e["args"] for e in events if e["name"] == "old" and e["ph"] == "E"] == [
        {"entry_only": True}]
    assert [(e["ph"], e["args"]) for e in events if e["name"] == "LOST"] == [("i", {"events": 2, "cause": "buffer full"})]
    assert [e["cat"] for e in events if e["name"] == "[signal SIGUSR1]"] == ["signal", "signal"]


# --- the same trace, the same bytes

@pytest.mark.parametrize("args", [["replay"], ["report"], ["dump", "--folded"],
                                  ["dump", "--chrome"], ["dump", "--perfetto"]])
def test_output_is_deterministic(tmp_path, gen, args):
    trace = scenario_b(tmp_path, gen)
    a = subprocess.run([FTPAD_BIN, *args, trace], capture_output=True, check=True).stdout
    b = subprocess.run([FTPAD_BIN, *args, trace], capture_output=True, check=True).stdout
    assert a == b and a


def test_dump_writes_through_a_temporary(tmp_path, gen):
    out = tmp_path / "out.json"
    out.write_text("old")
    p = ftpad("dump", "--chrome", tmp_path / "missing", "-o", out, check=False)
    assert p.returncode == 1 and out.read_text() == "old"
    ftpad("dump", "--chrome", scenario_a(tmp_path, gen), "-o", out)
    assert json.loads(out.read_text()) and [f.name for f in tmp_path.iterdir()
                                            if ".tmp." in f.name] == []


# --- live

def live_tables(text):
    """Each refresh's rows, as {function: calls}."""
    tables = []
    for block in text.split("ftpad live: ")[1:]:
        rows = {}
        for line in block.splitlines()[1:]:
            cells = re.split(r"\s{2,}", line.strip())
            if len(cells) == 6 and cells[4].isdigit():
                rows[cells[5].split(" (")[0]] = int(cells[4])
        tables.append(rows)
    return tables


def being_recorded(trace):
    """info says the trace is being recorded, by this very process (alive,
    with its start time), as `ftpad record` says it of itself."""
    start = open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]
    with open(trace / "info", "a") as f:
        f.write(f"state=recording\nrecorder={os.getpid()} {start}\n")
    return trace


def test_live_on_a_finished_directory(tmp_path, gen):
    trace = scenario_a(tmp_path, gen)
    p = ftpad("live", "--iterations", "2", "--interval", "1", trace)
    assert "\033" not in p.stdout  # plain output when stdout is not a terminal
    tables = live_tables(p.stdout)  # finished (no state=: an older trace): one look
    assert len(tables) == 1 and "(finished)" in p.stdout
    assert tables[0]["main"] == 1 and tables[0]["fib"] == 2


def test_live_on_a_directory_being_recorded(tmp_path, gen):
    trace = being_recorded(scenario_a(tmp_path, gen))
    p = ftpad("live", "--iterations", "2", "--interval", "1", trace)
    tables = live_tables(p.stdout)
    assert len(tables) == 2 and tables[0] == tables[1] and "(finished)" not in p.stdout
    assert tables[0]["main"] == 1 and tables[0]["fib"] == 2


def test_live_follows_a_directory_being_written(tmp_path, gen):
    s = Scenario(tmp_path / "l.trace").image("1.0", "/bin/x", ["main", "tick"]).thread(1, "x")
    s.ev(0, "entry", "main", 100)
    trace = being_recorded(s.write(gen))
    live = subprocess.Popen([FTPAD_BIN, "live", "--interval", "20", trace],
                            stdout=subprocess.PIPE, text=True)
    try:
        for i in range(50):
            more = Scenario(trace)
            more.lines = [f"dir {trace}", f"image 1.0", "append 1"]
            more.sites = s.sites
            more.evs([(10 * i + 1, "entry", "tick", 90), (10 * i + 5, "exit", "tick", 90)])
            more.write(gen)
            if i == 25:  # a partly written event: live reads up to it, quietly
                with open(trace / "1.0" / "1.events", "ab") as f:
                    f.write(b"\1\2\3")
                    f.flush()
                with open(trace / "1.0" / "1.events", "rb+") as f:
                    f.truncate(os.path.getsize(trace / "1.0" / "1.events") - 3)
        more = Scenario(trace)
        more.lines = [f"dir {trace}", "image 1.0", "append 1"]
        more.sites = s.sites
        more.ev(1000, "exit", "main", 100).write(gen)
        with open(trace / "info", "a") as f:  # the recorder's summary: finished
            f.write("exit=0\nevents=102\nstate=finished\n")
        out, _ = live.communicate(timeout=60)
    finally:
        live.kill()
    tables = live_tables(out)
    assert "(finished)" in out.split("ftpad live: ")[-1].splitlines()[0]
    assert tables[-1] == {"main": 1, "tick": 50}
    # every refresh saw a prefix of the calls
    assert all(t.get("tick", 0) <= 50 for t in tables)


def test_live_runs_a_program_and_keeps_its_status(tmp_path):
    p = ftpad("live", "--iterations", "1", "--", "sh", "-c", "exit 3", check=False)
    assert p.returncode == 3
    assert "ftpad: live: the trace is kept in /tmp/ftpad-live." in p.stderr
    shutil.rmtree(p.stderr.split("kept in ")[1].strip(), ignore_errors=True)


def test_live_missing_directory(tmp_path):
    p = ftpad("live", "--iterations", "1", tmp_path / "none", check=False)
    assert p.returncode == 1 and "none: No such file or directory" in p.stderr


# --- a trace reads on another machine

A64_FTPAD = ftpadtest.BUILD / "runtime" / "aarch64" / "bin" / "ftpad"


@pytest.mark.parametrize("args", [["replay"], ["report"], ["dump", "--folded"],
                                  ["dump", "--chrome"], ["dump", "--perfetto"]])
def test_aarch64_ftpad_reads_the_same_bytes(tmp_path, gen, args):
    # The format is little-endian and fixed-size everywhere: the aarch64
    # ftpad, under qemu, gives byte for byte what the host's gives.
    for need in (A64_FTPAD, shutil.which("qemu-aarch64")):
        if not need or not os.path.exists(need):
            pytest.fail(f"{need or 'qemu-aarch64'} is missing: build ftpad_aarch64_tool, "
                        "run scripts/install-deps.sh")
    trace = scenario_b(tmp_path, gen)
    host = subprocess.run([FTPAD_BIN, *args, trace], capture_output=True, check=True).stdout
    a64 = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", A64_FTPAD, *args, trace],
                         capture_output=True, check=True).stdout
    assert a64 == host and host


def test_chrome_json_escapes_names(tmp_path, gen):
    # Symbol names are bytes: quotes, backslashes, UTF-8 and bytes that are
    # not UTF-8 at all must still give JSON that loads.
    s = Scenario(tmp_path / "n.trace")
    s.image("1.0", "/bin/x", ['q"uo\\te', "größe", "bad\x01byte"]).thread(1, "x")
    s.evs([(0, "entry", 'q"uo\\te', 100), (1, "entry", "größe", 90),
           (2, "entry", "bad\x01byte", 80), (3, "exit", "bad\x01byte", 80),
           (4, "exit", "größe", 90), (5, "exit", 'q"uo\\te', 100)])
    script = "\n".join(s.lines).encode().replace(b"bad\x01byte", b"bad\xffbyte") + b"\n"
    subprocess.run([gen], input=script, check=True)
    ftpad("dump", "--chrome", s.path, "-o", tmp_path / "n.json")
    events = json.loads((tmp_path / "n.json").read_bytes())["traceEvents"]
    assert [e["name"] for e in events if e["ph"] == "B"] == ['q"uo\\te', "größe", "bad\ufffdbyte"]


def test_live_waits_for_an_image_being_made(tmp_path, gen):
    # A recorder makes an image's directory, then its sites, then each
    # events file's header: live shows what is there, quietly, and so
    # does report, with a word, while the trace says it is being recorded;
    # once it no longer does, report calls the same directory broken.
    trace = scenario_a(tmp_path, gen)
    (trace / "101.0").mkdir()
    (trace / "101.0" / "101.events").write_bytes(b"FTPADTRC\1")
    q = ftpad("report", trace, check=False)
    assert q.returncode == 1 and "101.0/sites: No such file or directory" in q.stderr
    being_recorded(trace)
    p = ftpad("live", "--iterations", "1", trace)
    assert p.stderr == "" and live_tables(p.stdout)[0]["fib"] == 2
    q = ftpad("report", trace)
    assert "still being recorded: read as it is now" in q.stderr


def test_folded_names_stay_one_frame(tmp_path, gen):
    # A C++ name is demangled and may hold spaces; a ';' inside a name
    # (none is known, but the sites file allows one) would split its frame:
    # it is shown as ':' in folded stacks, and so in flame graphs.
    s = Scenario(tmp_path / "n.trace")
    s.image("1.0", "/bin/x", ["main", "_ZN2ns1fIiEEvT_", "odd;name"]).thread(1, "x")
    s.evs([(0, "entry", "main", 100), (10, "entry", "_ZN2ns1fIiEEvT_", 90),
           (30, "exit", "_ZN2ns1fIiEEvT_", 90), (40, "entry", "odd;name", 90),
           (70, "exit", "odd;name", 90), (100, "exit", "main", 100)])
    trace = s.write(gen)
    assert ftpad("dump", "--folded", trace).stdout.splitlines() == [
        "main 50", "main;odd:name 30", "main;void ns::f<int>(int) 20"]
    assert ftpad("dump", "--folded", "--raw-names", trace).stdout.splitlines() == [
        "main 50", "main;_ZN2ns1fIiEEvT_ 20", "main;odd:name 30"]
