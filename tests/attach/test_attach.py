# SPDX-License-Identifier: MIT
"""`ftpad attach PID`, its mechanics (cli/attach*.c, the loader
stub of cli/arch/attach_stub_x86_64.S): a real padded program
(tests/src/attach/victim.c, built with the GCC plugin, exit=1, not linked
with libftpad) is attached to while its threads run a hot loop, block in
read() on a pipe and sleep in nanosleep(), and checks its own calls'
results.  The text of every module mapped before is read through
/proc/PID/mem before and after.  Each refusal leaves the process running
and untouched, and a SIGKILL of the tool at any point never leaves it
stopped.  The library loaded is a stand-in (tests/src/attach/
fake_libftpad.c, `--library`) that answers per docs/design.md's contract,
so these tests hold whatever the recorder does; the test with the real
libftpad reads the trace back.  x86_64, natively, as root (ptrace)."""
import errno
import os
import platform
import random
import re
import signal
import subprocess
import time

import pytest
from elftools.elf.elffile import ELFFile

from attachtest import ReadyProcess
from ftpadtest import FTPAD_BIN, LIBFTPAD_SO, PLUGIN, TEST_SRC, run

SRC = TEST_SRC / "attach"

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="ftpad attach is x86_64 only so far")


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    d = tmp_path_factory.mktemp("attach")
    victim, fake, seccomp = d / "victim", d / "fake_libftpad.so", d / "seccomp_run"
    run(["gcc", "-O2", "-g", f"-fplugin={PLUGIN}", "-fplugin-arg-ftpad-exit=1", "-pthread",
         SRC / "victim.c", "-o", victim])
    run(["gcc", "-O2", "-shared", "-fPIC", "-pthread", SRC / "fake_libftpad.c", "-o", fake])
    run(["gcc", "-O2", SRC / "seccomp_run.c", "-o", seccomp])
    run(["gcc", "-O2", SRC / "exe_as_32bit.c", "-o", d / "exe_as_32bit"])
    return {"dir": d, "victim": victim, "fake": fake, "seccomp": seccomp,
            "exe_as_32bit": d / "exe_as_32bit"}


class Victim(ReadyProcess):
    """victim.c running; its stdin's end of file ends it."""

    def maps(self):
        out = []
        for line in open(f"/proc/{self.pid}/maps"):
            f = line.split()
            start, end = (int(x, 16) for x in f[0].split("-"))
            out.append((start, end, f[1], f[5] if len(f) > 5 else ""))
        return out

    def text(self):
        """Every r-x mapping's bytes, by (start, path)."""
        out = {}
        with open(f"/proc/{self.pid}/mem", "rb") as mem:
            for start, end, perms, path in self.maps():
                if perms.startswith("r-x") and path != "[vsyscall]":
                    mem.seek(start)
                    out[(start, path)] = mem.read(end - start)
        return out


@pytest.fixture
def victim(progs):
    v = Victim([progs["victim"]])
    yield v
    v.kill()


def attach(pid, *args, lib=None, check=True, **kw):
    cmd = [FTPAD_BIN, "attach", str(pid), *args]
    if lib:
        cmd += ["--library", lib]
    return run(cmd, check=check, **kw)


def same_text(before, after, allow_slack=()):
    """Every module mapped before has the same text after; new mappings
    (the library loaded) are allowed.  allow_slack: (start, end) ranges of
    slack bytes a killed tool may have left its stub in."""
    for key, data in before.items():
        assert key in after, f"{key} no longer mapped"
        new = after[key]
        if new == data:
            continue
        diff = [key[0] + i for i in range(len(data)) if data[i] != new[i]]
        assert all(any(a <= d < b for a, b in allow_slack) for d in diff), \
            f"{key[1]}: {len(diff)} bytes changed, the first at {diff[0]:#x}"


