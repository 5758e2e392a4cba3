# SPDX-License-Identifier: MIT
"""The plugin core's C unit tests (plugin-core/tests/core_test.c): the
layout table, the arguments, the glob lists, the policy grammar, the
decision chain and the report line, without a compiler."""
import pytest

from ftpadtest import BUILD, run

CORE_TEST = BUILD / "plugin-core" / "ftpad_plugin_core_test"


def test_plugin_core_unit_tests():
    if not CORE_TEST.exists():
        pytest.fail(f"{CORE_TEST} is missing: run `make` first")
    p = run([CORE_TEST], check=False)
    # Each failed check is one line naming the file, line and check.
    assert p.returncode == 0 and p.stdout.strip() == "all checks passed", p.stdout + p.stderr
