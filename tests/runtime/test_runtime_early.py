# SPDX-License-Identifier: MIT
"""Very early tracing (FTPAD_EARLY=1 with FTPAD_FILTER): the built-in tracer
records calls from the first instrumented call on, before the program's
constructors (and, with libftpad.a, before every shared library's, from
.preinit_array), without calling malloc, and puts them first in its trace.
tests/src/runtime/early.c defines malloc, calloc and realloc to count them;
early_lib.c is a library whose constructor calls a traced function."""
import os
import re
import shutil

import pytest

from ftpadtest import A64_PLUGIN, BUILD, LIBFTPAD_A_LIBS, TEST_SRC, run

SRC = TEST_SRC / "runtime"
SYSROOT = "/usr/aarch64-linux-gnu"
OUTPUT = ("lib constructor: 0 mallocs before\nprogram constructor: 1 mallocs before\n"
          "main: 14\n")
LINE = re.compile(r"\S+-\d+ (\S+) <-(\S+)")


def build(d, cc, plugin, libdir, static):
    cflags = [cc, "-O2", f"-fplugin={plugin}"]
    run([*cflags, "-shared", "-fPIC", SRC / "early_lib.c", "-o", d / "libearly_lib.so"])
    exe = d / ("early_static" if static else "early_shared")
    # The aarch64 libftpad.a, cross-built without libzstd, needs no -lzstd.
    zstd = LIBFTPAD_A_LIBS if libdir == BUILD / "runtime" else []
    lib = (["-Wl,--undefined=ftpad_register_ops", libdir / "libftpad.a", *zstd] if static
           else [f"-L{libdir}", "-lftpad", f"-Wl,-rpath,{libdir}"])
    run([*cflags, SRC / "early.c", f"-L{d}", "-learly_lib", f"-Wl,-rpath,{d}", *lib, "-o", exe])
    return exe


def trace(runner, exe, tmp_path, early):
    out = tmp_path / f"trace{early}.txt"
    env = {**os.environ, "FTPAD_FILTER": "e_*", "FTPAD_OUTPUT": str(out), "FTPAD_EARLY": early}
    p = run([*runner, exe], env=env)
    assert p.stdout == OUTPUT, "the program saw a malloc of libftpad's, or changed"
    lines = out.read_text().splitlines()
    return [tuple(LINE.fullmatch(x).groups()) for x in lines[:-1]], lines[-1]


MAIN_LINES = [("e_main_work", "main"), ("e_lib_work", "main")]


@pytest.mark.parametrize("static", [True, False], ids=["libftpad.a", "libftpad.so"])
def test_early_tracing_x86_64(plugin, libftpad, tmp_path, static):
    """Without FTPAD_EARLY the library constructor's call is lost with
    libftpad.a, which starts at its own constructor, after the libraries';
    with it, libftpad.a starts from .preinit_array and sees it.  Either way
    the program sees exactly the mallocs it sees untraced."""
    exe = build(tmp_path, "gcc", plugin, BUILD / "runtime", static)
    assert run([exe]).stdout == OUTPUT
    calls, summary = trace([], exe, tmp_path, "1")
    assert calls == [("e_lib_work", "lib_init_calls"), ("e_ctor_work", "prog_init_calls")] + MAIN_LINES
    assert summary.endswith("3 sites enabled, 4 calls seen")
    calls, _ = trace([], exe, tmp_path, "0")
    if static:
        assert calls == [("e_ctor_work", "prog_init_calls")] + MAIN_LINES


def test_early_tracing_aarch64(tmp_path):
    """The same with the aarch64 libftpad.a, under qemu."""
    cc = "aarch64-linux-gnu-gcc-12"
    if shutil.which(cc) is None or not A64_PLUGIN.exists():
        pytest.fail(f"{cc} or {A64_PLUGIN} is missing")
    exe = build(tmp_path, cc, A64_PLUGIN, BUILD / "runtime" / "aarch64", True)
    calls, summary = trace(["qemu-aarch64", "-L", SYSROOT], exe, tmp_path, "1")
    assert calls == [("e_lib_work", "lib_init_calls"), ("e_ctor_work", "prog_init_calls")] + MAIN_LINES
    calls, _ = trace(["qemu-aarch64", "-L", SYSROOT], exe, tmp_path, "0")
    assert calls == [("e_ctor_work", "prog_init_calls")] + MAIN_LINES
