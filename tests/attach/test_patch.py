# SPDX-License-Identifier: MIT
"""`ftpad patch`, on x86_64 natively (aarch64: ftpad_patch_apply() from
the program under qemu-aarch64, the last test): tests/src/patch/server.c, whose hot threads call a
global and a static padded function and check every result is the old
code's or a patch's, while other threads block in system calls.

- Patch and revert many times (FTPAD_PATCH_CYCLES, default 100: the
  machine running the suite is shared; the issue aims at 1,000): once
  `ftpad patch` returns, no call that starts gets the old result, once the
  revert returns none gets the new one; at the end the text is byte for
  byte as before (read through /proc/PID/mem) and the program exits 0.
- A second patch of a function goes over the first, reverting it brings
  the first back, reverting the first keeps it on top; applying a patch
  twice is refused; --list lists.
- Refusals, each leaving the text as it was: a thread blocked in a
  system call made from the function, a missing symbol, an unpadded
  function, a patch file writable by others.
- A pad is a tracer's or a patch's: patching a traced function is refused,
  and a tracer started on a patched one leaves it alone."""
import os

import pytest

from attachtest import Attach, assert_text_unchanged, exec_ranges, text_snapshot
from ftpadtest import A64_PLUGIN, BUILD, INCLUDE, LIBFTPAD_SO, PLUGIN, require_cross, run
from patchtest import SRC, Server, build_server, patch

