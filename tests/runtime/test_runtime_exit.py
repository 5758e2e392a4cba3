# SPDX-License-Identifier: MIT
"""Exit sites in libftpad: struct ftpad_ops.exit_func, on x86_64 natively
and on aarch64 under qemu-aarch64.

The plugins' exit=1 is tested with the plugins; here the runtime is tested
on its own, on functions whose exit sites and records are written by hand
in tests/src/runtime_exit/<arch>.S exactly as docs/format.md "Exit sites
(version 2)" defines them, driven by tests/src/runtime_exit/main.c:
every return path's exit callback fires once with the right return value
(integer, double, long double, complex long double, a two-register struct),
a tail exit keeps every argument register and the branch target register
(r11, x16) for the tail-called function, entry and exit callbacks pair up
per thread while another thread registers and unregisters an exit-only
ops, unregistering restores the text byte for byte, a module with entry
records only is marked entries only, and a version 3 record is refused."""
import errno
import os
import re
import shutil

import pytest

from ftpadtest import BUILD, INCLUDE, TEST_SRC, run

SRC = TEST_SRC / "runtime_exit"
A64_CC = "aarch64-linux-gnu-gcc-12"
A64_LIB = BUILD / "runtime" / "aarch64" / "libftpad.a"
LIBDIR = BUILD / "runtime"
EPERM = -errno.EPERM
ARCHES = ["x86_64", "aarch64", "aarch64-bti"]

# What `main exit` prints: each exit callback line comes right before the
# caller prints what the call returned.
EXPECTED_EXIT = [
    "register=0",
    "stats: sites=7 enabled=7 exit_sites=8 exits_enabled=8 entries_only=1",
    "entries_only: ret_int=0 noexit_fn=1 main=-2",
    f"exit ret_int -1 paired set_ip={EPERM}",
    "ret_int(-5)=-1",
    f"exit ret_int 0 paired set_ip={EPERM}",
    "ret_int(0)=0",
    f"exit ret_int 42 paired set_ip={EPERM}",
    "ret_int(21)=42",
    f"exit ret_double 2.5 paired set_ip={EPERM}",
    "ret_double(1.25)=2.5",
    f"exit ret_ldouble exact paired set_ip={EPERM}",
    "ret_ldouble=exact",
    f"exit ret_cld exact paired set_ip={EPERM}",
    "ret_cld=exact",
    f"exit ret_pair -3 1099511627776 paired set_ip={EPERM}",
    "ret_pair=-3 1099511627776",
    f"exit tail_caller - paired set_ip={EPERM}",
    # The tail-called function got a..f, the two registers set right
    # before the jump, its own address in r11/x16 (0xffff), and d0-d7.
    "tail_target saw: 0x1 0x2 0x3 0x4 0x5 0x6 0x1010 0x8 0xffff "
    "0.5 1.5 2.5 3.5 4.5 5.5 6.5 7.5",
    # noexit_fn has an entry record only: no exit callback.
    "noexit_fn(1)=2",
    # ftpad_regs_set_return_value() in the exit callback.
    f"exit ret_int 6 paired set_ip={EPERM}",
    "override: ret_int(3)=77",
    "depth=1 entries=10 exits=9 unpaired=0",
    "unregister=0",
    "text while registered: changed",
    "text after unregister: same",
    "stats: sites=7 enabled=0 exit_sites=8 exits_enabled=0 entries_only=1",
    "entries_only: ret_int=0 noexit_fn=1 main=-2",
    # An ops with exit_func only: no entry callback, the exit's still
    # called (unpaired: this ops saw no entry).
    "exit only: register=0",
    f"exit ret_int 4 unpaired set_ip={EPERM}",
    "exit only: entries=0 exits=1",
]


