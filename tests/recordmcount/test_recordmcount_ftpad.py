# SPDX-License-Identifier: MIT
"""recordmcount-ng --format=ftpad: objects from plain gcc and clang, built
with -fpatchable-function-entry=N,M or -pg -mfentry, get ftpad records and
fixups, and libftpad then traces exactly their functions.

tests/src/recordmcount/ftpad_traced.c is compiled without the plugin and
converted; ftpad_driver.c (no pads) registers an ops on every site libftpad
finds and calls t_run().  The trace must be exactly the t_* functions but
t_untraced, with ip at each symbol and parent_ip in the caller: natively on
x86_64, and under qemu-aarch64.  The records are also checked in the linked
program, byte by byte, and with bfd, gold and lld, --gc-sections and C++
COMDAT functions (tests/src/comdat_*.cc)."""
import json
import os
import re
import shutil
import stat
import struct

import pytest
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

import ftpadtest
from ftpadtest import (BUILD, FLAG_BTI, FLAG_ENDBR, INCLUDE, NOP5, Image,
                       run)
from test_comdat import LINKERS, surviving_functions
from ftpadtest import TEST_SRC  # noqa: E402

SRC = TEST_SRC
TRACED = SRC / "recordmcount" / "ftpad_traced.c"
DRIVER = SRC / "recordmcount" / "ftpad_driver.c"
NOTRACE_PFE = "-DNOTRACE=__attribute__((patchable_function_entry(0, 0)))"
NOTRACE_PG = "-DNOTRACE=__attribute__((no_instrument_function))"
# What t_run(5) calls, in order: (function, its caller, first argument).
CALLS = [("t_run", "main", 5), ("t_outer", "t_run", 5), ("t_add", "t_outer", 5),
         ("t_hidden", "t_outer", 5), ("t_weak", "t_run", 5), ("t_seven", "t_run", 1)]
TRACED_FUNCS = {name for name, _, _ in CALLS}
SLOT_NOP8 = bytes.fromhex("0f1f840000000000")
# The 5-byte NOPs libftpad accepts as a site: GCC's, and LLVM's, which clang's
# own -fpatchable-function-entry=5 emits and which is therefore kept.
SITE_NOPS = (NOP5, bytes.fromhex("0f1f440008"))
A64_CC = "aarch64-linux-gnu-gcc-12"
A64_LIBDIR = BUILD / "runtime" / "aarch64"
A64_NOP = 0xd503201f
A64_SYSROOT = "/usr/aarch64-linux-gnu"

# x86_64: compiler, flags, and what the pads must become: bytes after the
# entry (its landing pad excluded), ENDBR, and whether every function gets
# an ops slot (None: those whose entry is 8-aligned in an 8-aligned section).
X86 = {
    "gcc-pfe5": ("gcc", ["-fpatchable-function-entry=5", NOTRACE_PFE], 5, False, False),
    "gcc-pfe7": ("gcc", ["-fpatchable-function-entry=7", NOTRACE_PFE], 7, False, False),
    "gcc-pfe5-cet": ("gcc", ["-fpatchable-function-entry=5", "-fcf-protection", NOTRACE_PFE],
                     5, True, False),
    "gcc-pfe13,8-cet": ("gcc", ["-fpatchable-function-entry=13,8", "-fcf-protection",
                                NOTRACE_PFE], 5, True, True),
    # -Os: .text is only 1-aligned, so no entry is sure to be 8-aligned: no slots
    "gcc-pfe16,8-Os": ("gcc", ["-Os", "-fpatchable-function-entry=16,8", NOTRACE_PFE],
                       8, False, False),
    "clang-pfe5": ("clang-14", ["-fpatchable-function-entry=5", NOTRACE_PFE], 5, False, False),
    "clang-pfe8": ("clang-14", ["-fpatchable-function-entry=8", NOTRACE_PFE], 8, False, False),
    "clang-pfe13,8-cet": ("clang-14", ["-fpatchable-function-entry=13,8", "-fcf-protection",
                                       NOTRACE_PFE], 5, True, True),
    # -pg -mfentry: `call *__fentry__@GOTPCREL(%rip)` (6 bytes) in a PIE ...
    "gcc-fentry": ("gcc", ["-pg", "-mfentry", NOTRACE_PG], 6, False, False),
    "gcc-fentry-cet": ("gcc", ["-pg", "-mfentry", "-fcf-protection", NOTRACE_PG], 6, True, False),
    "gcc-fentry-record": ("gcc", ["-pg", "-mfentry", "-mrecord-mcount", NOTRACE_PG], 6, False,
                          False),
    # ... `call __fentry__` (5) without PIE, and 5 NOPs with -mnop-mcount
    "gcc-fentry-nopie": ("gcc", ["-fno-pie", "-pg", "-mfentry", NOTRACE_PG], 5, False, False),
    "gcc-nop-mcount": ("gcc", ["-fno-pie", "-pg", "-mfentry", "-mrecord-mcount", "-mnop-mcount",
                               NOTRACE_PG], 5, False, False),
    "clang-fentry": ("clang-14", ["-pg", "-mfentry", NOTRACE_PG], 5, False, False),
}

