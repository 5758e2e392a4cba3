# SPDX-License-Identifier: MIT
"""The runtime's test programs against libftpad built with AddressSanitizer
and UndefinedBehaviorSanitizer (-DFTPAD_SANITIZE=ON, a build directory of
this test's own), the programs built with the sanitizers too: any report
fails the run.  Covers the hand-made pads (every layout, every trampoline
path, the full register save), the API calls from callbacks, the traced
programs, dlopen/dlclose and the threads/fork/signal stress modes.  About a
minute, most of it building the runtime."""
import os
import re

import pytest

import test_runtime_api
import test_runtime_programs
from ftpadtest import INCLUDE, ROOT, TEST_SRC, run

SRC = TEST_SRC / "runtime"
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
# halt_on_error: any report fails the run; leaks are the program's business.
ENV = {**os.environ, "ASAN_OPTIONS": "halt_on_error=1:detect_leaks=0:abort_on_error=0",
       "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


@pytest.fixture(scope="module")
def san(plugin, tmp_path_factory):
    d = tmp_path_factory.mktemp("sanitized")
    build = d / "build"
    run(["cmake", "-S", ROOT, "-B", build, "-DFTPAD_SANITIZE=ON", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
    run(["cmake", "--build", build, "--target", "ftpad", "-j2"])
    lib = build / "runtime"
    assert "__asan_" in run(["nm", "-D", lib / "libftpad.so"]).stdout
    return d, lib


def link(lib):
    return [f"-L{lib}", "-lftpad", f"-Wl,-rpath,{lib}"]


def san_run(cmd, **kw):
    p = run(cmd, check=False, env={**ENV, **kw.pop("env", {})}, **kw)
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    assert p.returncode == 0, p
    return p


def test_hand_made_pads(san):
    d, lib = san
    run(["gcc", "-shared", "-fPIC", "-DPREFIX=so_", SRC / "pads_x86_64.S", "-o", d / "libpads.so"])
    run(["gcc", "-O1", "-g", *SAN, "-DPREFIX=t_", f"-I{INCLUDE}", SRC / "rt_main.c",
         SRC / "pads_x86_64.S", f"-L{d}", "-lpads", *link(lib), f"-Wl,-rpath,{d}", "-o", d / "rt_main"])
    p = san_run([d / "rt_main", "trace", "*", "t_add1,so_*"])
    assert "after-unregister events=0" in p.stdout
    san_run([d / "rt_main", "bytes"])
    assert san_run([d / "rt_main", "regs"]).stdout == "regs ok 8\n"
    assert "full=2 partial=1" in san_run([d / "rt_main", "saveregs"]).stdout


def test_api_from_callbacks(san, plugin):
    d, lib = san
    run(["gcc", "-O2", "-g", *SAN, f"-fplugin={plugin}", f"-I{INCLUDE}", SRC / "api.c", *link(lib),
         "-o", d / "api"])
    p = san_run([d / "api"])
    assert p.stdout.splitlines() == test_runtime_api.EXPECTED


def test_traced_program(san, plugin, tmp_path):
    d, lib = san
    run(["gcc", "-O2", "-g", f"-fplugin={plugin}", "-shared", "-fPIC", SRC / "traced_lib.c",
         "-o", d / "libtraced_lib.so"])
    run(["gcc", "-O2", "-g", *SAN, "-pthread", f"-fplugin={plugin}", f"-I{INCLUDE}",
         SRC / "traced.c", *link(lib), "-Wl,-z,execstack", "-Wl,--no-warn-execstack",
         "-o", d / "traced"])
    p = san_run([d / "traced", d / "libtraced_lib.so"],
                env={"FTPAD_TRACED": "1", "FTPAD_EVENTS": str(tmp_path / "events.txt")})
    assert p.stdout == test_runtime_programs.OUTPUT


def test_dlopen_dlclose(san, plugin):
    d, lib = san
    run(["gcc", "-O2", f"-fplugin={plugin}", "-shared", "-fPIC", SRC / "dl_lib.c",
         "-o", d / "libdl_lib.so"])
    run(["gcc", "-O2", "-g", *SAN, f"-I{INCLUDE}", SRC / "dl.c", *link(lib), "-o", d / "dl"])
    p = san_run([d / "dl", d / "libdl_lib.so"])
    assert "unregister: 0" in p.stdout and "end: modules=0 sites=0 enabled=0" in p.stdout


@pytest.mark.parametrize("mode,count", [("race", 2000), ("signals", 500), ("exact", 50),
                                        ("exactrace", 50), ("fork", 20), ("forkcb", 20)])
def test_stress(san, plugin, mode, count):
    d, lib = san
    exe = d / "stress"
    if not exe.exists():
        run(["gcc", "-O2", "-g", *SAN, "-pthread", f"-fplugin={plugin}", f"-I{INCLUDE}",
             SRC / "stress.c", *link(lib), "-o", exe])
    p = san_run([exe, mode, "4", str(count)], timeout=900)
    assert re.fullmatch(r"ok traps=\d+\n", p.stdout), p.stdout
