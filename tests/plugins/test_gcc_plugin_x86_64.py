# SPDX-License-Identifier: MIT
"""The GCC plugin's x86_64 user layout, read back from real objects and
linked programs: pads, ops slots, ENDBR placement, records, policy and
argument errors."""

import pytest

from elftools.elf.elffile import ELFFile

import ftpadtest
from ftpadtest import (A64_PLUGIN, ENDBR64, FLAG_ENDBR, PLUGIN, Image,
                       check_records, check_site_x86_64, object_functions, plugin_flags,
                       run, starts_with_pad)
from ftpadtest import TEST_SRC  # noqa: E402

SRC = TEST_SRC


def build(tmp_path, source, flags, plugin_args=None, link=True):
    compiler = "g++" if source.suffix == ".cc" else "gcc"
    obj = tmp_path / (source.stem + ".o")
    run([compiler, *flags, *plugin_flags(**(plugin_args or {})), "-c", source, "-o", obj])
    if not link:
        return obj, None
    exe = tmp_path / source.stem
    run([compiler, *flags, obj, "-o", exe])
    return obj, exe


# Everything the x86_64 user layout promises about one site: one check,
# shared with the clang pass's tests (ftpadtest.check_site_x86_64).
check_site = check_site_x86_64


def check_program(obj, exe, before=0, after=5, ops=True):
    return check_records(obj, exe, lambda image, site: check_site(image, site, before, after, ops),
                         lambda image, addr: starts_with_pad(image, addr, "x86_64"),
                         lambda name: "skip_" not in name)


OPT_LEVELS = ["-O0", "-O2", "-O3", "-Os"]
CF = [[], ["-fcf-protection"]]


# C++ kinds of function layout.cc defines at -O0, each a COMDAT function
# that check_program then requires a record for: constructors,
# destructors (complete, base, deleting), template instances, an inline
# function and a virtual member.
CXX_KINDS = {"_ZN5ShapeC2Ei", "_ZN6SquareC2Ei", "_ZN5ShapeD2Ev", "_ZN5ShapeD0Ev",
             "_Z5twiceIiET_S0_", "_Z5twiceIdET_S0_", "_Z13inlined_twicei", "_ZNK6Square4areaEv"}


@pytest.mark.parametrize("source", ["layout.c", "layout.cc"])
@pytest.mark.parametrize("opt", OPT_LEVELS)
@pytest.mark.parametrize("cf", CF, ids=["plain", "cf-protection"])
def test_default_layout(tmp_path, plugin, source, opt, cf):
    obj, exe = build(tmp_path, SRC / source, [opt, *cf])
    sites = check_program(obj, exe)
    if source.endswith(".cc") and opt == "-O0":
        assert CXX_KINDS <= object_functions(obj)
    if cf:
        # Every function whose address can escape gets ENDBR first.
        assert any(s.flags & FLAG_ENDBR for s in sites)
    else:
        assert not any(s.flags & FLAG_ENDBR for s in sites)
    run([exe])


# Every combination of before (none, odd, a cache line's worth), after (the
# minimum, one more, many more) and ops: odd counts move the filler and the
# alignment around.
COUNTS = [(b, a, o) for b in (0, 3, 16) for a in (5, 6, 16) for o in (0, 1)]


@pytest.mark.parametrize("before,after,ops", COUNTS)
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


@pytest.mark.parametrize("abi", ["user", "kernel"])
@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_deterministic(tmp_path, plugin, arch, abi):
    """Two compiles of the same source, in different directories, give
    identical objects: records, names, labels and all."""
    cxx, plugin_path, landing = {
        "x86_64": ("g++", PLUGIN, "-fcf-protection"),
        "aarch64": ("aarch64-linux-gnu-g++-12", A64_PLUGIN, "-mbranch-protection=standard"),
    }[arch]
    objects = []
    for sub in ("a", "b"):
        obj = tmp_path / sub / "layout.o"
        obj.parent.mkdir()
        run([cxx, "-O2", landing, *plugin_flags(plugin_path, abi=abi, before=3, record="ftpad"),
             "-c", SRC / "layout.cc", "-o", obj], cwd=obj.parent)
        objects.append(obj.read_bytes())
    assert objects[0] == objects[1]
    assert b"__ftpad_sites" in objects[0]


def landing_pads(obj, functions=None):
    """Functions of OBJ (or of FUNCTIONS) whose first bytes are ENDBR64."""
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        out = set()
        for sym in elf.get_section_by_name(".symtab").iter_symbols():
            if sym["st_info"]["type"] != "STT_FUNC" or sym["st_shndx"] == "SHN_UNDEF":
                continue
            if sym.name.endswith(".cold") or (functions and sym.name not in functions):
                continue
            data = elf.get_section(sym["st_shndx"]).data()
            if data[sym["st_value"]:sym["st_value"] + 4] == ENDBR64:
                out.add(sym.name)
    return out


@pytest.mark.parametrize("source", ["layout.c", "layout.cc"])
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("cf", ["-fcf-protection", "-fcf-protection=branch"])
def test_endbr_where_gcc_puts_it(tmp_path, plugin, source, opt, cf):
    """ENDBR stays exactly where GCC puts it without the plugin: first, in
    every function whose address may escape, and nowhere else.  A static
    function that is only called directly has none, and still gets its pad
    and record, with the site right at the entry."""
    compiler = "g++" if source.endswith(".cc") else "gcc"
    native = tmp_path / "native.o"
    run([compiler, opt, cf, "-c", SRC / source, "-o", native])
    obj, exe = build(tmp_path, SRC / source, [opt, cf])
    assert landing_pads(obj) == landing_pads(native)
    sites = {s.name: s for s in check_program(obj, exe)}
    assert {n for n, s in sites.items() if s.flags & FLAG_ENDBR} == \
        landing_pads(obj, set(sites))
    if source == "layout.c" and opt == "-O2":
        # static helper(): only called directly, so GCC gives it no ENDBR
        # (at -O0 it does not look and gives every function one)
        assert "helper" not in landing_pads(native) and "helper" in sites
        assert not sites["helper"].flags & FLAG_ENDBR
        assert sites["helper"].site == sites["helper"].entry


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_cold_functions_stay_aligned(tmp_path, plugin, opt):
    """GCC packs cold functions into .text.unlikely without aligning them
    to 8 (the control, without the plugin); every ops slot stays 8-aligned
    anyway."""
    src = ftpadtest.cold_source(tmp_path, "gcc", opt)
    obj, exe = build(tmp_path, src, [opt])
    sites = check_program(obj, exe)
    assert {"c1", "c2", "c3", "c4"} <= {s.name for s in sites}
    run([exe])
