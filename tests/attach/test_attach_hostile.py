# SPDX-License-Identifier: MIT
"""`ftpad attach` facing a process, or a user, that works against it
(cli/attach*.c, tracedir.c; docs/tracing.md, "Who may attach to
whom"):
- root attaching to another user's process hands the trace directory to
  that user, who may then put links, FIFOs and hard links in it: root
  follows none of them, neither when it hands the directory over nor when
  it sums up and appends the summary;
- a seccomp filter on a thread other than the main one is refused, and
  the process lives on;
- a FIFO where a mapped file was (its "X (deleted)" path) is never opened:
  attach does not hang and answers Ctrl-C;
- a tracer that holds one thread only is named, not taken for a lack of
  permission.
The library loaded is the stand-in of test_attach.py (tests/src/attach/
fake_libftpad.c).  x86_64, natively, as root."""
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from attachtest import Attach, ReadyProcess, require_attach
from ftpadtest import FTPAD_BIN, PLUGIN, TEST_SRC, run

SRC = TEST_SRC / "attach"
NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
SECRET = "root's own file\n"


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
    run(["gcc", "-O2", "-shared", "-fPIC", SRC / "swap_at_chown.c", "-o", d / "swap.so",
         "-ldl"])
    (d / "empty.c").write_text("int ftpad_hostile_empty;\n")
    run(["gcc", "-shared", "-fPIC", d / "empty.c", "-o", d / "libempty.so"])
    out = d / "out"  # root's, where the trace directories are made
    out.mkdir(mode=0o755)
    yield {"victim": d / "victim", "seccomp_thread": d / "seccomp_thread",
           "fake": d / "fake.so", "swap": d / "swap.so", "empty": d / "libempty.so",
           "out": out}
    shutil.rmtree(d)


@pytest.fixture
def secret(tmp_path):
    """A file of root's, mode 0600, that nobody else may read or change."""
    f = tmp_path / "secret"
    f.write_text(SECRET)
    f.chmod(0o600)
    return f


def assert_untouched(secret, text=SECRET):
    st = secret.lstat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o600), \
        f"{secret}: handed over: uid {st.st_uid}, gid {st.st_gid}, mode {st.st_mode:o}"
    assert secret.read_text() == text, f"{secret} was written:\n{secret.read_text()}"


def trace_tmp(out):
    """The trace directory of an attach running into out/t: at its name
    from the start (ftpad live follows it), and nothing else beside it."""
    assert [p.name for p in out.iterdir()] == ["t"]
    return out / "t"


def stop(a):
    """An attach still running killed (its test failed)."""
    if a and a.p.poll() is None:
        a.kill()


def as_nobody(script):
    run([*AS_NOBODY, "sh", "-ec", script])


@pytest.fixture
def nobody_victim(progs):
    v = ReadyProcess([*AS_NOBODY, progs["victim"]])
    yield v
    v.kill()


@pytest.fixture
def out(progs, request):
    o = progs["out"] / request.node.name
    o.mkdir(mode=0o755)
    return o


def test_summary_goes_through_no_link_the_user_put(progs, nobody_victim, out, secret):
    """While attached, the process's user replaces info by a symlink to a
    file of root's: root's summary must not go there."""
    a = Attach(nobody_victim.pid, out / "t", "--library", progs["fake"])
    try:
        a.wait_started()
        tmp = trace_tmp(out)
        assert tmp.stat().st_uid == NOBODY, "the directory was not handed over"
        as_nobody(f'rm "{tmp}/info"; ln -s "{secret}" "{tmp}/info"')
        output = a.finish(timeout=60)
    finally:
        stop(a)
    assert_untouched(secret)
    assert "info is not the file ftpad attach made" in output, output
    nobody_victim.finish()


def test_handover_follows_no_link(progs, nobody_victim, out, secret):
    """The user wins the race: the instant the directory is theirs (any
    chown of it, swap_at_chown.c), info is a symlink to a file of root's.
    Nothing root does afterwards may change that file, nor its owner."""
    env = {**os.environ, "LD_PRELOAD": str(progs["swap"]), "SWAP_TARGET": str(secret)}
    r = run([FTPAD_BIN, "attach", nobody_victim.pid, "--library", progs["fake"], "-o",
             out / "t", "--duration", "0.3"], env=env, check=False, timeout=120)
    assert "swap_at_chown: " in r.stderr, f"info was never swapped:\n{r.stderr}"
    assert_untouched(secret)
    nobody_victim.finish()


