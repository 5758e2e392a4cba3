# SPDX-License-Identifier: MIT
"""How libftpad writes code (x86_64): nothing at load, /proc/self/mem
first, mprotect when that is refused, a clear error when both are, one
write per page and step of the int3 protocol, each step followed by
membarrier SYNC_CORE.  tests/src/runtime/textwrite.c, built with the GCC
plugin, does the work; seccomp filters refuse the syscalls."""
import os
import re
import shutil

import pytest

from ftpadtest import BUILD, FTPAD_BIN, INCLUDE, LIBFTPAD_A, LIBFTPAD_A_LIBS, TEST_SRC, run

SRC = TEST_SRC / "runtime"
LIBDIR = BUILD / "runtime"


@pytest.fixture(scope="module")
def textwrite(plugin, libftpad, tmp_path_factory):
    d = tmp_path_factory.mktemp("textwrite")
    common = ["gcc", "-O2", "-g", "-Wall", "-Wextra", "-Werror", f"-fplugin={plugin}",
              f"-I{INCLUDE}", SRC / "textwrite.c"]
    run([*common, f"-L{LIBDIR}", "-lftpad", f"-Wl,-rpath,{LIBDIR}", "-o", d / "textwrite"])
    run([*common, LIBFTPAD_A, *LIBFTPAD_A_LIBS, "-o", d / "textwrite_static"])
    # Pages the linker just wrote are dirty in the page cache, and smaps
    # counts them as Private_Dirty until they are written back.
    for exe in ("textwrite", "textwrite_static"):
        fd = os.open(d / exe, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    return d


@pytest.mark.parametrize("prog", ["textwrite", "textwrite_static"])
def test_nothing_written_at_load(textwrite, prog):
    """A program that registers nothing has no dirty page in its text
    mapping (Private_Dirty in /proc/self/smaps): libftpad wrote nothing at
    load, linked or static; the same measure sees the pages tracing wrote."""
    p = run([textwrite / prog, "idle"])
    assert re.fullmatch(r"sum=3168 dirty=0\n", p.stdout), p.stdout
    p = run([textwrite / prog, "trace"])
    m = re.fullmatch(r"sum=3168 dirty=(\d+)\n", p.stdout)
    assert m and int(m.group(1)) > 0, p.stdout


def test_nothing_written_at_load_when_preloaded(textwrite, tmp_path):
    """Preloaded by `ftpad record` with a filter that selects nothing, the
    built-in tracer starts, reads the tables, and writes no code."""
    p = run([FTPAD_BIN, "record", "--text", "-f", "nothing_matches", "-o", tmp_path / "t.txt", "--",
             textwrite / "textwrite", "idle"])
    assert re.fullmatch(r"sum=3168 dirty=0\n", p.stdout), p.stdout


def test_mprotect_when_proc_self_mem_is_refused(textwrite):
    """With pwrite64 refused (as under proc_mem.force_override=never), the
    batch goes through mprotect of the touched pages, and disabling puts
    every byte back."""
    p = run([textwrite / "textwrite", "deny-procmem"], env={**os.environ, "FTPAD_DEBUG": "1"})
    assert p.stdout == "register=0 calls=64 sum=3168\nunregister=0\n", p.stdout
    assert "ftpad: /proc/self/mem: " in p.stderr and "; using mprotect" in p.stderr


def test_clear_error_when_code_cannot_be_written(textwrite):
    """Both refused: registering fails with -EPERM and says why, nothing is
    left patched, and the functions run as before."""
    p = run([textwrite / "textwrite", "deny-both"])
    assert p.stdout == "register=-1 calls=0 sum=3168\n", p.stdout
    assert re.search(r"ftpad: error: cannot write code: /proc/self/mem: Operation not "
                     r"permitted; mprotect: Operation not permitted", p.stderr), p.stderr


def protocol_sequence(stderr):
    """The pwrite64 and membarrier calls of `strace -f` output as letters:
    w a write, r membarrier's registration, s a SYNC_CORE.  A call that
    another thread's exit interrupts in the output (`<unfinished ...>`,
    then `<... pwrite64 resumed>) = N`) is joined back first; every call
    must have succeeded."""
    calls, pending = [], {}
    for line in stderr.splitlines():
        # Keyed by the call, not the [pid N] prefix, which strace drops
        # from the resumed line once the other thread is gone; only the
        # thread that patches makes these calls.
        body = re.sub(r"^\[pid +\d+\] ", "", line)
        unfinished = re.match(r"(pwrite64|membarrier)\(.* <unfinished \.\.\.>$", body)
        if unfinished:
            pending[unfinished.group(1)] = body[:-len(" <unfinished ...>")]
            continue
        resumed = re.match(r"<\.\.\. (pwrite64|membarrier) resumed>(.*)", body)
        if resumed:
            body = pending.pop(resumed.group(1)) + resumed.group(2)
        m = re.match(r"(pwrite64|membarrier)\((.*)\) += (-?\d+)", body)
        if m:
            assert int(m.group(3)) >= 0, line
            calls.append((m.group(1), m.group(2)))
    assert not pending, pending
    return "".join("w" if c == "pwrite64" else
                   "r" if "REGISTER_PRIVATE_EXPEDITED_SYNC_CORE" in a else
                   "s" if "PRIVATE_EXPEDITED_SYNC_CORE" in a else "?" for c, a in calls)


def test_int3_protocol_batched_with_membarrier(textwrite):
    """strace shows the protocol: after the stub page, registering is three
    rounds of writes (int3 with the ops slots; the other four bytes; the
    first byte), one pwrite per run of pages with sites, not per site, each
    round followed by membarrier SYNC_CORE; unregistering is three more,
    with a grace period's membarrier after the first round's sync, so that
    the second round also puts the slots back (no fourth round)."""
    if shutil.which("strace") is None:
        pytest.fail("strace is not installed: scripts/install-deps.sh installs it")
    p = run(["strace", "-f", "-e", "trace=pwrite64,membarrier", "-e", "signal=none",
             textwrite / "textwrite", "toggle"])
    assert p.stdout == "register=0\nunregister=0\n"
    # The 64 functions fill 2 or 3 pages: each round writes each once.
    seq = protocol_sequence(p.stderr)
    # The stub page is one write; membarrier registers at the first sync.
    m = re.fullmatch(r"w(w+)rs(w+)s(w+)s(w+)ss(w+)s(w+)s", seq)
    assert m, seq
    step1, step2, step3, off1, off2, off3 = (len(g) for g in m.groups())
    assert 1 <= step1 == step2 == step3 == off1 == off2 == off3 <= 3, seq


def test_slots_wait_for_a_callback_still_running(textwrite):
    """Unregistering while another thread sleeps inside the callback: the
    grace period after the first round cannot end quickly, so the slots
    are not written with the second round but after the full grace
    period (its membarrier, then one more each time the waiter arms its
    futex: grace.c), in a write of their own, and every pad is as before."""
    p = run(["strace", "-f", "-e", "trace=pwrite64,membarrier", "-e", "signal=none",
             textwrite / "textwrite", "toggle-busy"])
    assert p.stdout == "register=0\nunregister=0\n", p.stdout
    seq = protocol_sequence(p.stderr)
    m = re.fullmatch(r"w(w+)rs(w+)s(w+)s(w+)ss(w+)s(w+)sss*(w+)", seq)
    assert m, seq
    assert len(set(len(g) for g in m.groups()[:6])) == 1 and len(m.group(7)) <= len(m.group(1))
