# SPDX-License-Identifier: MIT
"""`ftpad patch` against death, x86_64 natively: tests/src/patch/server.c
(hot threads checking each result is the old code's or a patch's, threads
blocked in system calls).

- The target killed (SIGKILL) at random points of a patch, over many runs:
  the tool ends (it never waits for a dead thread), exit 0 if the patch
  was done before the kill, else 1 saying the process is gone; no process
  of the tool's is left behind.
- The tool killed (SIGKILL) at random points of applies and reverts: the
  process keeps running, no thread stopped or traced, every result the
  old code's or the new's; each time `--list` says what is applied, and
  that is what runs; the next apply or revert works, and at the end the
  text is byte for byte as before.

The delays are spread over the time a patch takes here, measured first."""
import random
import re
import subprocess
import time

import pytest

from attachtest import assert_text_unchanged, text_snapshot
from ftpadtest import FTPAD_BIN
from patchtest import Server, build_server, patch, wait_untraced

RUNS = 20
KILLS = 30
GONE = re.compile(r"^ftpad: error: cannot patch process (\d+): (process \1 exited while "
                  r"patching|no such process|it is a zombie\b.*)$", re.M)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_server(tmp_path_factory)


def time_to_patch(built):
    """The time of one apply and one revert, from a fresh process."""
    s = Server(built / "server")
    try:
        t0 = time.monotonic()
        patch(s.pid, built / "patch1.so")
        full = time.monotonic() - t0
        patch(s.pid, "--revert", built / "patch1.so")
        return full
    finally:
        s.kill()


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return f.read().split()
    except FileNotFoundError:
        return []


def test_target_killed_mid_patch(built):
    full = time_to_patch(built)
    rng = random.Random(32)
    outcomes = set()
    for n in range(RUNS):
        s = Server(built / "server")
        p = subprocess.Popen([str(FTPAD_BIN), "patch", str(s.pid), str(built / "patch1.so")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0, full * 1.2))
        s.p.kill()
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            pytest.fail(f"run {n}: ftpad patch still runs 30 s after its target died")
        s.p.wait()
        if p.returncode == 0:
            outcomes.add("done")
        else:
            assert p.returncode == 1 and GONE.search(err), f"run {n}: {err!r}"
            outcomes.add("gone")
        assert not children_of(p.pid)
    # Both outcomes seen: the kills fell inside the patch too.
    assert "gone" in outcomes, outcomes


def applied(pid):
    listed = patch(pid, "--list")
    return [line.split()[0] for line in listed.stdout.splitlines()]


def test_tool_killed_at_any_point(built):
    server = Server(built / "server")
    so = str(built / "patch1.so")
    try:
        before = text_snapshot(server.pid)
        full = time_to_patch(built)
        rng = random.Random(33)
        states = set()
        for n in range(KILLS):
            on = applied(server.pid) == [so]
            server.expect("any")
            p = subprocess.Popen([str(FTPAD_BIN), "patch", str(server.pid),
                                  *(["--revert"] if on else []), so],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0, full))
            p.kill()
            p.wait()
            assert server.p.poll() is None, f"run {n}: the process ended"
            wait_untraced(server.pid, f"run {n}")
            now = applied(server.pid)
            assert now in ([], [so]), f"run {n}: {now}"
            states.add((on, bool(now)))
            server.expect("new" if now else "old")
            time.sleep(0.05)
            assert server.bad() == 0, f"run {n}: unexpected results"
        assert len(states) > 2, states  # some kills fell before the switch, some after
        server.expect("any")
        if applied(server.pid):
            patch(server.pid, "--revert", so)
        server.expect("old")
        server.expect("any")
        patch(server.pid, so)
        server.expect("new")
        server.expect("any")
        patch(server.pid, "--revert", so)
        server.expect("old")
        assert_text_unchanged(server.pid, before)
        assert " bad 0 " in server.quit()
    finally:
        server.kill()