@pytest.mark.parametrize("mode", ["hot", "blocked", "sleep"])
def test_attach_leaves_text_and_threads_as_they_were(progs, tmp_path, mode):
    """Attach and detach twice with the stand-in library: the control
    exchange ends in one summary line, info names the process, the text is
    byte for byte the same, and the threads blocked in read() and
    nanosleep() saw no EINTR nor a short sleep (the program checks, and
    exits 0).  The stub runs on the hot loop (its SSE register must come
    back), on a thread blocked in read() (-ERESTARTSYS: the call made
    again), or on the only thread, in nanosleep (restart_syscall)."""
    victim = Victim([progs["victim"], mode])
    try:
        attach_twice(progs, victim, tmp_path)
    finally:
        victim.kill()


def attach_twice(progs, victim, tmp_path):
    before = victim.text()
    for n in range(2):
        out = tmp_path / f"t{n}"
        p = attach(victim.pid, "-o", out, "--duration", "0.3", lib=progs["fake"])
        assert f"attached to process {victim.pid}: 7 sites, 3 enabled" in p.stderr
        assert f"ftpad: 7 sites, 3 enabled, 11 events, 0 dropped, 176 bytes in {out}" \
            in p.stderr
        info = (out / "info").read_text().splitlines()
        assert info[0] == "format=2" and info[2] == f"attach={victim.pid}"
        assert info[1].startswith(f"command='{progs['victim']}'")
        assert not list(tmp_path.glob("*.tmp-*"))
        same_text(before, victim.text())
    assert sum(path == str(progs["fake"]) for _, _, _, path in victim.maps()) >= 1
    assert victim.state() not in "tT"
    victim.finish()


def test_record_dash_p_is_attach(progs, victim, tmp_path):
    p = run([FTPAD_BIN, "record", "-p", victim.pid, "--library", progs["fake"], "-o",
             tmp_path / "t", "--duration", "0.2"])
    assert "11 events" in p.stderr
    victim.finish()


def test_sigterm_detaches(progs, victim, tmp_path):
    """No --duration: SIGTERM (as Ctrl-C) stops the session cleanly."""
    p = subprocess.Popen([str(FTPAD_BIN), "attach", str(victim.pid), "--library",
                          str(progs["fake"]), "-o", str(tmp_path / "t")],
                         stderr=subprocess.PIPE, text=True)
    err = ""
    while "attached to" not in err:
        err += p.stderr.readline()
        assert p.poll() is None or "attached" in err, err
    p.send_signal(signal.SIGTERM)
    err += p.stderr.read()
    assert p.wait(timeout=60) == 0, err
    assert "11 events" in err
    victim.finish()


def has_attach_start(lib):
    with open(lib, "rb") as f:
        syms = ELFFile(f).get_section_by_name(".dynsym")
        return bool(syms.get_symbol_by_name("ftpad_attach_start"))


def test_attach_with_libftpad_records(progs, victim, tmp_path):
    """The real libftpad: events of the padded functions, read by
    `ftpad replay`; a second attach reuses the copy already mapped."""
    if not has_attach_start(LIBFTPAD_SO):
        pytest.skip("libftpad.so has no ftpad_attach_start yet (helper attach-lib's part)")
    before = victim.text()
    for n in range(2):
        out = tmp_path / f"t{n}"
        p = attach(victim.pid, "-o", out, "--duration", "0.3", "--graph", "-F", "victim_*")
        events = int(re.search(r"(\d+) events", p.stderr).group(1))
        assert events > 0, p.stderr
        replay = run([FTPAD_BIN, "replay", out]).stdout
        assert "victim_work()" in replay or "victim_work() {" in replay, replay[:2000]
        assert "[signal SIGTRAP]" not in replay  # the patching's own traps
        same_text(before, victim.text())
    assert sum(os.path.realpath(path) == os.path.realpath(LIBFTPAD_SO)
               for _, _, perms, path in victim.maps() if "x" in perms) == 1
    victim.finish()


def assert_untouched(v, before, p, message):
    assert p.returncode != 0
    assert message in p.stderr, p.stderr
    assert f"process {v.pid}" in p.stderr
    assert v.state() not in "tT"
    assert v.text() == before


