# SPDX-License-Identifier: MIT
"""The GCC plugin's x86_64 user layout, read back from real objects and
linked programs: pads, ops slots, ENDBR placement, records, policy and
argument errors."""
import itertools
import pathlib

import capstone
import pytest

from ftpadtest import (ENDBR64, FLAG_ENDBR, NOP5, PLUGIN, ARCH_X86_64, Image,
                       check_records, plugin_flags, run)

SRC = pathlib.Path(__file__).parent / "src"
CACHE_LINE = 64
OPS_SLOT = bytes.fromhex("0f1f840000000000")  # an 8-byte NOP until used


def build(tmp_path, source, flags, plugin_args=None, link=True):
    compiler = "g++" if source.suffix == ".cc" else "gcc"
    obj = tmp_path / (source.stem + ".o")
    run([compiler, *flags, *plugin_flags(**(plugin_args or {})), "-c", source, "-o", obj])
    if not link:
        return obj, None
    exe = tmp_path / source.stem
    run([compiler, *flags, obj, "-o", exe])
    return obj, exe


def disassemble(code, addr, count):
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    return list(itertools.islice(md.disasm(code, addr), count))


def check_site(image, site, before, after, ops=True, exact_after=True, nop5=NOP5):
    """Everything the x86_64 user layout promises about one site.  With
    exact_after false, NOPs of the function's own may follow the pad (GCC
    aligns a loop at the very start of a function with NOPs).  nop5 is the
    site's encoding: clang's differs in one byte (test_clang_pass_x86_64)."""
    assert site.version == 1 and site.arch == ARCH_X86_64 and site.site_len == 5
    assert (site.before, site.after) == (before, after)
    head = image.read(site.entry, 4)
    if site.flags & FLAG_ENDBR:
        assert head == ENDBR64, f"{site.name}: flag ENDBR but entry has {head.hex()}"
        assert site.site == site.entry + 4
        assert site.entry % 16 == 0, f"{site.name}: entry behind ENDBR not 16-aligned"
    else:
        assert head != ENDBR64, f"{site.name}: ENDBR at entry but not in the record"
        assert site.site == site.entry
    assert image.read(site.site, 5) == nop5, f"{site.name}: site is not one 5-byte NOP"
    assert site.site // CACHE_LINE == (site.site + 4) // CACHE_LINE, \
        f"{site.name}: site at {site.site:#x} straddles a cache line"
    # The rest of `after` is NOPs, and exactly `after` bytes of them.
    # Read one instruction past them too, unless the code ends there.
    rest = image.read(site.site + 5, after - 5 + 16, partial=True)
    insns = disassemble(rest, site.site + 5, 16)
    nop_bytes = 0
    for insn in insns:
        if insn.mnemonic != "nop":
            break
        nop_bytes += insn.size
    if exact_after:
        assert nop_bytes == after - 5, f"{site.name}: {nop_bytes} NOP bytes after the site"
    else:
        assert nop_bytes >= after - 5, f"{site.name}: {nop_bytes} NOP bytes after the site"
    if ops:
        assert site.ops % 8 == 0, f"{site.name}: ops slot {site.ops:#x} not 8-aligned"
        assert site.ops + 8 == site.entry, f"{site.name}: ops slot does not end at the entry"
        assert image.read(site.ops - before, before + 8) == b"\x90" * before + OPS_SLOT
    else:
        assert site.ops == 0
        assert image.read(site.entry - before, before) == b"\x90" * before


def starts_with_pad(image, addr, nop5=NOP5):
    code = image.read(addr, 9, partial=True)
    if code.startswith(ENDBR64):
        code = code[4:]
    return code.startswith(nop5)


def check_program(obj, exe, before=0, after=5, ops=True):
    return check_records(obj, exe, lambda image, site: check_site(image, site, before, after, ops),
                         starts_with_pad, lambda name: "skip_" not in name)


OPT_LEVELS = ["-O0", "-O2", "-Os"]
CF = [[], ["-fcf-protection"]]


@pytest.mark.parametrize("source", ["layout.c", "layout.cc"])
@pytest.mark.parametrize("opt", OPT_LEVELS)
@pytest.mark.parametrize("cf", CF, ids=["plain", "cf-protection"])
def test_default_layout(tmp_path, plugin, source, opt, cf):
    obj, exe = build(tmp_path, SRC / source, [opt, *cf])
    sites = check_program(obj, exe)
    if cf:
        # Every function whose address can escape gets ENDBR first.
        assert any(s.flags & FLAG_ENDBR for s in sites)
    else:
        assert not any(s.flags & FLAG_ENDBR for s in sites)
    run([exe])


@pytest.mark.parametrize("before,after,ops", [(0, 5, 0), (3, 7, 1), (9, 16, 0), (16, 5, 1)])
@pytest.mark.parametrize("cf", CF, ids=["plain", "cf-protection"])
def test_counts(tmp_path, plugin, before, after, ops, cf):
    obj, exe = build(tmp_path, SRC / "layout.c", ["-O2", *cf],
                     dict(before=before, after=after, ops=ops))
    check_program(obj, exe, before, after, bool(ops))
    run([exe])


@pytest.mark.parametrize("flags", [["-Os"], ["-O2", "-falign-functions=1"],
                                   ["-O3", "-fcf-protection", "-falign-functions=1"]])
def test_alignment_is_forced(tmp_path, plugin, flags):
    """-Os, cold functions and -falign-functions=1 lose GCC's alignment; the
    ops slot must stay 8-aligned anyway (checked in check_site)."""
    obj, exe = build(tmp_path, SRC / "layout.c", flags)
    sites = check_program(obj, exe)
    assert any(s.name == "rarely" for s in sites)


def test_records_follow_gc_sections(tmp_path, plugin):
    src = tmp_path / "gc.c"
    src.write_text("int dropped(int x) { return x * 3; }\n"
                   "__attribute__((noinline)) int kept(int x) { return x + 2; }\n"
                   "int main(int c, char **v) { (void)v; return kept(c); }\n")
    exe = tmp_path / "gc"
    run(["gcc", "-O2", "-ffunction-sections", "-Wl,--gc-sections", *plugin_flags(), src, "-o", exe])
    with Image(exe) as image:
        assert sorted(s.name for s in image.sites()) == ["kept", "main"]


def test_deterministic(tmp_path, plugin):
    objects = []
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        obj, _ = build(tmp_path / sub, SRC / "layout.cc", ["-O2", "-fcf-protection"], link=False)
        objects.append(obj.read_bytes())
    assert objects[0] == objects[1]


@pytest.mark.parametrize("arg,reason", [
    ("before=-1", "-fplugin-arg-ftpad-before=-1"),
    ("after=abc", "-fplugin-arg-ftpad-after=abc"),
    ("after=4", "-fplugin-arg-ftpad-after=4"),
    ("ops=2", "-fplugin-arg-ftpad-ops=2"),
    ("before=256", "-fplugin-arg-ftpad-before=256"),
    ("bogus=1", "unknown argument"),
])
def test_bad_arguments(tmp_path, plugin, arg, reason):
    p = run(["gcc", "-c", SRC / "layout.c", "-o", tmp_path / "x.o", f"-fplugin={PLUGIN}",
             f"-fplugin-arg-ftpad-{arg}"], check=False)
    assert p.returncode != 0
    assert reason in p.stderr.replace("\u2018", "").replace("\u2019", ""), p.stderr
    assert not (tmp_path / "x.o").exists()