@pytest.fixture(scope="module")
def programs(tmp_path_factory, libftpad):
    """main.c with each architecture's .S, plain, -DV1ONLY and -DV3."""
    d = tmp_path_factory.mktemp("runtime_exit")
    common = ["-O2", "-g", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", SRC / "main.c"]
    x86 = ["gcc", *common, SRC / "x86_64.S", f"-L{LIBDIR}", "-lftpad",
           f"-Wl,-rpath,{LIBDIR}", "-lpthread"]
    a64 = [A64_CC, *common, SRC / "aarch64.S", "-static", A64_LIB, "-lpthread"]
    builds = {"x86_64": x86, "aarch64": a64,
              "aarch64-bti": [*a64, "-mbranch-protection=standard"]}
    out = {}
    for arch, cmd in builds.items():
        if arch.startswith("aarch64") and (shutil.which(A64_CC) is None or not A64_LIB.exists()
                                           or shutil.which("qemu-aarch64") is None):
            pytest.fail(f"{A64_CC}, qemu-aarch64 or {A64_LIB} missing: "
                        "scripts/install-deps.sh, then `make`")
        for variant, flags in (("", []), ("_v1", ["-DV1ONLY"]), ("_v3", ["-DV3"])):
            exe = d / f"exit_{arch}{variant}"
            run([*cmd, *flags, "-o", exe])
            out[arch + variant] = exe
    return out


def run_mode(programs, arch, mode, variant=""):
    exe = programs[arch + variant]
    if arch.startswith("aarch64"):
        return run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", exe, mode],
                   env={**os.environ})
    return run([exe, mode])


@pytest.mark.parametrize("arch", ARCHES)
def test_exit_callbacks_on_every_path(programs, arch):
    """Every return path's exit callback once, with its return value, ip
    and parent_ip pairing with the entry's; the tail exit keeps every
    argument register and the branch target; set_ip refused; the text back
    byte for byte after unregistering."""
    p = run_mode(programs, arch, "exit")
    assert p.stdout.splitlines() == EXPECTED_EXIT
    assert p.stderr == ""


@pytest.mark.parametrize("arch", ARCHES[:2])
def test_entry_and_exit_pair_up_across_threads(programs, arch):
    """Three threads call while a fourth registers and unregisters an
    exit-only ops 40 times: the ops registered throughout sees each call's
    entry and exit, in pairs (same parent_ip, innermost first), no more, no
    fewer, and the functions return what they should."""
    p = run_mode(programs, arch, "threads")
    lines = p.stdout.splitlines()
    assert lines[0] == "register=0" and lines[-2:] == ["toggler errors=0", "unregister=0"]
    workers = [line for line in lines if line.startswith("worker ")]
    assert len(workers) == 3
    for line in workers:
        m = re.fullmatch(r"worker \d: calls=(\d+) entries=(\d+) exits=(\d+) unpaired=(\d+) "
                         r"depth=(\d+) wrong=(\d+)", line)
        assert m, line
        calls, entries, exits, unpaired, depth, wrong = map(int, m.groups())
        assert (entries, exits, unpaired, depth, wrong) == (calls, calls, 0, 0, 0), line


@pytest.mark.parametrize("arch", ARCHES[:2])
def test_module_without_exit_records_has_entries_only(programs, arch):
    p = run_mode(programs, arch, "v1", "_v1")
    assert p.stdout.splitlines() == [
        "register=0",
        "stats: sites=7 enabled=7 exit_sites=0 exits_enabled=0 entries_only=7",
        "entries_only: ret_int=1 noexit_fn=1 main=-2",
        "ret_int(21)=42",
        "entries=1 exits=0",
        "unregister=0",
    ]


@pytest.mark.parametrize("arch", ARCHES[:2])
def test_newer_record_version_rejects_the_table(programs, arch):
    p = run_mode(programs, arch, "v3", "_v3")
    assert "stats: sites=0 enabled=0 exit_sites=0 exits_enabled=0 entries_only=0" in p.stdout
    assert "entries=0 exits=0" in p.stdout
    assert re.search(r"exit_\S+_v3: warning: ftpad: site record version 3 is newer than this "
                     r"runtime \(2\); table ignored", p.stderr), p.stderr
