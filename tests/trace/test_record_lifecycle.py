# SPDX-License-Identifier: MIT
"""The ways a recorded process begins, ends or changes that once lost
events or put them in the wrong place (tests/src/record/lifecycle.c): a
vfork child's exec, an exec that fails while other threads record, a
crash handler with SA_RESETHAND, a double-forked daemon, a raw
exit_group, a chroot, a clone(CLONE_VM) child on its parent's TLS.  Each
compares the trace with the program's own counts."""
import os
import re
import signal
import subprocess
import time

import pytest

from ftpadtest import FTPAD_BIN, PLUGIN, TEST_SRC, run
from test_record import SUMMARY, Trace, counts

SRC = TEST_SRC / "record"
# Room for every event, so that a writer kept off the CPU by a loaded host
# does not make these tests count drops.
POOL = {"FTPAD_RECORD_CHUNKS": "1024"}


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    if not PLUGIN.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{PLUGIN} or {FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp("lifecycle")
    run(["gcc", "-O2", f"-fplugin={PLUGIN}", "-o", out / "lifecycle", SRC / "lifecycle.c",
         "-lpthread"])
    return out / "lifecycle"


def record(prog, tmp_path, *args, timeout=120, before_reading=None):
    out = tmp_path / "trace"
    p = run([FTPAD_BIN, "record", "-o", out, "--", prog, *args], check=False, cwd=tmp_path,
            env={**os.environ, **POOL}, timeout=timeout)
    if before_reading:
        before_reading(p)
    m = SUMMARY.search(p.stderr)
    assert m, p.stderr
    return p, Trace(out), dict(zip(("sites", "enabled", "events", "dropped", "bytes"),
                                   map(int, m.groups()[:5])))


def own_image(trace, exe):
    """The image of the program itself (not of what it exec'ed)."""
    [image] = [i for i in trace.images.values() if i.kv["exe"] == [str(exe)]]
    return image


def test_vfork_child_exec_leaves_the_parent_alone(prog, tmp_path):
    """A vfork child's exec must not drain its parent's buffers into files
    of its own descriptor table: the parent's writer then wrote its events
    into whatever the program opened on those numbers."""
    out = tmp_path / "out.txt"
    n = 100000

    def program_file_is_its_own(p):
        assert p.returncode == 0, p.stderr
        assert out.read_bytes() == b"done\n", \
            f"the trace's events went into the program's file ({out.stat().st_size} bytes)"

    p, trace, s = record(prog, tmp_path, "vforkexec", out, n,
                         before_reading=program_file_is_its_own)
    image = own_image(trace, prog)
    assert counts(p.stdout)[0]["mid"] == image.calls()["mid"] == n + 3
    assert s["dropped"] == 0 and s["events"] == sum(i.events() for i in trace.images.values())


def test_failed_exec_with_threads_loses_and_mixes_nothing(prog, tmp_path):
    """An exec that fails while other threads record: their chunks stay
    theirs, so every counted event is in its own thread's file, in time
    order."""
    p, trace, s = record(prog, tmp_path, "execfail", 300)
    assert p.returncode == 0, p.stderr
    own = counts(p.stdout)[0]
    [image] = trace.images.values()
    assert s["events"] == image.events(), "counted events are missing from the files"
    assert int(image.kv["events"][-1]) == image.events()
    for tid, evs in image.threads.items():
        names = {image.sites[site][3] for _, kind, site, _ in evs if kind == "entry"}
        assert len(names & {"w0", "w1", "w2"}) <= 1, f"thread {tid} holds {names}"
        assert all(a[0] <= b[0] for a, b in zip(evs, evs[1:])), f"time goes back in {tid}"
    if s["dropped"] == 0:
        calls = image.calls()
        assert [calls[f"w{k}"] for k in range(3)] == [own[f"w{k}"] for k in range(3)]


def test_resethand_crash_handler_keeps_the_trace(prog, tmp_path):
    """A crash handler with SA_RESETHAND that logs and raises again: the
    reset goes to the recorder's end, not the real default, and a query
    in the handler shows what the kernel would: SIG_DFL, no SA_SIGINFO."""
    p, trace, s = record(prog, tmp_path, "resethand", 1000)
    plain = run([prog, "resethand", 1000], check=False)
    assert plain.returncode == -signal.SIGSEGV and p.returncode == 128 + signal.SIGSEGV
    assert p.stdout == plain.stdout == "leaf=1000 mid=1000\ndfl=1 siginfo=0\n"
    assert "warning" not in p.stderr, p.stderr
    [image] = trace.images.values()
    assert image.calls()["mid"] == 1000
    assert s["events"] == image.events() >= 2000 and s["dropped"] == 0


def test_double_forked_daemon_is_waited_for(prog, tmp_path):
    """fork, setsid, fork: the daemon outlives the program; ftpad record,
    its subreaper, waits for it before it installs the trace."""
    n = 40000
    p, trace, s = record(prog, tmp_path, "daemon", n)
    assert p.returncode == 0, p.stderr
    assert "waiting for 1 more process" in p.stderr
    [daemon] = [i for i in trace.images.values() if i.calls()["mid"]]
    assert daemon.calls()["mid"] == n
    assert s["events"] == sum(i.events() for i in trace.images.values())
    assert "warning" not in p.stderr, p.stderr


def test_ctrl_c_stops_waiting_for_a_daemon(prog, tmp_path):
    """A daemon that does not end: Ctrl-C installs the trace as it is and
    names the process still running."""
    out = tmp_path / "trace"
    p = subprocess.Popen([FTPAD_BIN, "record", "-o", out, "--", prog, "daemon", "forever"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=tmp_path)
    daemon = None
    try:
        line = p.stderr.readline()
        assert "waiting for 1 more process" in line, line
        daemon = int(re.search(r": (\d+) \(", line).group(1))
        # The daemon makes its image as it starts, which on a loaded
        # machine can come after its parent is gone: a daemon that ran.
        for _ in range(1200):
            if (out / f"{daemon}.0").is_dir():
                break
            time.sleep(0.1)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0
        assert re.search(rf"image {daemon}\.0 .*still running", err), err
        assert out.is_dir() and (out / f"{daemon}.0").is_dir()
    finally:
        if p.poll() is None:
            p.kill()
        if daemon:
            os.kill(daemon, signal.SIGKILL)


def test_raw_exit_group_is_said_and_keeps_what_was_written(prog, tmp_path):
    """exit_group(2) passes every exit hook: the buffers still held are
    lost, which ftpad record says, naming the cause; the summary counts
    what the writer had written."""
    p, trace, s = record(prog, tmp_path, "exitgroup", 200000)
    assert p.returncode == 3
    assert "exited with status 3" in p.stderr and "exit_group" in p.stderr, p.stderr
    assert "SIGKILL" not in p.stderr
    [image] = trace.images.values()
    assert 0 < image.events() == s["events"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_chroot_keeps_every_event(prog, tmp_path):
    """The trace directory is reached through a descriptor opened at the
    start: after a chroot its path no longer resolves."""
    jail = tmp_path / "jail"
    jail.mkdir()
    p, trace, s = record(prog, tmp_path, "chroot", jail, 5000)
    assert p.returncode == 0, p.stderr
    [image] = trace.images.values()
    assert image.calls()["mid"] == 5000
    assert s["events"] == image.events() == 10002 and s["dropped"] == 0
    assert "warning" not in p.stderr and "error" not in p.stderr, p.stderr


def test_clone_vm_child_stays_out_of_its_parents_file(prog, tmp_path):
    """A clone(CLONE_VM) child runs on its parent's TLS: its events are
    counted as dropped, never written into its parent's thread file."""
    n = 3000
    p, trace, s = record(prog, tmp_path, "clonevm", n)
    assert p.returncode == 0, p.stderr
    [image] = trace.images.values()
    assert len(image.threads) == 1
    calls = image.calls()
    assert (calls["mid"], calls["leaf"]) == (20, 20)
    # in_clone's entry, and mid's and leaf's n times
    assert s["dropped"] == 2 * n + 1 and s["events"] == image.events()
