# SPDX-License-Identifier: MIT
"""`ftpad attach` facing a process, or a user, that works against it
(runtime/tools/attach*.c, tracedir.c; docs/tracing.md, "Who may attach to
whom"):
- a seccomp filter on a thread other than the main one is refused, and
  the process lives on;
- a tracer that holds one thread only is named, not taken for a lack of
  permission.
The library loaded is the stand-in of test_attach.py (tests/src/attach/
fake_libftpad.c).  x86_64, natively, as root."""
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from attachtest import ReadyProcess, require_attach
from ftpadtest import FTPAD_BIN, PLUGIN, ROOT, run

SRC = ROOT / "tests" / "src" / "attach"


@pytest.fixture(scope="module")
def progs():
    """The programs, in a directory every user may read: the processes of
    these tests run as nobody."""
    require_attach()
    if os.geteuid():
        pytest.skip("attaching to another user's process needs root")
    d = Path(tempfile.mkdtemp(prefix="ftpad-hostile-"))
    d.chmod(0o755)
    padded = ["gcc", "-O2", f"-fplugin={PLUGIN}", "-fplugin-arg-ftpad-exit=1", "-pthread"]
    run([*padded, SRC / "victim.c", "-o", d / "victim"])
    run([*padded, SRC / "seccomp_thread.c", "-o", d / "seccomp_thread"])
    run(["gcc", "-O2", "-shared", "-fPIC", "-pthread", SRC / "fake_libftpad.c", "-o",
         d / "fake.so"])
    yield {"victim": d / "victim", "seccomp_thread": d / "seccomp_thread",
           "fake": d / "fake.so"}
    shutil.rmtree(d)


def test_refuses_a_thread_under_seccomp(progs, tmp_path):
    """Only the second thread has a filter, which kills the process on
    socket(): attach refuses, and the process lives on."""
    v = ReadyProcess([progs["seccomp_thread"]])
    try:
        status = {t: open(f"/proc/{v.pid}/task/{t}/status").read()
                  for t in os.listdir(f"/proc/{v.pid}/task")}
        assert "Seccomp:\t0" in status[str(v.pid)]
        assert any("Seccomp:\t2" in s for s in status.values())
        r = run([FTPAD_BIN, "attach", v.pid, "--library", progs["fake"], "-o", tmp_path / "t",
                 "--duration", "0.3"], check=False, timeout=120)
        time.sleep(0.2)
        assert v.alive(), f"attach killed it ({v.p.returncode}):\n{r.stderr}"
        assert r.returncode == 1
        assert re.search(rf"cannot attach to process {v.pid}: it runs under seccomp "
                         rf"\(Seccomp: 2 in /proc/{v.pid}/task/\d+/status\)", r.stderr), r.stderr
        assert not list(tmp_path.iterdir())
        v.finish()
    finally:
        v.kill()


def test_names_the_tracer_of_one_thread(progs, tmp_path):
    """strace holds one thread, not the main one: its pid and name are
    said, not a permission problem."""
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    v = ReadyProcess([progs["victim"]])
    tracer = None
    try:
        tid = max(int(t) for t in os.listdir(f"/proc/{v.pid}/task"))
        tracer = subprocess.Popen(["strace", "-qq", "-e", "trace=none", "-p", str(tid)],
                                  stderr=subprocess.DEVNULL)
        status = f"/proc/{v.pid}/task/{tid}/status"
        for _ in range(500):
            if f"TracerPid:\t{tracer.pid}\n" in open(status).read():
                break
            time.sleep(0.01)
        else:
            pytest.fail("strace did not attach")
        r = run([FTPAD_BIN, "attach", v.pid, "--library", progs["fake"], "-o", tmp_path / "t"],
                check=False, timeout=120)
        assert r.returncode == 1
        assert f"cannot attach to process {v.pid}: its thread {tid} is already traced by " \
               f"process {tracer.pid} (strace)" in r.stderr, r.stderr
        tracer.terminate()
        tracer.wait()
        tracer = None
        v.finish()
    finally:
        if tracer:
            tracer.kill()
            tracer.wait()
        v.kill()