# aarch64: compiler, flags, NOPs after the entry, BTI, ops slot everywhere.
A64 = {
    "gcc-pfe2": ([A64_CC], ["-fpatchable-function-entry=2", NOTRACE_PFE], 2, False, False),
    "gcc-pfe3": ([A64_CC], ["-fpatchable-function-entry=3", NOTRACE_PFE], 3, False, False),
    "gcc-pfe2-bti": ([A64_CC], ["-fpatchable-function-entry=2", "-mbranch-protection=standard",
                                NOTRACE_PFE], 2, True, False),
    "gcc-pfe4,2": ([A64_CC], ["-fpatchable-function-entry=4,2", NOTRACE_PFE], 2, False, None),
    "clang-pfe2": (["clang-14", "--target=aarch64-linux-gnu"],
                   ["-fpatchable-function-entry=2", NOTRACE_PFE], 2, False, False),
    "clang-pfe4,2-bti": (["clang-14", "--target=aarch64-linux-gnu"],
                         ["-fpatchable-function-entry=4,2", "-mbranch-protection=standard",
                          NOTRACE_PFE], 2, True, None),
}


@pytest.fixture(scope="module")
def a64():
    for tool in (A64_CC, "qemu-aarch64"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: scripts/install-deps.sh installs it")
    if not (A64_LIBDIR / "libftpad.a").exists():
        pytest.fail(f"{A64_LIBDIR}/libftpad.a is missing: run `make` with {A64_CC} installed")


def convert(rmc, *objs, check=True):
    return run([rmc, "--format=ftpad", *objs], check=check)


def compile_traced(tmp_path, cc, flags, opt="-O2", name="traced.o"):
    obj = tmp_path / name
    run([*cc, opt, "-Wall", "-Werror", "-Wno-unused-command-line-argument", *flags, "-c",
         TRACED, "-o", obj])
    return obj


def build_x86(tmp_path, rmc, variant):
    cc, flags, *_ = X86[variant]
    opt = "-Os" if "-Os" in flags else "-O2"
    obj = compile_traced(tmp_path, [cc], [f for f in flags if f != "-Os"], opt)
    convert(rmc, obj)
    driver = tmp_path / "driver.o"
    run(["gcc", "-O2", f"-I{INCLUDE}", "-c", DRIVER, "-o", driver])
    exe = tmp_path / "prog"
    run(["gcc", driver, obj, "-o", exe, f"-L{BUILD / 'runtime'}", "-lftpad",
         f"-Wl,-rpath,{BUILD / 'runtime'}"])
    return obj, exe


def parse_trace(out):
    lines = out.splitlines()
    events = [m.groups() for m in (re.match(r"event (\S+) ip=(\S+) parent=(\S+) arg0=(\d+)$", l)
                                   for l in lines) if m]
    return [(n, int(ip, 16), int(parent, 16), int(arg)) for n, ip, parent, arg in events]


def function_at(funcs, addr):
    return next(n for n, (a, size) in funcs.items() if a <= addr < a + size)


def check_trace(exe, out, base=None):
    """The trace is CALLS: each ip the symbol of its function, each parent_ip
    in its caller (in a PIE, both moved by the same load bias)."""
    assert "sites 6 enabled 6\n" in out, out
    assert "result 270\n" in out and "after 270 events=0 err=0\n" in out, out
    events = parse_trace(out)
    assert [(n, a) for n, _, _, a in events] == [(n, a) for n, _, a in CALLS], out
    with Image(exe) as image:
        funcs = image.functions()
        bias = events[0][1] - funcs["t_run"][0]
        for (name, ip, parent, _), (_, caller, _) in zip(events, CALLS):
            assert ip - bias == funcs[name][0], f"{name}: ip is not its symbol"
            assert function_at(funcs, parent - bias) == caller, f"{name}: parent_ip"


def aligned_entries(obj):
    """Functions of @obj whose entry is 8-aligned in any link."""
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        return {s.name for s in elf.get_section_by_name(".symtab").iter_symbols()
                if s["st_info"]["type"] == "STT_FUNC" and isinstance(s["st_shndx"], int)
                and s["st_value"] % 8 == 0 and elf.get_section(s["st_shndx"])["sh_addralign"] >= 8}


def check_x86_records(obj, exe, after, endbr, slot):
    """One record per traced function, in the layout libftpad accepts."""
    aligned = aligned_entries(obj)
    with Image(exe) as image:
        funcs = image.functions()
        sites = image.sites()
        assert sorted(s.name for s in sites) == sorted(TRACED_FUNCS)
        for s in sites:
            assert (s.entry, s.arch, s.site_len) == (funcs[s.name][0], ftpadtest.ARCH_X86_64, 5)
            assert bool(s.flags & FLAG_ENDBR) == endbr and s.flags & ~FLAG_ENDBR == 0
            assert s.site == s.entry + (4 if endbr else 0)
            assert image.read(s.site, 5) in SITE_NOPS, f"{s.name}: the site is not one 5-byte NOP"
            assert s.after == after
            assert bool(s.ops) == (s.name in aligned if slot is None else slot), s
            if s.ops:
                assert s.ops + 8 == s.entry and image.read(s.ops, 8) == SLOT_NOP8
        for table in ("__patchable_function_entries", "__mcount_loc"):
            assert image.elf.get_section_by_name(table) is None, f"{table} left in the program"


@pytest.mark.parametrize("variant", X86)
def test_x86_64_program_traces_exactly_its_functions(tmp_path, rmc, libftpad, variant):
    _, _, after, endbr, slot = X86[variant]
    obj, exe = build_x86(tmp_path, rmc, variant)
    assert run([rmc, "--check", obj]).stdout == f"{obj}: 6 sites checked, 0 violations\n"
    check_x86_records(obj, exe, after, endbr, slot)
    p = run([exe])
    assert p.stderr == "", "libftpad rejected a site"
    check_trace(exe, p.stdout)


@pytest.mark.parametrize("variant", ["gcc-pfe5", "clang-fentry"])
def test_ftpad_record_traces_it(tmp_path, rmc, libftpad, variant):
    """The same program traced without code: `ftpad record` preloads libftpad."""
    obj = compile_traced(tmp_path, [X86[variant][0]], X86[variant][1])
    convert(rmc, obj)
    main = tmp_path / "main.c"
    main.write_text("long t_run(long);\nint main(void) { return t_run(5) != 270; }\n")
    exe = tmp_path / "prog"
    run(["gcc", "-O2", main, obj, "-o", exe])
    trace = tmp_path / "trace.txt"
    run([BUILD / "bin" / "ftpad", "record", "--text", "-o", trace, "--", exe])
    lines = trace.read_text().splitlines()
    calls = [re.match(r"\S+-\d+ (\S+) <-(\S+)$", line).groups() for line in lines[:-1]]
    assert calls == [(name, caller) for name, caller, _ in CALLS]
    assert lines[-1] == "ftpad: 6 sites found, 6 sites enabled, 6 calls seen"


def obj_bytes(obj):
    """{function: bytes from its entry} of an object's .text sections."""
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        out = {}
        for sym in elf.get_section_by_name(".symtab").iter_symbols():
            if sym["st_info"]["type"] == "STT_FUNC" and isinstance(sym["st_shndx"], int):
                data = elf.get_section(sym["st_shndx"]).data()
                out[sym.name] = data[sym["st_value"]:sym["st_value"] + sym["st_size"]]
        return out


@pytest.mark.parametrize("variant, before, after", [
    # GCC's single-byte NOPs become one 5-byte NOP (and the rest, one NOP) ...
    ("gcc-pfe5", "9090909090", "0f1f440000"),
    ("gcc-pfe7", "90909090909090", "0f1f440000" "6690"),
    # ... clang's 8-byte NOP (its displacement varies) a 5-byte one and a 3-byte one ...
    ("clang-pfe8", "0f1f84..........", "0f1f440000" "0f1f00"),
    # ... call __fentry__, in either form, the 5-byte NOP.
    ("gcc-fentry", "ff1500000000", "0f1f440000" "90"),
    ("gcc-fentry-nopie", "e800000000", "0f1f440000"),
    # clang's own 5-byte NOP is a site libftpad accepts as it is.
    ("clang-pfe5", "0f1f440008", "0f1f440008"),
])
def test_x86_64_fixups(tmp_path, rmc, variant, before, after):
    obj = compile_traced(tmp_path, [X86[variant][0]], X86[variant][1])
    old = obj_bytes(obj)
    convert(rmc, obj)
    new = obj_bytes(obj)
    n = len(before) // 2
    for name in TRACED_FUNCS:
        assert re.fullmatch(before, old[name][:n].hex()), name
        assert new[name][:n].hex() == after, name
        assert new[name][n:] == old[name][n:], f"{name}: bytes after the pad changed"
    assert new["t_untraced"] == old["t_untraced"]


def relocations(obj):
    """[(section, offset, type, symbol name, symbol type)] of an object."""
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        symtab = elf.get_section_by_name(".symtab")
        out = []
        for sec in elf.iter_sections():
            if sec["sh_type"] not in ("SHT_RELA", "SHT_REL"):
                continue
            target = elf.get_section(sec["sh_info"]).name
            for r in sec.iter_relocations():
                sym = symtab.get_symbol(r["r_info_sym"])
                name = (elf.get_section(sym["st_shndx"]).name
                        if sym["st_info"]["type"] == "STT_SECTION" else sym.name)
                out.append((target, r["r_offset"], r["r_info_type"], name))
        return out


def test_fentry_calls_leave_no_reference(tmp_path, rmc):
    """The calls become R_X86_64_NONE: glibc defines __fentry__, and bfd
    refuses an R_X86_64_NONE against a dynamic symbol."""
    obj = compile_traced(tmp_path, ["gcc"], ["-pg", "-mfentry", NOTRACE_PG])
    convert(rmc, obj)
    rels = relocations(obj)
    assert not [r for r in rels if r[3] == "__fentry__"]
    nones = [r for r in rels if r[2] == 0 and r[0] in (".text", ".text.startup")]
    assert nones, "the calls' relocations are gone"
    # One of them per text section names its records (what gold needs).
    assert {(r[0], r[3]) for r in nones if r[3] == "__ftpad_sites"} == {(".text", "__ftpad_sites")}


def section_table(obj):
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        return [(s.name, s["sh_type"], s["sh_flags"], s["sh_link"], s["sh_size"])
                for s in elf.iter_sections()]


def test_records_follow_the_plugin_rules(tmp_path, rmc):
    """Per text section: __ftpad_sites SHF_LINK_ORDER to it and an R_*_NONE
    from it; GCC's one __patchable_function_entries is retired."""
    obj = compile_traced(tmp_path, ["gcc"], ["-ffunction-sections", "-fpatchable-function-entry=5",
                                             NOTRACE_PFE])
    convert(rmc, obj)
    secs = section_table(obj)
    names = [s[0] for s in secs]
    sites = [s for s in secs if s[0] == "__ftpad_sites"]
    texts = {names[s[3]] for s in sites}
    assert texts == {f".text.{n}" for n in TRACED_FUNCS}, "one record section per text section"
    for _, stype, flags, _, size in sites:
        assert flags & SH_FLAGS.SHF_LINK_ORDER and flags & SH_FLAGS.SHF_ALLOC
        assert size == 24
    refs = {(r[0], r[3]) for r in relocations(obj) if r[2] == 0}
    assert refs == {(t, "__ftpad_sites") for t in texts}
    for name, stype, flags, link, size in secs:
        assert name not in ("__patchable_function_entries", "__mcount_loc")
        if name == ".ftpad.retired":
            assert size == 0 and flags & SH_FLAGS.SHF_EXCLUDE


GC = {"nogc": ([], []), "gc": (["-ffunction-sections"], ["-Wl,--gc-sections"])}
CXX = {
    "g++": (["g++"], ["-fpatchable-function-entry=5"], []),
    "clang++": (["clang++-14"], ["-fpatchable-function-entry=5"], []),
    "aarch64-g++": (["aarch64-linux-gnu-g++-12"], ["-fpatchable-function-entry=2"],
                    ["qemu-aarch64"]),
}


@pytest.mark.parametrize("gc", GC)
@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("cxx", CXX)
def test_comdat_and_gc_with_every_linker(tmp_path, rmc, cxx, linker, gc):
    """GCC's own records make gold and lld refuse this program and bfd drop
    them (test_comdat.py); converted, every linker keeps exactly one record
    per surviving function."""
    compiler, pad, runner = CXX[cxx]
    cflags, lflags = GC[gc]
    objs = []
    for src in ("comdat_a.cc", "comdat_b.cc"):
        obj = tmp_path / src.replace(".cc", ".o")
        run([*compiler, "-O2", *pad, *cflags, "-c", SRC / src, "-o", obj])
        objs.append(obj)
    convert(rmc, *objs)
    exe = tmp_path / "prog"
    link = [*compiler, *lflags, f"-fuse-ld={linker}", *objs, "-o", exe]
    if runner:
        link += ["-static", "-B/usr/bin/"] if linker == "lld" else ["-static"]
    run(link)
    with Image(exe) as image:
        names = [s.name for s in image.sites()]
        assert len(names) == len(set(names)), f"duplicate records: {sorted(names)}"
        assert set(names) == surviving_functions(image)
        funcs = image.functions()
        assert all(funcs[s.name][0] == s.entry for s in image.sites())
        assert ("_Z8unused_bi" in names) == (gc == "nogc")
    assert run([*runner, exe]).stdout.strip() == "13"


def test_comdat_records_join_the_group(tmp_path, rmc):
    obj = tmp_path / "a.o"
    run(["g++", "-O2", "-fpatchable-function-entry=5", "-c", SRC / "comdat_a.cc", "-o", obj])
    convert(rmc, obj)
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        groups = [s for s in elf.iter_sections() if s["sh_type"] == "SHT_GROUP"]
        assert groups
        for g in groups:
            words = struct.unpack(f"<{g['sh_size'] // 4}I", g.data())
            members = [elf.get_section(i) for i in words[1:]]
            text = [m for m in members if m.name.startswith(".text")]
            sites = [m for m in members if m.name == "__ftpad_sites"]
            assert len(text) == 1 and len(sites) == 1, [m.name for m in members]
            assert elf.get_section(sites[0]["sh_link"]).name == text[0].name
            assert sites[0]["sh_flags"] & SH_FLAGS.SHF_GROUP
            assert "__ftpad_names" in [m.name for m in members]


def decode_addrsig(obj):
    """The names of the symbols clang's .llvm_addrsig lists."""
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        sec = elf.get_section_by_name(".llvm_addrsig")
        symtab = elf.get_section_by_name(".symtab")
        data, out, v, shift = sec.data(), [], 0, 0
        for b in data:
            v |= (b & 0x7f) << shift
            shift += 7
            if not b & 0x80:
                out.append(symtab.get_symbol(v).name)
                v = shift = 0
        return out


def test_clang_addrsig_follows_the_symbols(tmp_path, rmc):
    """New section symbols move the globals: .llvm_addrsig (lld --icf=safe)
    must still name the same symbols."""
    src = tmp_path / "addr.c"
    src.write_text("int f(void) { return 1; }\nint g(void) { return 2; }\n"
                   "int (*p)(void) = f;\nint (*q)(void) = g;\n")
    obj = tmp_path / "addr.o"
    run(["clang-14", "-O2", "-fpatchable-function-entry=5", "-c", src, "-o", obj])
    before = decode_addrsig(obj)
    assert set(before) >= {"f", "g"}
    convert(rmc, obj)
    assert decode_addrsig(obj) == before
    run(["clang-14", "-shared", "-fuse-ld=lld", "-Wl,--icf=safe", obj, "-o", tmp_path / "a.so"])


def build_a64(tmp_path, rmc, variant):
    cc, flags, *_ = A64[variant]
    obj = compile_traced(tmp_path, cc, flags)
    convert(rmc, obj)
    driver = tmp_path / "driver.o"
    run([A64_CC, "-O2", f"-I{INCLUDE}", "-c", DRIVER, "-o", driver])
    exe = tmp_path / "prog"
    run([A64_CC, "-static", *[f for f in flags if f.startswith("-mbranch")], driver, obj,
         A64_LIBDIR / "libftpad.a", "-o", exe])
    return obj, exe


def word(image, addr):
    return struct.unpack("<I", image.read(addr, 4))[0]


@pytest.mark.parametrize("variant", A64)
def test_aarch64_records_describe_the_nop_nop_layout(tmp_path, rmc, a64, variant):
    """-fpatchable-function-entry=2 gives NOP NOP: the record has no MOV_X9
    (libftpad writes the MOV into the first NOP) and its site is the second."""
    _, _, after, bti, slot = A64[variant]
    obj, exe = build_a64(tmp_path, rmc, variant)
    assert run([rmc, "--check", obj]).stdout == f"{obj}: 6 sites checked, 0 violations\n"
    aligned = aligned_entries(obj)
    with Image(exe) as image:
        funcs = image.functions()
        sites = image.sites()
        assert sorted(s.name for s in sites) == sorted(TRACED_FUNCS)
        for s in sites:
            assert (s.entry, s.arch, s.site_len) == (funcs[s.name][0], ftpadtest.ARCH_AARCH64, 4)
            assert s.flags == (FLAG_BTI if bti else 0), "never MOV_X9: nothing wrote the MOV"
            assert s.site == s.entry + (8 if bti else 4)
            assert word(image, s.site - 4) == A64_NOP and word(image, s.site) == A64_NOP
            assert s.after == after
            assert bool(s.ops) == (s.name in aligned if slot is None else slot), s
            if s.ops:
                assert s.ops + 8 == s.entry
                assert (word(image, s.ops), word(image, s.ops + 4)) == (A64_NOP, A64_NOP)


@pytest.mark.parametrize("variant", ["gcc-pfe2", "gcc-pfe2-bti", "gcc-pfe4,2", "clang-pfe2"])
def test_aarch64_program_traces_exactly_its_functions(tmp_path, rmc, a64, variant):
    """Needs libftpad to patch the NOP NOP layout: it writes
    `mov x9, x30` into the first NOP, then the BL into the second."""
    _, exe = build_a64(tmp_path, rmc, variant)
    p = run(["qemu-aarch64", "-L", A64_SYSROOT, exe])
    assert p.stderr == "", "libftpad rejected a site"
    check_trace(exe, p.stdout)


# ---- what it refuses, and how ----

def refused(tmp_path, rmc, obj, *expect):
    before = obj.read_bytes()
    p = convert(rmc, obj, check=False)
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith(f"{obj}: error: recordmcount-ng: "), p.stderr
    for text in expect:
        assert text in p.stderr, p.stderr
    assert obj.read_bytes() == before, "a failed run changed the object"
    assert not list(tmp_path.glob("*.rmc-*")), "temporary file left"


@pytest.mark.parametrize("cc", [["gcc"], [A64_CC]], ids=["x86_64", "aarch64"])
def test_pg_without_fentry_is_refused(tmp_path, rmc, cc):
    """-pg alone calls mcount after the prologue: libftpad's trampoline runs
    at the entry (ip, parent_ip and the stack are those of the entry), so
    such a call cannot become a site."""
    obj = compile_traced(tmp_path, cc, ["-pg", NOTRACE_PG])
    refused(tmp_path, rmc, obj, "follows the prologue (-pg without -mfentry)", "-pg -mfentry",
            "-fpatchable-function-entry")


@pytest.mark.parametrize("cc, flags, expect", [
    (["gcc"], ["-fpatchable-function-entry=4"], "4 bytes of NOPs after its entry; "
                                                  "a libftpad site needs 5"),
    (["gcc"], ["-fpatchable-function-entry=6,4"], "2 bytes of NOPs after its entry"),
    ([A64_CC], ["-fpatchable-function-entry=1"], "4 bytes of NOPs after its entry; "
                                                   "a libftpad site needs 8"),
], ids=["x86_64-4", "x86_64-6,4", "aarch64-1"])
def test_too_small_pads_are_refused(tmp_path, rmc, cc, flags, expect):
    obj = compile_traced(tmp_path, cc, [*flags, NOTRACE_PFE])
    refused(tmp_path, rmc, obj, expect)


@pytest.mark.parametrize("cc, flags", [
    (["i686-linux-gnu-gcc"], ["-fno-pie", "-pg", "-mfentry"]),
    ([A64_CC], ["-mbig-endian", "-fpatchable-function-entry=2"]),
], ids=["i386", "aarch64_be"])
def test_machines_without_records_are_refused(tmp_path, rmc, cc, flags):
    obj = compile_traced(tmp_path, cc, [*flags, NOTRACE_PG])
    refused(tmp_path, rmc, obj, "libftpad has records for x86_64 and little-endian aarch64 only")


def test_pads_and_fentry_together_are_refused(tmp_path, rmc):
    obj = compile_traced(tmp_path, ["gcc"], ["-pg", "-mfentry", "-fpatchable-function-entry=5",
                                             NOTRACE_PG])
    refused(tmp_path, rmc, obj, "is not at its function's entry")


def test_an_executable_is_refused(tmp_path, rmc, libftpad):
    _, exe = build_x86(tmp_path, rmc, "gcc-pfe5")
    refused(tmp_path, rmc, exe, "not a relocatable object")


# ---- writes: once, atomically, deterministically ----

def test_second_run_and_plugin_objects_are_left_alone(tmp_path, rmc, plugin):
    obj = compile_traced(tmp_path, ["gcc"], ["-fpatchable-function-entry=5", NOTRACE_PFE])
    convert(rmc, obj)
    plugin_obj = compile_traced(tmp_path, ["gcc"], [f"-fplugin={plugin}"], name="plugin.o")
    for o in (obj, plugin_obj):
        before = o.read_bytes()
        p = convert(rmc, o)
        assert p.stderr == f"{o}: warning: recordmcount-ng: __ftpad_sites already exists; left alone\n"
        assert o.read_bytes() == before


def test_output_is_deterministic_and_keeps_the_mode(tmp_path, rmc):
    obj = compile_traced(tmp_path, ["clang-14"], ["-ffunction-sections", "-pg", "-mfentry",
                                                  NOTRACE_PG])
    copy = tmp_path / "copy.o"
    shutil.copy(obj, copy)
    os.chmod(obj, 0o640)
    convert(rmc, obj, copy)
    assert obj.read_bytes() == copy.read_bytes()
    assert stat.S_IMODE(os.stat(obj).st_mode) == 0o640


def test_dry_run_writes_nothing(tmp_path, rmc):
    obj = compile_traced(tmp_path, ["gcc"], ["-fpatchable-function-entry=7", NOTRACE_PFE])
    before = obj.read_bytes()
    p = run([rmc, "--format=ftpad", "--dry-run", obj])
    assert p.stdout == f"{obj}: 6 functions to record in __ftpad_sites, 6 code ranges to rewrite\n"
    assert obj.read_bytes() == before


def test_objects_without_pads_are_unchanged(tmp_path, rmc):
    obj = compile_traced(tmp_path, ["gcc"], [])
    before = obj.read_bytes()
    assert convert(rmc, obj).stderr == ""
    assert obj.read_bytes() == before


def many_functions_asm(path, nfuncs):
    """x86_64: @nfuncs functions, each alone in its section, calling __fentry__."""
    path.write_text("".join(
        f'.section .text.f{i},"ax",@progbits\n.globl f{i}\n.type f{i},@function\n'
        f"f{i}:\n\tcall __fentry__\n\tret\n" for i in range(nfuncs)))
    obj = path.with_suffix(".o")
    run(["as", "--64", path, "-o", obj])
    return obj


def test_records_beyond_shn_loreserve(tmp_path, rmc):
    """20,000 text sections get 20,000 record sections and their relocation
    sections: the object passes 65,280 sections on the way, and the new
    section symbols need .symtab_shndx, which it did not have."""
    n = 20_000
    obj = many_functions_asm(tmp_path / "many.s", n)
    with open(obj, "rb") as f:
        assert ELFFile(f).num_sections() < 0xff00
    convert(rmc, obj)
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        assert elf["e_shnum"] == 0 and elf.num_sections() > 0xff00
        assert elf.get_section_by_name(".symtab_shndx") is not None
    lines = run([rmc, "--list", obj]).stdout.splitlines()
    assert len(lines) == n
    last = json.loads(lines[-1])
    assert (last["function"], last["section"], last["kind"]) == (f"f{n - 1}", f".text.f{n - 1}",
                                                                 "ftpad")
    lib = tmp_path / "many.so"
    run(["gcc", "-shared", "-fuse-ld=lld", obj, "-o", lib])
    with Image(lib) as image:
        funcs = image.functions()
        sites = image.elf.get_section_by_name("__ftpad_sites")
        assert sites.data_size == 24 * n
        entries = set()
        for off in range(0, sites.data_size, 24):
            entry = struct.unpack_from("<i", sites.data(), off)[0] + sites["sh_addr"] + off
            entries.add(entry)
        assert entries == {funcs[f"f{i}"][0] for i in range(n)}