def test_refuses_a_process_without_sites(tmp_path):
    p = subprocess.Popen(["sleep", "60"])
    try:
        r = attach(p.pid, "-o", tmp_path / "t", check=False)
        assert r.returncode == 1 and "none of its modules has ftpad sites" in r.stderr
        assert not list(tmp_path.iterdir())
    finally:
        p.kill()
        p.wait()


def test_refuses_a_process_already_traced(progs, tmp_path):
    v = Victim(["strace", "-qq", "-e", "trace=none", progs["victim"]])
    try:
        before = v.text()
        r = attach(v.pid, "-o", tmp_path / "t", lib=progs["fake"], check=False)
        tracer = int(re.search(r"TracerPid:\s+(\d+)", open(f"/proc/{v.pid}/status").read())[1])
        assert_untouched(v, before, r, f"already traced by process {tracer}")
        v.finish()
    finally:
        v.kill()


def test_refuses_seccomp(progs, tmp_path):
    v = Victim([progs["seccomp"], progs["victim"]])
    try:
        assert "Seccomp:\t2" in open(f"/proc/{v.pid}/status").read()
        before = v.text()
        r = attach(v.pid, "-o", tmp_path / "t", lib=progs["fake"], check=False)
        assert_untouched(v, before, r, "runs under seccomp (Seccomp: 2")
        v.finish()
    finally:
        v.kill()


def test_refuses_another_user(progs, victim, tmp_path):
    """Not root, not the process's user: EPERM, said with the reason."""
    before = victim.text()
    r = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", FTPAD_BIN,
             "attach", victim.pid, "-o", tmp_path / "t"], check=False)
    assert_untouched(victim, before, r, "permission denied: ptrace needs the process's own "
                     "user (uid 0; this is uid 65534) or CAP_SYS_PTRACE")
    victim.finish()


@pytest.fixture(scope="module")
def pause32(tmp_path_factory):
    """tests/src/attach/pause32.c, a static i686 program."""
    cc = "i686-linux-gnu-gcc"
    if run(["which", cc], check=False).returncode:
        pytest.skip(f"{cc} is not installed")
    exe = tmp_path_factory.mktemp("pause32") / "pause32"
    run([cc, "-O2", "-nostdlib", "-static", "-fno-pie", "-no-pie", SRC / "pause32.c", "-o", exe])
    return exe


def start_32_bit(exe):
    """EXE started, or the test skipped when this kernel cannot run 32-bit
    x86 programs (IA32 emulation off, e.g. ia32_emulation=0, or not built
    in): execve then fails with ENOEXEC."""
    try:
        return subprocess.Popen([exe])
    except OSError as e:
        if e.errno != errno.ENOEXEC:
            raise
        cmdline = [a for a in open("/proc/cmdline").read().split() if a.startswith("ia32_")]
        pytest.skip(f"this kernel ({platform.release()}) cannot run 32-bit x86 programs: "
                    f"execve of a static i686 program: {e.strerror}"
                    + (f" (kernel command line: {' '.join(cmdline)})" if cmdline else ""))


def assert_refused_as_32_bit(p, tmp_path):
    """ftpad attach refuses P, a 32-bit process for /proc/P/exe, and leaves
    it running; P is killed after."""
    try:
        r = attach(p.pid, "-o", tmp_path / "t", check=False)
        assert r.returncode == 1 and "it is a 32-bit process" in r.stderr, r.stderr
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()


def test_refuses_a_32_bit_process(pause32, tmp_path):
    assert_refused_as_32_bit(start_32_bit(pause32), tmp_path)


