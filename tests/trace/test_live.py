# SPDX-License-Identifier: MIT
"""`ftpad live` following a recording while it is written, through
`ftpad record` (tests/src/trace/steady.c, a program that runs at a steady
pace until the test says stop): the trace has its final name from the
start and says it is being recorded (info's state=recording, recorder=),
the writer adds clock points as it goes, and live shows events during the
run, stops once the trace is finished (or its recorder is gone), and ends
with the summary's count.  No timing is asserted: each wait is on a
condition, with a generous limit."""
import os
import pathlib
import re
import shutil
import subprocess
import threading
import time

import pytest

from ftpadtest import FTPAD_BIN, PLUGIN, TEST_SRC, run
from test_record import SUMMARY, read_kv

SRC = TEST_SRC / "trace" / "steady.c"
SCREEN = re.compile(r"^ftpad live: .*?( \(finished\))?, refresh (\d+)$")
COUNT = re.compile(r"^# (\d+) events?")
LIMIT = 120  # seconds: a loaded 2-core machine, never a measure of speed


@pytest.fixture(scope="module")
def steady(tmp_path_factory):
    if not PLUGIN.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{PLUGIN} or {FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp("steady") / "steady"
    run(["gcc", "-O2", f"-fplugin={PLUGIN}", "-fplugin-arg-ftpad-exit=1", "-o", out, SRC])
    return out


class Live:
    """`ftpad live ARGS` in the background, its non-interactive output
    (stdout is a pipe) read screen by screen as it comes."""

    def __init__(self, *args, **kw):
        self.p = subprocess.Popen([str(FTPAD_BIN), "live", "--interval", "100",
                                   *map(str, args)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, **kw)
        self.screens = []  # (finished, [lines])
        self.cond = threading.Condition()
        self.err = ""
        self.readers = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=self._read_err, daemon=True)]
        for r in self.readers:
            r.start()

    def _read(self):
        for line in self.p.stdout:
            with self.cond:
                m = SCREEN.match(line.rstrip("\n"))
                if m:
                    self.screens.append((bool(m[1]), []))
                elif self.screens:
                    self.screens[-1][1].append(line.rstrip("\n"))
                self.cond.notify_all()

    def _read_err(self):
        self.err = self.p.stderr.read()

    @staticmethod
    def events(screen):
        for line in screen[1]:
            m = COUNT.match(line)
            if m:
                return int(m[1])
        return None

    def wait_events_while_recording(self):
        """The first screen of a trace still being written with events in it."""
        deadline = time.monotonic() + LIMIT
        with self.cond:
            while True:
                for s in self.screens:
                    if not s[0] and (self.events(s) or 0) > 0:
                        return s
                assert self.p.poll() is None or self.readers[0].is_alive(), \
                    f"live ended first:\n{self.screens}\n{self.err}"
                left = deadline - time.monotonic()
                assert left > 0, f"live showed no events in {LIMIT} s:\n{self.screens[-3:]}"
                self.cond.wait(min(left, 1))

    def finish(self):
        """Its exit status, once it has stopped by itself."""
        rc = self.p.wait(timeout=LIMIT)
        for r in self.readers:
            r.join(timeout=LIMIT)
        return rc


def wait_for(cond, what):
    deadline = time.monotonic() + LIMIT
    while not cond():
        assert time.monotonic() < deadline, f"no {what} in {LIMIT} s"
        time.sleep(0.05)


def summary_events(stderr):
    m = SUMMARY.search(stderr)
    assert m, stderr
    return int(m[3])


def test_live_follows_a_recording_from_before_it_starts(steady, tmp_path):
    """live DIR started before `ftpad record -o DIR` waits for DIR, shows
    events while the program runs (times right: more than one clock point
    from the first second), and stops once the trace is finished, with the
    summary's count.  Meanwhile --force does not replace it."""
    out, stop = tmp_path / "trace", tmp_path / "stop"
    live = Live(out)
    record = subprocess.Popen([FTPAD_BIN, "record", "-o", out, "--", steady, "until", stop],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        live.wait_events_while_recording()
        # The trace is at its final name, and says it is being recorded.
        info = read_kv(out / "info")
        assert info["state"] == ["recording"], info
        assert info["recorder"][0].split()[0] == str(record.pid)
        wait_for(lambda: len(read_kv(out / "info")["clock_sync"]) >= 2,
                 "clock point from the writer")
        # --force replaces a finished trace, not one being recorded.
        again = run([FTPAD_BIN, "record", "--force", "-o", out, "--", "true"], check=False)
        assert again.returncode == 1 and "is being recorded" in again.stderr, again.stderr
    finally:
        stop.touch()
    _, err = record.communicate(timeout=LIMIT)
    assert record.returncode == 0, err
    assert live.finish() == 0, live.err
    finished = [s for s in live.screens if s[0]]
    assert len(finished) == 1 and live.screens[-1][0], live.screens[-3:]
    assert live.events(live.screens[-1]) == summary_events(err)
    assert "clock_sync" not in live.err, live.err
    assert read_kv(out / "info")["state"][-1] == "finished"


def test_live_runs_and_shows_a_program(steady, tmp_path):
    """live -- PROG ARGS: records PROG itself and stops when it ends, the
    last screen with the count of the summary its recording printed."""
    live = Live("--", steady, "1", cwd=tmp_path)
    assert live.finish() == 0, live.err
    assert live.screens and live.screens[-1][0], live.screens[-3:]
    assert live.events(live.screens[-1]) == summary_events(live.err)
    kept = pathlib.Path(re.search(r"the trace is kept in (\S+)", live.err)[1])
    try:
        assert read_kv(kept / "info")["state"][-1] == "finished"
    finally:
        shutil.rmtree(kept)


def test_killed_recorder_leaves_a_trace_that_says_so(steady, tmp_path):
    """`ftpad record` killed (SIGKILL) while its program runs: the trace is
    not marked finished, live stops following it rather than loop, and
    the viewers say it is incomplete."""
    out, stop = tmp_path / "trace", tmp_path / "stop"
    # Not pipes: the program, which outlives it, would hold them open.
    record = subprocess.Popen([FTPAD_BIN, "record", "-o", out, "--", steady, "until", stop],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: any(out.glob("*/*.events")), "events file")
        record.kill()
        record.wait(timeout=LIMIT)
        live = Live(out)
        assert live.finish() == 0, live.err
        assert "without finishing it: incomplete" in live.err, live.err
        replay = run([FTPAD_BIN, "replay", out])
        assert "incomplete: its recording did not finish" in replay.stderr, replay.stderr
        assert read_kv(out / "info")["state"] == ["recording"]
    finally:
        stop.touch()
    # The program, orphaned, still ends by the stop file; its trace then
    # is as complete as it gets, yet still not marked finished.
    wait_for(lambda: not [p for p in os.listdir("/proc") if p.isdigit() and
                          _cmdline(p).startswith(str(steady))], "end of the program")


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_live_gives_up_on_a_directory_that_never_appears(tmp_path):
    """No recording ever makes DIR: live says so after a few seconds."""
    p = run([FTPAD_BIN, "live", "--interval", "100", tmp_path / "never"], check=False,
            timeout=LIMIT)
    assert p.returncode == 1 and "never" in p.stderr, p.stderr
