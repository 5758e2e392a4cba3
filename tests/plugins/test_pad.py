# SPDX-License-Identifier: MIT
"""The pad definitions' checks (pad/x86_64.c, pad/aarch64.c), which libftpad
runs before it patches a site and recordmcount-ng --check runs on objects:
tests/src/pad/check_pads.c feeds them one good pad of each layout and one
pad broken in each way they reject, built with AddressSanitizer (a read
outside the bytes handed over fails) and as the runtime builds them."""
import re

import pytest

from ftpadtest import ROOT, TEST_SRC, run

PAD = ROOT / "pad"
TEST = TEST_SRC / "pad" / "check_pads.c"
# The flags the runtime builds with: no libc beyond memcmp, nothing padded.
FLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fno-instrument-functions"]
BUILDS = {"plain": [], "asan": ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]}


@pytest.mark.parametrize("build", BUILDS)
def test_every_verdict_of_every_check(tmp_path, build):
    exe = tmp_path / "check_pads"
    run(["gcc", *FLAGS, *BUILDS[build], f"-I{PAD}", TEST, PAD / "x86_64.c", PAD / "aarch64.c",
         "-o", exe])
    p = run([exe], check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[-1] == "0 failures", p.stdout
    # 21 x86_64 pads and 23 aarch64 pads (entry and exit sites), each with its verdict.
    assert sum(line.startswith("ok x86_64 ") for line in lines) == 21, p.stdout
    assert sum(line.startswith("ok aarch64 ") for line in lines) == 23, p.stdout


def test_checks_are_freestanding(tmp_path):
    """The runtime calls the checks with its locks held: nothing but memcmp."""
    for src in ("x86_64.c", "aarch64.c"):
        obj = tmp_path / (src + ".o")
        run(["gcc", *FLAGS, "-fPIC", f"-I{PAD}", "-c", PAD / src, "-o", obj])
        undefined = run(["nm", "--undefined-only", obj]).stdout.split()
        calls = {s for s in undefined if re.fullmatch(r"[A-Za-z_]\w*", s) and s != "U"}
        assert calls <= {"memcmp"}, f"{src} calls {sorted(calls)}"