def test_refuses_a_process_whose_program_is_32_bit(progs, pause32, tmp_path):
    """The same refusal without running a 32-bit program, which this kernel
    may not do: a 64-bit process (exe_as_32bit.c) makes pause32 its
    /proc/PID/exe, where ftpad reads the process's ELF class."""
    p = subprocess.Popen([progs["exe_as_32bit"], pause32], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if p.stdout.readline() != "ready\n":
        rc = p.wait()
        if rc in (errno.EPERM, errno.EINVAL):
            pytest.skip("prctl(PR_SET_MM, PR_SET_MM_MAP) with an exe file failed: "
                        f"{os.strerror(rc)} (it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE "
                        "and a kernel built with CONFIG_CHECKPOINT_RESTORE)")
        pytest.fail(f"exe_as_32bit failed: exit {rc}: {p.stderr.read()}")
    assert os.readlink(f"/proc/{p.pid}/exe") == str(pause32)
    assert_refused_as_32_bit(p, tmp_path)


def test_refuses_zombies_and_missing_processes(tmp_path):
    p = subprocess.Popen(["true"])
    while open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.01)
    r = attach(p.pid, "-o", tmp_path / "t", check=False)
    assert r.returncode == 1 and f"process {p.pid}: it is a zombie" in r.stderr, r.stderr
    p.wait()
    r = attach(p.pid, "-o", tmp_path / "t", check=False)
    assert r.returncode == 1 and f"process {p.pid}: no such process" in r.stderr, r.stderr


def test_refuses_a_second_session(progs, victim, tmp_path):
    """While one attach runs, a second is told the process already records
    (-EBUSY from ftpad_attach_start), and the first goes on."""
    first = subprocess.Popen([str(FTPAD_BIN), "attach", str(victim.pid), "--library",
                              str(progs["fake"]), "-o", str(tmp_path / "a"), "--duration", "3"],
                             stderr=subprocess.PIPE, text=True)
    assert "attached to" in first.stderr.readline()
    r = attach(victim.pid, "-o", tmp_path / "b", lib=progs["fake"], check=False)
    assert r.returncode == 1 and "it is already recording" in r.stderr, r.stderr
    assert not (tmp_path / "b").exists() and not list(tmp_path.glob("b.tmp-*"))
    assert first.wait(timeout=60) == 0 and "11 events" in first.stderr.read()
    victim.finish()


def test_process_exit_ends_the_session(progs, victim, tmp_path):
    """No --duration: the process's own exit ends the session (end of file
    on the socket); the trace is installed and the tool exits 0."""
    p = subprocess.Popen([str(FTPAD_BIN), "attach", str(victim.pid), "--library",
                          str(progs["fake"]), "-o", str(tmp_path / "t")],
                         stderr=subprocess.PIPE, text=True)
    assert "attached to" in p.stderr.readline()
    victim.finish()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 0, err
    assert f"in {tmp_path / 't'}" in err and (tmp_path / "t" / "info").exists()


def test_refuses_a_process_under_ftpad_record(progs, tmp_path):
    """libftpad already records (FTPAD_RECORD at start-up): -EBUSY."""
    if not has_attach_start(LIBFTPAD_SO):
        pytest.skip("libftpad.so has no ftpad_attach_start yet (helper attach-lib's part)")
    v = Victim([FTPAD_BIN, "record", "-o", tmp_path / "rec", "--", progs["victim"]])
    try:
        before = v.text()
        r = attach(v.pid, "-o", tmp_path / "t", check=False)
        assert_untouched(v, before, r, "it is already recording")
        v.finish()
    finally:
        v.kill()


def test_reports_libftpad_refusing_to_start(progs, victim, tmp_path):
    """The control thread's "error ERRNO MESSAGE" is said, no trace is left."""
    r = attach(victim.pid, "-F", "fail", "-o", tmp_path / "t", lib=progs["fake"], check=False)
    assert r.returncode == 1
    assert f"process {victim.pid}: libftpad cannot record: no function matches 'fail' " \
           "(Invalid argument)" in r.stderr, r.stderr
    assert not list(tmp_path.iterdir())
    victim.finish()