A64_CC = "aarch64-linux-gnu-gcc-12"
A64_LIBDIR = BUILD / "runtime" / "aarch64"
CYCLES = int(os.environ.get("FTPAD_PATCH_CYCLES", "100"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_server(tmp_path_factory)


@pytest.fixture
def server(built):
    s = Server(built / "server")
    yield s
    s.kill()


@pytest.mark.parametrize("mode", ["int3", "block", "immediate"])
def test_patch_and_revert_cycles(built, mode):
    """block: the hot threads block every signal, SIGTRAP too: the pads
    are written without int3, by single stores (the guarded protocol).
    immediate: --immediate, the hot threads run through the switch, and
    those that reach a pad mid-write trap and are sent on (the batch's
    table); a patch reverted so stays loaded, its stubs mapped."""
    server = Server(built / "server", *([mode] if mode == "block" else []))
    try:
        # immediate: a quarter of the cycles (about 5 s), its switch being
        # the same batch as the others'.
        if mode == "immediate":
            cycles(built, server, ["--immediate"], max(CYCLES // 4, 1))
        else:
            cycles(built, server, [], CYCLES)
    finally:
        server.kill()


def cycles(built, server, how, count):
    before = text_snapshot(server.pid)
    patch(server.pid, "--list")  # libftpad in: its own mappings are there from now on
    mapped = exec_ranges(server.pid)
    server.expect("old")
    for _ in range(count):
        server.expect("any")
        patch(server.pid, *how, built / "patch1.so")
        server.expect("new")
        server.expect("any")
        patch(server.pid, *how, "--revert", built / "patch1.so")
        server.expect("old")
    assert_text_unchanged(server.pid, before)
    if not how:
        # The stubs' page (a PIE is out of a jmp's reach of the patch) is gone.
        assert exec_ranges(server.pid) == mapped
    out = server.quit()
    assert " bad 0 " in out
    # FTPAD_SYMBOL reached the target's static variable.
    assert int(out.split("patched ")[1]) > 0


def test_layers_twice_and_list(built, server):
    before = text_snapshot(server.pid)
    patch(server.pid, built / "patch1.so")
    server.expect("new")
    again = patch(server.pid, built / "patch1.so", check=False)
    assert again.returncode == 1 and "already applied" in again.stderr
    server.expect("any")
    patch(server.pid, built / "patch2.so")
    server.expect("new2")
    listed = patch(server.pid, "--list").stdout.splitlines()
    assert [l.split()[0] for l in listed] == [str(built / "patch2.so"), str(built / "patch1.so")]
    server.expect("any")
    patch(server.pid, "--revert", built / "patch2.so")
    server.expect("new")
    server.expect("any")
    patch(server.pid, "--revert", built / "patch1.so")
    server.expect("old")
    assert patch(server.pid, "--list").stdout == ""
    # The lower one reverted first: the upper one stays on top.
    server.expect("any")
    patch(server.pid, built / "patch1.so")
    patch(server.pid, built / "patch2.so")
    server.expect("new2")
    server.expect("any")
    patch(server.pid, "--revert", built / "patch1.so")
    server.expect("new2old")
    server.expect("any")
    patch(server.pid, "--revert", built / "patch2.so")
    server.expect("old")
    assert_text_unchanged(server.pid, before)
    assert " bad 0 " in server.quit()


@pytest.mark.parametrize("name, why", [
    ("blocked", "blocked_in_read is running on thread"),
    ("missing", "no symbol no_such_symbol"),
    ("unpadded", "function unpadded_compute has no pad"),
    ("writable", "writable by others"),
])
def test_refusals_leave_the_process_untouched(built, server, tmp_path, name, why):
    before = text_snapshot(server.pid)
    server.expect("old")
    so = built / f"{name}.so"
    if name == "writable":
        so = tmp_path / "writable.so"
        so.write_bytes((built / "patch1.so").read_bytes())
        os.chmod(tmp_path, 0o755)
        os.chmod(so, 0o666)
    p = patch(server.pid, so, check=False)
    assert p.returncode == 1 and why in p.stderr, p.stderr
    assert patch(server.pid, "--list").stdout == ""
    assert_text_unchanged(server.pid, before)
    assert " bad 0 " in server.quit()


def test_immediate_switches_under_a_blocked_thread(built, server):
    """--immediate skips the stack check: the blocked thread returns into
    the old code's frame, which is fine for this function."""
    before = text_snapshot(server.pid)
    patch(server.pid, "--immediate", built / "blocked.so")
    patch(server.pid, "--immediate", "--revert", built / "blocked.so")
    assert_text_unchanged(server.pid, before)
    assert " bad 0 " in server.quit()


def test_a_pad_is_a_tracers_or_a_patchs(built, server, tmp_path):
    before = text_snapshot(server.pid)
    tracer = Attach(server.pid, tmp_path / "t.data", "-F", "global_compute").wait_started()
    assert ", 1 enabled" in tracer.output, tracer.output
    try:
        p = patch(server.pid, built / "patch1.so", check=False)
        assert p.returncode == 1 and "global_compute is traced" in p.stderr, p.stderr
    finally:
        tracer.finish()
    server.expect("any")
    patch(server.pid, built / "patch1.so")
    server.expect("new")
    tracer = Attach(server.pid, tmp_path / "u.data", "-F", "global_compute").wait_started()
    server.expect("new")  # the tracer did not take the pad back
    assert ", 0 enabled" in tracer.output, tracer.output
    tracer.finish()
    server.expect("any")
    patch(server.pid, "--revert", built / "patch1.so")
    server.expect("old")
    assert_text_unchanged(server.pid, before)
    assert " bad 0 " in server.quit()


def test_apply_and_revert_from_the_program(built):
    """ftpad_patch_apply()/_revert() (ftpad.h), without the tool: on the
    program's functions (a stub: a PIE lies beyond a jmp's reach of a
    dlopened patch) and on a shared library's (a direct jmp)."""
    exe = built / "self"
    run(["gcc", "-O2", "-Wall", "-Werror", f"-fplugin={PLUGIN}", "-shared", "-fPIC",
         "-o", built / "libtarget.so", SRC / "lib.c"])
    run(["gcc", "-O2", "-Wall", "-Werror", "-shared", "-fPIC", f"-I{INCLUDE}",
         "-o", built / "libpatch.so", SRC / "libpatch.c"])
    run(["gcc", "-O2", "-Wall", "-Werror", f"-fplugin={PLUGIN}", f"-I{INCLUDE}", "-o", exe,
         SRC / "self.c", f"-L{built}", "-ltarget", f"-L{LIBFTPAD_SO.parent}", "-lftpad",
         f"-Wl,-rpath,{LIBFTPAD_SO.parent}:{built}"])
    assert run([exe, built / "patch1.so", built / "libpatch.so"]).stdout == "ok\n"


@pytest.mark.parametrize("pie", [["-pie"], ["-no-pie"]], ids=["pie", "no-pie"])
@pytest.mark.parametrize("bp", [[], ["-mbranch-protection=standard"]], ids=["plain", "bti"])
def test_apply_and_revert_from_the_program_aarch64(tmp_path, bp, pie):
    """aarch64's pads, from the program itself under qemu-aarch64 (the
    tool's stack check needs ptrace, which qemu-user has not: `ftpad patch`
    itself is x86_64's): `b new` where the patch is within 128 MiB (a PIE
    under qemu-aarch64), else `b` to a `ldr x16; br x16` stub (a program
    at 0x400000); with BTI the stub's `br x16` lands on the new function's
    `bti c`."""
    require_cross(A64_CC, (A64_PLUGIN, A64_LIBDIR / "libftpad.so"))
    exe, fix = tmp_path / "apply", tmp_path / "patch1.so"
    run([A64_CC, "-O2", "-Wall", "-Werror", *bp, *pie, f"-fplugin={A64_PLUGIN}", f"-I{INCLUDE}",
         "-o", exe, SRC / "apply.c", f"-L{A64_LIBDIR}", "-lftpad",
         f"-Wl,-rpath,{A64_LIBDIR}"])
    run([A64_CC, "-O2", "-Wall", "-Werror", *bp, "-shared", "-fPIC", f"-I{INCLUDE}",
         "-o", fix, SRC / "patch1.c"])
    out = run(["qemu-aarch64", "-cpu", "max", "-L", "/usr/aarch64-linux-gnu", exe, fix]).stdout
    assert out == "ok patched=1000\n", out
