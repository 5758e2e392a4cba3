# SPDX-License-Identifier: MIT
"""libftpad in a hostile environment: a program that closes every
descriptor (closefrom) and opens files of its own, a fork from a signal
handler inside a register, a SIGTRAP handler of the program's own behind
libftpad's, a program that mprotects its own text, and no /proc."""
import os
import subprocess

import pytest

from ftpadtest import A64_PLUGIN, BUILD, INCLUDE, TEST_SRC, require_cross, run

SRC = TEST_SRC / "runtime"
LIBDIR = BUILD / "runtime"


@pytest.fixture(scope="module")
def progs(plugin, libftpad, tmp_path_factory):
    """Each tests/src/runtime/env_*.c, padded and linked with libftpad.so."""
    d = tmp_path_factory.mktemp("env")
    for src in sorted(SRC.glob("env_*.c")):
        run(["gcc", "-O2", "-g", "-Wall", "-Wextra", "-Werror", f"-fplugin={plugin}",
             f"-I{INCLUDE}", f"-I{SRC}", src, f"-L{LIBDIR}", "-lftpad", f"-Wl,-rpath,{LIBDIR}",
             "-pthread", "-o", d / src.stem])
    return d


def test_closefrom_then_register_writes_code_not_the_file(progs):
    # The cached /proc/self/mem number now holds the program's file: the
    # register must patch the code (a call is seen), not write the file.
    p = run([progs / "env_closefrom", "register", "-"])
    assert p.stdout == "calls=1 size=10 data=user data\n"


def test_forked_child_keeps_its_log(progs, tmp_path):
    # In a child, the parent's /proc/self/mem number is the child's log
    # after closefrom: it must stay the log, and the child's code patched.
    log = tmp_path / "child.log"
    p = run([progs / "env_closefrom", "fork", log])
    assert p.stdout == "child status=0\n"
    assert log.read_text() == "child log: calls=1\n"


def test_tracer_output_after_closefrom(progs, tmp_path):
    # FTPAD_OUTPUT's number now holds the program's file: the trace line
    # goes to FTPAD_OUTPUT, opened again, never into the program's file.
    user, trace = tmp_path / "user.txt", tmp_path / "trace.txt"
    env = dict(os.environ, FTPAD_FILTER="traced", FTPAD_OUTPUT=str(trace))
    run([progs / "env_closefrom", "trace", user], env=env)
    assert user.read_bytes() == b"user data\n"
    lines = trace.read_text().splitlines()
    assert any(" traced <-" in line for line in lines), lines
    assert lines[-1].startswith("ftpad: ") and lines[-1].endswith(" 1 calls seen"), lines


def test_fork_in_signal_handler_inside_register(progs):
    # A timer's handler forks while its thread is inside register or
    # unregister, holding libftpad's lock: neither process may hang, and the
    # child's code must be whole.  The work is fixed by counts (200 forks,
    # 3000 rounds at least): about 3 s, 5 s at a load of 13 on 2 cores; the
    # timeout only guards against a hang.
    try:
        p = run([progs / "env_forksig"], timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("no end in 300 s: deadlock from a fork in a signal handler inside "
                    "register/unregister")
    fields = dict(kv.split("=") for kv in p.stdout.split())
    assert fields["children_failed"] == "0", p.stdout
    assert fields["forks"] == "200", p.stdout
    assert int(fields["rounds"]) >= 3000 and fields["calls"] == fields["rounds"], p.stdout


def test_chained_sigtrap_handler_gets_the_threads_mask(progs):
    # The program's SIGTRAP handler behind libftpad's runs with the thread's
    # mask plus its own sa_mask and SIGTRAP, exactly as without libftpad:
    # the SIGUSR1 the thread blocks, pending, does not come inside it.
    p = run([progs / "env_sigmask"])
    assert p.stdout.splitlines() == [
        "before raise: ok", "before int3: ok", "after raise: ok", "after int3: ok",
        "calls=1"]


def without_proc(cmd):
    """cmd in a mount namespace where /proc is unmounted (needs root, or a
    user namespace allowed to unmount it: else the test is skipped)."""
    for unshare in (["unshare", "-m"], ["unshare", "-rm"]):
        probe = subprocess.run(unshare + ["sh", "-c", "umount -l /proc && ! test -e /proc/self"],
                               capture_output=True)
        if probe.returncode == 0:
            return unshare + ["sh", "-c", 'umount -l /proc && exec "$@"', "sh"] + cmd
    pytest.skip("cannot unmount /proc in a mount namespace here")


def test_without_proc_the_program_is_found(progs):
    # No /proc/self/exe: the program is read from the path it was started
    # by (AT_EXECFN), and its own site is patched.
    p = run(without_proc([progs / "env_noproc"]))
    assert p.stdout == "proc=absent register=0 calls=1\n"
    assert "warning" not in p.stderr


def test_without_proc_a_lost_program_is_reported(progs):
    # Started by a relative path, then chdir("/"): the program's file cannot
    # be found.  The register still succeeds for the other modules, but a
    # warning says the program's own sites are not patched.
    p = run(without_proc(["./env_noproc", "chdir"]), cwd=progs)
    assert p.stdout == "proc=absent register=0 calls=0\n"
    assert "cannot read the program's file" in p.stderr, p.stderr
    assert "its own sites are not patched" in p.stderr, p.stderr


def test_mprotect_restores_the_pages_own_protection(progs):
    # Code written by mprotect goes back to the protection the page had
    # (here RWX, set by the program), not to its ELF segment's (R-X); the
    # page next to it, left R-X, stays so.
    env = dict(os.environ, FTPAD_TEXT_WRITE="mprotect")
    p = run([progs / "env_mprotect"], env=env)
    assert p.stdout.splitlines() == [
        "registered: rwxp r-xp calls=2", "unregistered: rwxp r-xp calls=2"]


# The same on aarch64, under qemu-aarch64, where the code is shared: the
# program linked statically with the aarch64 libftpad.a.
A64_CC = "aarch64-linux-gnu-gcc-12"
A64_LIBFTPAD = BUILD / "runtime" / "aarch64" / "libftpad.a"


@pytest.fixture(scope="module")
def a64_progs(tmp_path_factory):
    require_cross(A64_CC, (A64_PLUGIN, A64_LIBFTPAD))
    d = tmp_path_factory.mktemp("env_a64")
    # Not env_noproc: qemu-user answers /proc/self/exe itself.  Not
    # env_mprotect: under qemu, aarch64.c cycles the protection of every page
    # written through /proc/self/mem to make qemu see it.
    run([A64_CC, "-O2", "-Wall", "-Wextra", "-Werror", f"-fplugin={A64_PLUGIN}", f"-I{INCLUDE}",
         SRC / "env_closefrom.c", "-static", A64_LIBFTPAD, "-o", d / "env_closefrom"])
    return d


def test_aarch64_closefrom_then_register(a64_progs):
    p = run(["qemu-aarch64", a64_progs / "env_closefrom", "register", "-"])
    assert p.stdout == "calls=1 size=10 data=user data\n"