def test_reports_a_library_that_does_not_load(progs, victim, tmp_path):
    """dlopen's own error text comes back from inside the process."""
    bad = tmp_path / "notalib.so"
    bad.write_text("not an ELF file\n")
    before = victim.text()
    r = attach(victim.pid, "-o", tmp_path / "t", lib=bad, check=False)
    assert r.returncode == 1
    assert re.search(r"dlopen of .*notalib.so failed: .*notalib.so: (invalid ELF header|file "
                     r"too short)", r.stderr), r.stderr
    assert victim.text() == before
    victim.finish()


def exe_slack(v):
    """The ranges the stub may borrow: past each executable segment's file
    size, to the end of its page, in the program."""
    exe = os.readlink(f"/proc/{v.pid}/exe")
    base = min(s for s, _, _, path in v.maps() if path == exe)
    out = []
    with open(exe, "rb") as f:
        for seg in ELFFile(f).iter_segments():
            if seg["p_type"] == "PT_LOAD" and seg["p_flags"] & 1:
                end = base + seg["p_vaddr"] + seg["p_filesz"]
                out.append((end, (end + 4095) & ~4095))
    return out


def thread_states(pid):
    out = set()
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            out.add(open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just ended
    return out


def tracer(pid):
    return int(re.search(r"TracerPid:\s+(\d+)", open(f"/proc/{pid}/status").read())[1])


@pytest.mark.parametrize("real", [False, True], ids=["stand-in", "libftpad"])
def test_sigkill_at_any_point_leaves_the_process_running(progs, victim, tmp_path, real):
    """`ftpad attach` killed at random points of a whole attach, getting in
    included: the process is never left stopped, keeps running and passes
    its own checks.  Its text is the same except the library now mapped:
    the stub's slack bytes too, once the tool's guardian has put them back
    (it does what the killed tool would have done with the stub)."""
    if real and not has_attach_start(LIBFTPAD_SO):
        pytest.skip("libftpad.so has no ftpad_attach_start yet (helper attach-lib's part)")
    lib = LIBFTPAD_SO if real else progs["fake"]
    before = victim.text()
    t0 = time.monotonic()
    attach(victim.pid, "-o", tmp_path / "full", "--duration", "0.1", lib=lib)
    full = time.monotonic() - t0
    rng = random.Random(15)
    slack = exe_slack(victim)
    for n in range(30):
        p = subprocess.Popen([str(FTPAD_BIN), "attach", str(victim.pid), "--library",
                              str(lib), "-o", str(tmp_path / f"k{n}"), "--duration",
                              "0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0, full))
        p.kill()
        p.wait()
        assert victim.p.poll() is None, \
            f"run {n}: the process ended: {victim.p.returncode} {victim.p.stderr.read()}"
        # A stopped thread is let go when its tracer dies; the guardian
        # seizes the stub's thread for a moment only.
        for _ in range(500):
            after = victim.text()
            if not thread_states(victim.pid) & {"t", "T"} and not tracer(victim.pid) \
                    and all(after.get(k) == v for k, v in before.items()):
                break
            time.sleep(0.01)
        assert not thread_states(victim.pid) & {"t", "T"}, f"run {n}: threads left stopped"
        assert not tracer(victim.pid), f"run {n}: still traced"
        same_text(before, victim.text(), allow_slack=slack)
        same_text(before, victim.text())
    attach(victim.pid, "-o", tmp_path / "after", "--duration", "0.1", lib=lib)
    same_text(before, victim.text())
    victim.finish()


@pytest.mark.parametrize("args, message", [
    (["-F", "a,b"], "attach: option '-F' takes one glob, not empty nor with ','"),
    (["-N", ""], "attach: option '-N' takes one glob, not empty nor with ','"),
    (["-o", ""], "attach: option '-o' needs a directory name"),
    (["--size", "0"], "attach: --size takes a number of MB >= 1, not '0'"),
])
def test_bad_options_name_attach(args, message):
    # The options attach shares with record are refused in attach's name,
    # before any process is looked at.
    r = run([FTPAD_BIN, "attach", "1", *args], check=False)
    assert r.returncode == 2 and f"ftpad: error: {message}\n" in r.stderr, r.stderr
