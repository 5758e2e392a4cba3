# SPDX-License-Identifier: MIT
"""`ftpad record` of programs that treat their descriptors, limits, disk and
pids as theirs alone (tests/src/record/hostile.c): the program runs as it
does without tracing, and the trace holds every event it counted, or counts
the ones it could not write, with the cause (docs/runtime.md's failure
table)."""
import os
import re
import resource
import shutil
import subprocess

import pytest

from ftpadtest import FTPAD_BIN, PLUGIN, TEST_SRC, run
from test_record import SUMMARY, Trace

SRC = TEST_SRC / "record" / "hostile.c"
NOT_WRITTEN = re.compile(r"^ftpad: (\d+) events? not written \((.*)\)", re.M)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    if not PLUGIN.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{PLUGIN} or {FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp("hostile") / "hostile"
    run(["gcc", "-O2", f"-fplugin={PLUGIN}", "-o", out, SRC, "-lpthread"])
    return out


def record(cwd, cmd, out="trace", wrap=(), opts=(), **kw):
    p = run([*wrap, FTPAD_BIN, "record", *opts, "-o", out, "--", *cmd], check=False, cwd=cwd,
            **kw)
    m = SUMMARY.search(p.stderr)
    return p, (tuple(map(int, m.groups()[:5])) if m else None)


def work_calls(trace):
    return sum(im.calls()["work"] for im in trace.images.values())


def require_root():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a namespace of its own")


def test_daemon_that_closes_every_descriptor(hostile, tmp_path):
    """Its second file takes the number the events file had: the events go
    on into the events file, reopened by name, and none into its files."""
    p, summary = record(tmp_path, [hostile, "daemon", 100000])
    assert p.returncode == 0, p.stdout + p.stderr
    assert summary and summary[3] == 0, p.stderr
    assert (tmp_path / "second.txt").read_text() == "second\n"
    assert work_calls(Trace(tmp_path / "trace")) == 300000


def test_short_threads_under_a_low_descriptor_limit(hostile, tmp_path):
    """A thread's events file is closed once the thread has ended and its
    events are written: the recorder's descriptors do not grow with the
    threads that ever lived.  20,000 threads (over 300 times the limit of
    64) keep this test's time reasonable on a shared machine."""
    threads, per_thread = 20000, 10

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    p, summary = record(tmp_path, [hostile, "threads", threads, per_thread], preexec_fn=limit)
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    assert summary, p.stderr[-2000:]
    assert summary[3] == 0, p.stderr[-2000:]
    assert work_calls(Trace(tmp_path / "trace")) == threads * per_thread


def test_short_threads_of_a_ring_under_a_low_descriptor_limit(hostile, tmp_path):
    """--ring writes its files at the end, and a thread that has ended gets
    its file closed after its last chunk there too: the ring holds the
    chunks of about a thousand threads, fifteen times the limit of 64, and
    every event it keeps reaches the files."""
    threads, per_thread = 4000, 10

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    p, summary = record(tmp_path, [hostile, "threads", threads, per_thread],
                        opts=["--ring", "64"], preexec_fn=limit)
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    assert summary, p.stderr[-2000:]
    assert summary[3] == 0 and "not written" not in p.stderr, p.stderr[-2000:]
    trace = Trace(tmp_path / "trace")
    assert events_in_files(trace) == summary[2]
    assert work_calls(trace) >= 15 * 64 * per_thread


def not_written(stderr):
    m = NOT_WRITTEN.search(stderr)
    assert m, stderr
    return int(m[1]), m[2]


def events_in_files(trace):
    return sum(im.events() for im in trace.images.values())


def test_program_that_limits_its_file_sizes(hostile, tmp_path):
    """RLIMIT_FSIZE binds the recorder's writes too: the program lives on,
    and the events past the limit are counted, with EFBIG."""
    p, summary = record(tmp_path, [hostile, "fsize", 1000000])
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == "calls=1000000\n"
    assert summary, p.stderr
    unwritten, cause = not_written(p.stderr)
    assert "EFBIG" in cause
    assert unwritten and summary[3] >= unwritten
    # events= counts the events in the files; the others are dropped.
    assert events_in_files(Trace(tmp_path / "trace")) == summary[2]
    assert summary[2] + summary[3] == 1000000 + 1  # work, and main


def record_on_tmpfs(tmp_path, size, opts, cmd):
    """`ftpad record OPTS -o trace -- CMD` in a tmpfs of SIZE of its own (a
    mount namespace), then df's line for it on stdout; the result, and
    where the trace was copied out to."""
    require_root()
    disk, copy = tmp_path / "disk", tmp_path / "copy"
    disk.mkdir()
    args = " ".join(f'"{a}"' for a in [FTPAD_BIN, "record", *opts, "-o", "trace", "--", *cmd])
    script = (f'mount -t tmpfs -o size={size} ftpad-disk "{disk}" && cd "{disk}" && {args}; '
              f'rc=$?; df -P -k . | tail -1; cp -r trace "{copy}"; exit $rc')
    p = run(["unshare", "-m", "sh", "-c", script], check=False)
    if "mount" in p.stderr and not copy.exists():
        pytest.skip(f"cannot mount a tmpfs: {p.stderr}")
    return p, copy


def test_full_disk_is_counted_with_its_cause(hostile, tmp_path):
    """A trace on a 64 KiB tmpfs (the calls' events take 60-300 KiB,
    compressed), with a fixed cap above it (without one the recorder would
    keep a tenth of it free): every event that found no room is counted as
    dropped, with ENOSPC, in the summary and in the viewers."""
    p, copy = record_on_tmpfs(tmp_path, "64k", ["--size", "1024"], [hostile, "calls", 2000000])
    assert p.returncode == 0, p.stderr
    m = SUMMARY.search(p.stderr)
    assert m, p.stderr
    events, dropped = int(m[3]), int(m[4])
    assert events + dropped == 2000000 + 1  # work, and main
    unwritten, cause = not_written(p.stderr)
    assert "ENOSPC" in cause
    assert dropped >= unwritten > 0
    assert events_in_files(Trace(copy)) == events
    replay = run([FTPAD_BIN, "replay", copy])
    assert re.search(r"LOST \d+ events: not written \(ENOSPC", replay.stdout), replay.stdout[-500:]
    assert "not written (ENOSPC" in replay.stderr + replay.stdout


def in_pid_namespace(hostile, tmp_path, mode, n):
    """`ftpad record` as pid 1 of a new pid namespace, where the program
    can set the next pid itself (ns_last_pid)."""
    require_root()
    p = run(["unshare", "--pid", "--fork", "--mount-proc", FTPAD_BIN, "record", "-o", "trace",
             "--", hostile, mode, n], check=False, cwd=tmp_path)
    if p.returncode == 2:
        pytest.skip(f"the kernel would not give a pid back (ns_last_pid): {p.stderr}")
    assert p.returncode == 0, p.stdout + p.stderr
    m = SUMMARY.search(p.stderr)
    assert m and int(m[4]) == 0, p.stderr
    return Trace(tmp_path / "trace")


def test_reused_pid_gets_an_image_of_its_own(hostile, tmp_path):
    trace = in_pid_namespace(hostile, tmp_path, "reuse-pid", 100000)
    children = [im for im in trace.images.values() if im.calls()["work"]]
    assert len(children) == 2, sorted(trace.images)
    assert children[0].kv["pid"] == children[1].kv["pid"]
    assert [im.kv["pid"] for im in children] and all(
        len(im.kv["pid"]) == 1 for im in children), "one process an image"
    assert work_calls(trace) == 200000


def test_reused_tid_gets_a_file_of_its_own(hostile, tmp_path):
    trace = in_pid_namespace(hostile, tmp_path, "reuse-tid", 100000)
    [image] = trace.images.values()
    assert len(image.files) == 3, image.files  # main, and the two threads
    assert work_calls(trace) == 200000
