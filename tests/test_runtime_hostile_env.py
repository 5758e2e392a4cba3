# SPDX-License-Identifier: MIT
"""libftpad in a hostile environment (issue 18): a program that closes every
descriptor (closefrom) and opens files of its own, a fork from a signal
handler inside a register, a SIGTRAP handler of the program's own behind
libftpad's, a program that mprotects its own text, and no /proc."""
import os
import pathlib
import subprocess

import pytest

from ftpadtest import BUILD, INCLUDE, run

SRC = pathlib.Path(__file__).parent / "runtime"
LIBDIR = BUILD / "runtime"


@pytest.fixture(scope="module")
def progs(plugin, libftpad, tmp_path_factory):
    """Each tests/runtime/env_*.c, padded and linked with libftpad.so."""
    d = tmp_path_factory.mktemp("env")
    for src in sorted(SRC.glob("env_*.c")):
        run(["gcc", "-O2", "-g", "-Wall", "-Wextra", "-Werror", f"-fplugin={plugin}",
             f"-I{INCLUDE}", src, f"-L{LIBDIR}", "-lftpad", f"-Wl,-rpath,{LIBDIR}",
             "-pthread", "-o", d / src.stem])
    return d


def test_chained_sigtrap_handler_gets_the_threads_mask(progs):
    # The program's SIGTRAP handler behind libftpad's runs with the thread's
    # mask plus its own sa_mask and SIGTRAP, exactly as without libftpad:
    # the SIGUSR1 the thread blocks, pending, does not come inside it.
    p = run([progs / "env_sigmask"])
    assert p.stdout.splitlines() == [
        "before raise: ok", "before int3: ok", "after raise: ok", "after int3: ok",
        "calls=1"]
