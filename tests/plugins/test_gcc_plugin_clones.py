# SPDX-License-Identifier: MIT
"""Clones GCC makes at -O2 (.isra, .constprop, .part) and a GNU C nested
function are entries of their own: each gets a pad and a record, on both
architectures, and the program still runs."""

import pytest

import test_gcc_plugin_aarch64 as a64
import test_gcc_plugin_x86_64 as x86
from ftpadtest import TEST_SRC, run

SRC = TEST_SRC / "clones.c"
CLONES = {"scale.isra.0", "mul.constprop.0", "warn_if.part.0", "add.0"}


@pytest.mark.parametrize("arch", [x86, a64], ids=["x86_64", "aarch64"])
def test_clones_and_nested_functions(tmp_path, plugin, arch):
    obj, exe = arch.build(tmp_path, SRC, ["-O2"])
    sites = arch.check_program(obj, exe)
    names = {s.name for s in sites}
    assert CLONES <= names, f"missing {sorted(CLONES - names)}"
    out = run([*([] if arch is x86 else ["qemu-aarch64"]), exe]).stdout
    assert out.splitlines()[-1] == "67"
