# SPDX-License-Identifier: MIT
"""`ftpad attach` on aarch64, inside the arm64 QEMU system machine (ptrace
does not work under qemu-user), in one boot of the arm64 -Os kernel the
early-tracing tests use (its config has what attach and glibc's threads
need: docs/kbuild.md).

The initramfs holds tests/src/attach/server.c built with the aarch64 plugin
and exit sites (dynamically linked, not linked with libftpad), the aarch64
`ftpad` and libftpad.so, glibc's loader and libc, and
tests/src/attach/guest_aarch64.c as a static /init, which attaches to the
server three times (parked and filtered; running with no filter; parked,
filtered, --graph) and prints what it saw, each line "A64: ...".  Here:

- every attach started and the tool exited 0 each time;
- the server's own checks held (no error, every kind of thread went on
  while attached and after, each client got the next pong) and it exited 0;
- its text read through /proc/PID/mem is byte for byte as before, after
  each detach;
- each parked round's trace (read in the guest by `ftpad report`) holds
  exactly the calls the server counted between its two parks, of the
  chosen functions only, with nothing lost;
- a process whose one thread is in an SVE loop (-cpu max: 512-bit
  vectors) is refused (no thread at a safe point: the stub's frame has no
  SVE record), and its sums stay right; skipped while the kernel has no
  CONFIG_ARM64_SVE (tinyconfig's default).

The same boot also runs `ftpad record` of tests/src/record/prog.c in its
exec mode, which qemu-user cannot run (no aarch64 exec without
binfmt_misc): the exec'ed image continues the trace, and the events
before the exec are in it (libftpad.so's exec hook)."""
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from ftpadtest import KBUILD_HELPERS, TEST_SRC  # noqa: E402

sys.path.insert(0, str(KBUILD_HELPERS))
import ftpadtest  # noqa: E402
import kernel  # noqa: E402
from conftest import require_kernel_tools, require_tool  # noqa: E402
from ftpadtest import A64_PLUGIN, BUILD, run  # noqa: E402

CC = "aarch64-linux-gnu-gcc-12"
SYSROOT = pathlib.Path("/usr/aarch64-linux-gnu/lib")
A64_FTPAD = BUILD / "runtime" / "aarch64" / "bin" / "ftpad"
A64_LIBFTPAD = BUILD / "runtime" / "aarch64" / "libftpad.so"
SRC = TEST_SRC / "attach"
COUNTED = ("work_add", "work_nest", "work_tail", "work_leaf")
# "... Calls  Function", the function maybe followed by "(entry only)" or
# "(N unwound)".
REPORT_LINE = re.compile(r"\s(\d+)\s+(\S+)(?: \([^)]*\))?$")


def initramfs(workdir):
    """The guest's files, as a gzipped cpio archive: its path."""
    root = workdir / "root"
    for d in ("lib", "ftpad/bin", "proc", "dev", "tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    run([CC, "-O2", "-Wall", "-Werror", f"-fplugin={A64_PLUGIN}", "-fplugin-arg-ftpad-exit=1",
         "-pthread", "-o", root / "server", SRC / "server.c"])
    run([CC, "-O2", "-Wall", "-Werror", "-march=armv8.2-a+sve", f"-fplugin={A64_PLUGIN}",
         "-o", root / "sve_spin", SRC / "sve_spin.c"])
    run([CC, "-O2", f"-fplugin={A64_PLUGIN}", "-fplugin-arg-ftpad-exit=1", "-o", root / "prog",
         TEST_SRC / "record" / "prog.c", "-lpthread", "-ldl"])
    run([CC, "-static", "-O2", "-Wall", "-Werror", "-o", root / "init",
         SRC / "guest_aarch64.c"])
    shutil.copy(A64_FTPAD, root / "ftpad" / "bin" / "ftpad")
    shutil.copy(A64_LIBFTPAD, root / "ftpad" / "libftpad.so")
    for lib in ("ld-linux-aarch64.so.1", "libc.so.6"):
        shutil.copy(SYSROOT / lib, root / "lib" / lib)
    cpio = workdir / "attach.cpio.gz"
    subprocess.run(f"cd {root} && find . -print0 | cpio --null -o -H newc --quiet "
                   f"| gzip -1 > {cpio}", shell=True, check=True)
    return cpio


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    """The guest's "A64: ..." lines (the prefix taken off), of one boot."""
    require_kernel_tools("patch", CC, "cpio", "qemu-system-aarch64")
    for p in (A64_PLUGIN, A64_FTPAD, A64_LIBFTPAD):
        if not p.exists():
            pytest.fail(f"{p} is missing: run `make` first")
    out = kernel.build("arm64-Os", "patched", ftpadtest.A64_PLUGIN, patched=True, early=True)
    workdir = tmp_path_factory.mktemp("attach-aarch64")
    text, _ = kernel.boot("arm64-Os", out, workdir, timeout=1800, cpio=initramfs(workdir),
                          qemu_extra=["-smp", "2", "-m", "512"])
    for bad in ("Kernel panic", "Oops", "BUG:", "segfault", "Unhandled"):
        assert bad not in text, text[-4000:]
    lines = [ln.split("A64: ", 1)[1] for ln in text.splitlines() if "A64: " in ln]
    assert lines and lines[0] == "init reached", text[-4000:]
    assert lines[-1] == "done", text[-4000:]
    return lines