def test_summary_reads_only_the_users_regular_files(progs, nobody_victim, out, tmp_path):
    """Images the user put in place: a symlink to a file of root's, a hard
    link to one (as where fs.protected_hardlinks is 0) and a FIFO.  None is
    read: root's numbers are not summed, and the FIFO does not block."""
    numbers = tmp_path / "numbers"
    numbers.write_text("events=424242\nbytes=424242\n")
    numbers.chmod(0o600)
    a = Attach(nobody_victim.pid, out / "t", "--library", progs["fake"])
    try:
        a.wait_started()
        tmp = trace_tmp(out)
        pid = nobody_victim.pid
        as_nobody(f'mkdir "{tmp}/{pid}.5" "{tmp}/{pid}.6" "{tmp}/{pid}.7"; '
                  f'ln -s "{numbers}" "{tmp}/{pid}.5/image"; mkfifo "{tmp}/{pid}.6/image"')
        os.link(numbers, tmp / f"{pid}.7" / "image")
        output = a.finish(timeout=30)
    finally:
        stop(a)
    assert "424242" not in output, output
    assert "ftpad: 7 sites, 3 enabled, 11 events, 0 dropped, 176 bytes" in output, output
    nobody_victim.finish()


def test_force_replaces_a_trace_without_following_its_links(progs, nobody_victim, out,
                                                            tmp_path):
    """--force over a trace directory that holds a symlink to a directory
    of root's: the old trace goes, what the link leads to stays."""
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "file").write_text("kept\n")
    old = out / "t"
    (old / "1.0" / "deep").mkdir(parents=True)
    (old / "info").write_text("format=1\n")
    (old / "1.0" / "image").write_text("events=1\n")
    (old / "1.0" / "link").symlink_to(keep)
    (old / "1.0" / "deep" / "link").symlink_to(keep / "file")
    run([FTPAD_BIN, "attach", nobody_victim.pid, "--library", progs["fake"], "-o", old,
         "--force", "--duration", "0.2"], timeout=120)
    assert (keep / "file").read_text() == "kept\n"
    assert not (old / "1.0" / "link").exists() and not list(out.glob("t.old-*"))
    nobody_victim.finish()


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


def read_until(p, pattern, timeout):
    """p's output read until a line matches pattern, p ends or timeout
    passes: the output so far, and whether it matched."""
    text, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([p.stdout], [], [], deadline - time.monotonic())
        if not ready:
            break
        line = p.stdout.readline()
        if not line:
            break
        text += line
        if re.search(pattern, line):
            return text, True
    return text, False


@pytest.mark.parametrize("who", ["root", "owner"])
@pytest.mark.parametrize("where", ["program", "library"])
def test_a_fifo_at_a_mapped_path_does_not_hang(progs, out, where, who):
    """The program's file, or a library's, deleted and a FIFO put at the
    path /proc/PID/maps now gives ("X (deleted)"): attach reads the file
    as mapped (root: /proc/PID/map_files; the process's own user: the
    program through /proc/PID/exe, the library not at all), gets in, and
    Ctrl-C ends it."""
    user = AS_NOBODY if who == "owner" else []
    exe, lib = out / "victim", out / "libempty.so"
    shutil.copy2(progs["victim"], exe)
    shutil.copy2(progs["empty"], lib)
    if who == "owner":
        os.chown(out, NOBODY, NOBODY)  # where its trace goes
    v = ReadyProcess([*user, exe], env={**os.environ, "LD_PRELOAD": str(lib)})
    a = None
    try:
        mapped = exe if where == "program" else lib
        mapped.unlink()
        os.mkfifo(f"{mapped} (deleted)")
        assert f"{mapped} (deleted)" in open(f"/proc/{v.pid}/maps").read()
        a = subprocess.Popen([*user, FTPAD_BIN, "attach", str(v.pid), "--library",
                              progs["fake"], "-o", out / "t"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        text, started = read_until(a, r"attached to process|error", 30)
        a.send_signal(signal.SIGINT)
        try:
            rest, _ = a.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"attach hangs, Ctrl-C or not (started: {started}):\n{text}")
        text += rest
        assert started and a.returncode == 0, text
        assert "11 events" in text, text
        v.finish()
    finally:
        if a and a.poll() is None:
            a.kill()
            a.communicate()
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
