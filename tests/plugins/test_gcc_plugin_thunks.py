# SPDX-License-Identifier: MIT
"""C++ this-adjusting thunks get a pad and a record like any function, also
at -O0 where GCC writes them as assembly and even its own
-fpatchable-function-entry leaves them bare; the landing pad stays first."""
import json

import pytest

from ftpadtest import (A64_PLUGIN, ENDBR64, FLAG_BTI, FLAG_ENDBR, NOP5, Image,
                       plugin_flags, run)
from ftpadtest import TEST_SRC  # noqa: E402

SRC = TEST_SRC / "thunks.cc"
THUNK = "_ZThn16_N1C1gEi"
BTI_C = bytes.fromhex("5f2403d5")
MOV_X9_X30 = bytes.fromhex("e9031eaa")
NOP = bytes.fromhex("1f2003d5")


def thunk_site(exe):
    with Image(exe) as image:
        sites = {s.name: s for s in image.sites()}
        assert THUNK in sites, f"no record for the thunk: {sorted(sites)}"
        site = sites[THUNK]
        assert image.functions()[THUNK][0] == site.entry
        assert site.ops + 8 == site.entry and site.ops % 8 == 0
        return site, image.read(site.entry, 12)


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("cf", [[], ["-fcf-protection"]], ids=["plain", "cf-protection"])
def test_x86_64_thunk(tmp_path, plugin, opt, cf):
    exe = tmp_path / "thunks"
    run(["g++", opt, *cf, *plugin_flags(), SRC, "-o", exe])
    run([exe])
    site, code = thunk_site(exe)
    if cf:
        assert site.flags & FLAG_ENDBR and code[:4] == ENDBR64 and code[4:9] == NOP5
        assert ENDBR64 not in code[4:], "a second ENDBR behind the site"
    else:
        assert not site.flags & FLAG_ENDBR and code[:5] == NOP5


def test_asm_thunk_under_min_insns(tmp_path, plugin):
    """An asm thunk has no RTL to count: it is a few instructions, no loop."""
    report = tmp_path / "report.jsonl"
    run(["g++", "-O0", *plugin_flags(min_insns=4, report=report), "-c", SRC,
         "-o", tmp_path / "t.o"])
    rows = {r["function"]: r for r in map(json.loads, report.read_text().splitlines())}
    assert rows[THUNK]["decision"] == "skip"
    assert rows[THUNK]["reason"] == "asm thunk < min-insns 4"


def test_gcc_leaves_asm_thunks_bare(tmp_path):
    """The control: GCC's own patchable entry misses the -O0 thunk."""
    exe = tmp_path / "thunks"
    run(["g++", "-O0", "-fpatchable-function-entry=5", SRC, "-o", exe])
    with Image(exe) as image:
        assert image.read(image.functions()[THUNK][0], 1) != b"\x90"


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("bp", [[], ["-mbranch-protection=standard"]], ids=["plain", "bti"])
def test_aarch64_thunk(tmp_path, plugin, opt, bp):
    exe = tmp_path / "thunks"
    run(["aarch64-linux-gnu-g++-12", opt, *bp, "-static",
         *plugin_flags(A64_PLUGIN), SRC, "-o", exe])
    run(["qemu-aarch64", exe])
    site, code = thunk_site(exe)
    head = [code[i:i + 4] for i in range(0, 12, 4)]
    if bp:
        assert site.flags & FLAG_BTI and head == [BTI_C, MOV_X9_X30, NOP]
    else:
        assert not site.flags & FLAG_BTI and head[:2] == [MOV_X9_X30, NOP]
    assert BTI_C not in code[4:], "a second BTI behind the site"