def kv(line):
    """'word k=v k=v' -> {k: int(v)}."""
    return {k: int(v) for k, v in (f.split("=") for f in line.split()[1:])}


def one(lines, prefix):
    [line] = [ln[len(prefix):] for ln in lines if ln.startswith(prefix)]
    return line


def report_calls(lines, round):
    """{function: calls} and the events line of `ftpad report -s name`."""
    calls, summary = {}, None
    for ln in lines:
        if not ln.startswith(f"report {round} "):
            continue
        body = ln[len(f"report {round} "):]
        m = REPORT_LINE.search(body)
        if body.startswith("#"):
            summary = body
        elif m and not body.lstrip().startswith(("Total", "=")):
            calls[m.group(2)] = int(m.group(1))
    return calls, summary


def test_every_attach_started_and_ended(console):
    assert sum("ftpad: attached to process" in ln for ln in console if ln.startswith("tool ")) == 3
    for round in ("exact1", "free", "exact2"):
        assert one(console, f"tool-exit {round} ") == "0", console


def test_the_server_kept_its_own_checks(console):
    assert "progress stuck" not in console
    assert console.count("progress ok") == 7
    pings = [ln for ln in console if ln.startswith("ping ")]
    assert pings == [f"ping {n} pong {n}" for n in range(1, 8)]
    for ln in console:
        if ln.startswith("server status "):
            assert kv(ln[len("server "):])["errors"] == 0, ln
    final = [ln for ln in console if ln.startswith("server final ")]
    assert final and final[-1].startswith("server final errors=0 "), console[-10:]
    assert one(console, "server-exit ") == "0"


def test_text_is_as_before_after_each_detach(console):
    for round in ("exact1", "free", "exact2"):
        assert re.fullmatch(r"same ranges=[1-9]\d*", one(console, f"text {round} ")), console


@pytest.mark.parametrize("round", ["exact1", "exact2"])
def test_trace_holds_exactly_the_counted_calls(console, round):
    start = kv(one(console, f"start {round} "))
    end = kv(one(console, f"end {round} "))
    delta = {name: end[name] - start[name] for name in COUNTED}
    assert all(n > 0 for n in delta.values()), delta
    calls, summary = report_calls(console, round)
    assert one(console, f"report-exit {round} ") == "0"
    assert calls == delta, (calls, delta)
    assert summary and "LOST" not in summary, summary


def test_free_round_traced_the_hot_loops(console):
    calls, summary = report_calls(console, "free")
    assert one(console, "report-exit free ") == "0"
    for name in ("work_add", "work_nest", "spare_fn"):
        assert calls.get(name, 0) > 0, calls
    assert calls.get("fail", 0) == 0


def test_a_thread_with_live_sve_state_is_never_chosen(console):
    if "sve absent" in console:
        pytest.skip("the arm64 -Os test kernel has no CONFIG_ARM64_SVE")
    lanes = int(one(console, "sve ready ").split("lanes=")[1])
    assert lanes > 2, "the guest's SVE vectors are 128 bits: nothing to lose"
    tool = [ln for ln in console if ln.startswith("tool ") and "no thread at a safe point" in ln]
    assert tool and one(console, "tool-exit sve ") == "1", console[-12:]
    assert re.fullmatch(r"rounds=[1-9]\d* errors=0 lanes=\d+", one(console, "sve sve ")), console
    assert one(console, "sve-exit ") == "0"


def test_record_exec_continues_into_the_next_image(console):
    """prog exec: mid() twice, then execv of itself as "prog count 4".  Both
    images are in the trace, the second exec'ed from the first, and the
    first's two calls were written before the exec replaced its memory."""
    assert one(console, "rec-exit ") == "7", console
    assert [ln for ln in console if ln.startswith("rec leaf=")] == [
        "rec leaf=2 mid=2", "rec leaf=4 mid=4"]
    summary = [ln for ln in console if ln.startswith("rec ftpad: ")]
    assert len(summary) == 1, console
    images = [re.search(r" of (\d+)\.(\d+) /prog(?:, exec from (\d+)\.(\d+))?$", ln)
              for ln in console if ln.startswith("rec-replay # thread ")]
    assert len(images) == 2 and all(images), [ln for ln in console if ln.startswith("rec")]
    first, second = sorted(m.groups() for m in images)
    assert first == (first[0], "0", None, None) and second == (first[0], "1", first[0], "0")
    # The summary counts both images: 13 events before the exec, 22 after.
    assert " 35 events, 0 dropped" in summary[0], summary
    calls, _ = report_calls(console, "rec")
    assert calls["mid"] == 6 and calls["leaf"] == 6 and calls["main"] == 2, calls
