# SPDX-License-Identifier: MIT
"""A process that dies (SIGKILL) in the middle of `ftpad attach`, with the
real libftpad, x86_64 natively: tests/src/attach/victim.c (threads in a hot
loop, in read() and in nanosleep()) is killed at random points of the
attach, from before the tool looks at it to after its session started,
over many runs; the tool has no pause points, so the delays are spread
over the time an attach takes here, measured first.  Every outcome is
checked:
- killed before the session started: exit 1 and a message that says the
  process is gone ("exited while attaching", or "no such process" / "a
  zombie" when it was dead before the tool looked), no trace directory
  and no temporary one;
- killed during the session: its end, as for any exit of the process: exit
  0 and the trace installed;
and in every case the tool ends (it never waits for a dead thread), leaves
no process of its own (the guardian), no socket, and the dead process is
gone, none of its threads left stopped or traced.  The dead process is
reaped at once, or left a zombie until the tool has ended (its threads then
stay zombies, traced by the tool, which must not wait for them); or the
tool is frozen for the kill, which then falls between two of its steps."""
import os
import random
import re
import signal
import subprocess
import time

import pytest

from attachtest import STARTED, require_attach
from ftpadtest import FTPAD_BIN, PLUGIN, TEST_SRC, run

SRC = TEST_SRC / "attach" / "victim.c"
RUNS = 60
GONE = re.compile(r"^ftpad: error: cannot attach to process (\d+): (process \1 exited while "
                  r"attaching|no such process|it is a zombie\b.*)$", re.M)


@pytest.fixture(scope="module")
def victim_exe(tmp_path_factory):
    require_attach()
    out = tmp_path_factory.mktemp("dies") / "victim"
    run(["gcc", "-O2", "-g", f"-fplugin={PLUGIN}", "-fplugin-arg-ftpad-exit=1", "-pthread",
         SRC, "-o", out])
    return out


def start_victim(exe):
    p = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    assert p.stdout.readline().startswith("ready "), "victim did not start"
    return p


def start_attach(pid, out):
    return subprocess.Popen([str(FTPAD_BIN), "attach", str(pid), "-o", str(out), "--duration",
                             "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def time_to_start(exe, tmp_path):
    """Seconds from the tool's start to its "attached" line, here and now."""
    v = start_victim(exe)
    try:
        t0 = time.monotonic()
        a = start_attach(v.pid, tmp_path / "measure")
        line = a.stderr.readline()
        took = time.monotonic() - t0
        assert STARTED.search(line), line
        v.kill()
        v.wait()
        assert a.wait(timeout=60) == 0
        return took
    finally:
        v.kill()
        v.wait()


def processes_naming(text):
    """Pids of the processes whose command line holds text."""
    out = []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and text in open(f"/proc/{d}/cmdline").read():
                out.append(int(d))
        except OSError:
            pass  # gone meanwhile
    return out


def sockets_of(tool_pid):
    """The tool's abstract control sockets still bound."""
    with open("/proc/net/unix") as f:
        return [line for line in f if f"@ftpad-attach.{tool_pid}." in line]


def check_outcome(n, a, err, out, tmp_path, victim_pid):
    if STARTED.search(err):
        # Its session had started: the process's exit ended it.
        assert a.returncode == 0, f"run {n}: {err}"
        assert f"attach={victim_pid}" in (out / "info").read_text(), f"run {n}"
    else:
        assert a.returncode == 1 and GONE.search(err), f"run {n}: exit {a.returncode}: {err}"
        assert not out.exists(), f"run {n}: {err}"
    assert not list(tmp_path.glob(f"{out.name}.tmp-*")), f"run {n}: a temporary left"
    assert not processes_naming(str(out)), f"run {n}: a process of the tool left"
    assert not sockets_of(a.pid), f"run {n}: its socket left"


@pytest.mark.parametrize("reap, freeze", [(True, False), (False, False), (True, True)],
                         ids=["reaped", "zombie", "tool-frozen"])
def test_a_process_killed_while_attaching(victim_exe, tmp_path, reap, freeze):
    """freeze: the tool is stopped (SIGSTOP) for the kill and let go after
    it, so that the process dies between two of its steps, with whatever
    threads it held stopped then."""
    full = time_to_start(victim_exe, tmp_path)
    rng = random.Random(15)
    outcomes = []
    for n in range(RUNS):
        v = start_victim(victim_exe)
        out = tmp_path / f"k{n}"
        try:
            a = start_attach(v.pid, out)
            time.sleep(rng.uniform(0, full * 1.2))
            if freeze:
                a.send_signal(signal.SIGSTOP)
            v.kill()
            if freeze:  # before the wait: the tool may hold its threads
                a.send_signal(signal.SIGCONT)
            if reap:
                v.wait()
            try:
                _, err = a.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                a.kill()
                a.communicate()
                pytest.fail(f"run {n}: ftpad attach did not end after its process died")
        finally:
            v.kill()
            v.wait()
        assert not os.path.exists(f"/proc/{v.pid}"), f"run {n}: a thread of the process left"
        check_outcome(n, a, err, out, tmp_path, v.pid)
        outcomes.append("started" if STARTED.search(err) else GONE.search(err)[2].split()[-1])
    # Killed in the middle of getting in at least once.
    assert "attaching" in outcomes, outcomes
