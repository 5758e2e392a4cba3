# SPDX-License-Identifier: MIT
"""recordmcount-ng on bad objects: errors, never crashes.

- recordmcount/fuzz/fuzz_elf.c, a libFuzzer target built here with clang-14
  and AddressSanitizer + UBSan, runs every mode over each input.  It starts
  from a corpus of real objects compiled here and runs for a bounded time;
  any crash, leak, undefined behaviour or timeout fails the test.
- Real objects, truncated and with header fields corrupted one at a time,
  go through the real binary in every mode: a clean error naming the file,
  or success, but never a signal; a failed write leaves the object as it
  was.  The same files then go through the sanitized fuzz target.

The corruptions include the inputs of the crashes fuzzing found (see
docs/recordmcount-ng.md "Robustness")."""
import io
import re
import shutil
import struct

import pytest
from elftools.elf.elffile import ELFFile

from ftpadtest import A64_PLUGIN, PLUGIN, ROOT, TEST_SRC, run

SOURCES = ROOT / "recordmcount"
PAD = ROOT / "pad"
TRACED = TEST_SRC / "recordmcount" / "ftpad_traced.c"
FUNCS = TEST_SRC / "recordmcount" / "funcs.c"
A64_CC = "aarch64-linux-gnu-gcc-12"
# Seconds of fuzzing: about 50,000 inputs on this machine, each through
# every mode.
FUZZ_SECONDS = 30
MODES = {"dropin": [], "ftpad": ["--format=ftpad"], "check": ["--check"], "list": ["--list"]}


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory):
    """The fuzz target, built from the same sources as the tool (but main.c)."""
    if shutil.which("clang-14") is None:
        pytest.fail("clang-14 is not installed: scripts/install-deps.sh installs it")
    out = tmp_path_factory.mktemp("fuzz") / "fuzz_elf"
    sources = [p for p in sorted(SOURCES.glob("**/*.c"))
               if p.name != "main.c" and p.parent.name != "fuzz"]
    sources += sorted(PAD.glob("*.c"))  # the pad definitions --check applies
    run(["clang-14", "-g", "-O1", "-fsanitize=fuzzer,address,undefined",
         "-fno-sanitize-recover=undefined", f"-I{PAD}", SOURCES / "fuzz" / "fuzz_elf.c",
         *sources, "-lelf", "-o", out])
    return out


# Small real objects from every producer: the seed corpus and the victims.
SEEDS = {
    "x86-pfe": (["gcc"], ["-fpatchable-function-entry=13,8", "-fcf-protection"], None),
    "x86-clang-pfe": (["clang-14"], ["-ffunction-sections", "-fpatchable-function-entry=5"], None),
    "x86-fentry": (["gcc"], ["-pg", "-mfentry", "-mrecord-mcount"], None),
    "x86-fentry-dropin": (["gcc"], ["-fno-pie", "-pg", "-mfentry"], []),
    "x86-ftpad": (["clang-14"], ["-pg", "-mfentry"], ["--format=ftpad"]),
    "x86-plugin": (["gcc"], [f"-fplugin={PLUGIN}", "-fcf-protection"], None),
    "i386-pg": (["i686-linux-gnu-gcc"], ["-fno-pie", "-pg"], None),
    "a64-pfe": ([A64_CC], ["-fpatchable-function-entry=4,2", "-mbranch-protection=standard"], None),
    "a64-pg-dropin": ([A64_CC], ["-pg"], []),
    "a64-plugin": ([A64_CC], [f"-fplugin={A64_PLUGIN}"], None),
    "a64be-pg": ([A64_CC], ["-mbig-endian", "-pg"], None),
}


@pytest.fixture(scope="module")
def seeds(tmp_path_factory, rmc):
    d = tmp_path_factory.mktemp("seeds")
    for name, (cc, flags, prep) in SEEDS.items():
        obj = d / f"{name}.o"
        run([*cc, "-O2", *flags, "-c", TRACED, "-o", obj])
        if prep is not None:
            run([rmc, *prep, obj])
    obj = d / "funcs-sections.o"
    run(["gcc", "-O2", "-fno-pie", "-pg", "-mfentry", "-ffunction-sections",
         "-fno-asynchronous-unwind-tables", "-c", FUNCS, "-o", obj])
    return d


def test_fuzz_the_elf_reader(tmp_path, fuzzer, seeds):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    p = run([fuzzer, f"-max_total_time={FUZZ_SECONDS}", "-seed=1", "-timeout=10",
             "-rss_limit_mb=2048", "-max_len=16384", "-print_final_stats=1", corpus, seeds],
            cwd=tmp_path, check=False)
    found = sorted(f.name for f in tmp_path.iterdir()
                   if f.name.split("-")[0] in ("crash", "leak", "timeout", "oom", "slow"))
    assert p.returncode == 0 and not found, f"{found}\n{p.stderr[-4000:]}"
    runs = int(re.search(r"stat::number_of_executed_units: (\d+)", p.stderr).group(1))
    print(f"fuzzed {runs} inputs in {FUZZ_SECONDS} s")
    assert runs > 1000, "the fuzzer hardly ran"


# ---- corrupted real objects ----

def field(elf_bytes, what):
    """(offset, size) in the file of a header field, for the corruptions."""
    f = ELFFile(io.BytesIO(elf_bytes))
    is64 = f.elfclass == 64
    shoff, shentsize = f["e_shoff"], f["e_shentsize"]
    ehdr = {"e_shoff": (0x28, 8) if is64 else (0x20, 4), "e_shentsize": (0x3a, 2) if is64 else (0x2e, 2),
            "e_shnum": (0x3c, 2) if is64 else (0x30, 2), "e_shstrndx": (0x3e, 2) if is64 else (0x32, 2)}
    if what in ehdr:
        return ehdr[what]
    index, name = what
    shdr = {"sh_name": (0, 4), "sh_type": (4, 4), "sh_offset": (24, 8) if is64 else (16, 4),
            "sh_size": (32, 8) if is64 else (20, 4), "sh_link": (40, 4) if is64 else (24, 4),
            "sh_info": (44, 4) if is64 else (28, 4), "sh_addralign": (48, 8) if is64 else (32, 4),
            "sh_entsize": (56, 8) if is64 else (36, 4)}[name]
    return shoff + index * shentsize + shdr[0], shdr[1]


def put(data, at, size, value, big_endian):
    fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}[size]
    struct.pack_into((">" if big_endian else "<") + fmt, data, at, value & ((1 << 8 * size) - 1))


def sections(data):
    f = ELFFile(io.BytesIO(bytes(data)))
    return [(i, s.name, s["sh_type"]) for i, s in enumerate(f.iter_sections())], f.little_endian


def variants(original):
    """(name, bytes, must_fail) of truncations and one-field corruptions."""
    out = []
    size = len(original)
    for cut in (1, 4, 16, 52, 63, 64, size // 4, size // 2, size - 64, size - 1):
        out.append((f"cut{cut}", original[:cut], True))
    secs, little = sections(original)
    is64 = original[4] == 2

    def corrupt(what, value, must_fail):
        data = bytearray(original)
        at, width = field(original, what)
        put(data, at, width, value, not little)
        out.append((f"{what}={value:#x}", bytes(data), must_fail))

    corrupt("e_shoff", size + 4096, True)
    corrupt("e_shentsize", 0x100, True)
    corrupt("e_shentsize", 16, True)          # libelf reads it, as something else
    corrupt("e_shnum", 0xffff, True)
    corrupt("e_shstrndx", 0xfff0, True)
    corrupt("e_shstrndx", next(i for i, _, t in secs if t == "SHT_SYMTAB"), True)  # not strings
    for index, name, stype in secs[1:]:
        if stype != "SHT_NOBITS":
            # far outside the file, and an overflow for offset + size
            corrupt((index, "sh_offset"), 0x2800000000000076 if is64 else 0xfffffff0, True)
            corrupt((index, "sh_size"), 0x7ffffff0, True)
        corrupt((index, "sh_addralign"), 1 << 35 if is64 else 1 << 30, True)
        if stype in ("SHT_REL", "SHT_RELA", "SHT_SYMTAB", "SHT_GROUP") or name.startswith("__"):
            for what in ("sh_link", "sh_info"):    # where they mean something
                for value in (0, 0xffffff):
                    corrupt((index, what), value, False)
        corrupt((index, "sh_type"), 0x6fff4c03, False)   # SHT_LLVM_ADDRSIG, with other data
        corrupt((index, "sh_entsize"), 0xfffffff, False)
        corrupt((index, "sh_name"), 0xffffff, False)
    # Relocations naming a symbol that does not exist; the first symbols
    # pointing at a section that does not exist.
    f = ELFFile(io.BytesIO(original))
    for sec in f.iter_sections():
        if sec["sh_type"] in ("SHT_RELA", "SHT_REL") and sec["sh_size"]:
            data = bytearray(original)
            info = sec["sh_offset"] + (8 if f.elfclass == 64 else 4)
            put(data, info + (4 if f.elfclass == 64 and little else 0), 4, 0x7ffffff0, not little)
            out.append((f"{sec.name}-r_sym", bytes(data), False))
        if sec["sh_type"] == "SHT_SYMTAB":
            data = bytearray(original)
            for i in range(1, min(8, sec.num_symbols())):
                at = sec["sh_offset"] + i * sec["sh_entsize"] + (6 if f.elfclass == 64 else 14)
                put(data, at, 2, 0xfeff, not little)
            out.append(("st_shndx", bytes(data), False))
    return out


@pytest.fixture(scope="module")
def victims(tmp_path_factory, seeds):
    d = tmp_path_factory.mktemp("victims")
    out = []
    for seed in ("x86-pfe", "x86-fentry-dropin", "x86-ftpad", "i386-pg", "a64-pfe", "a64be-pg"):
        original = (seeds / f"{seed}.o").read_bytes()
        for name, data, must_fail in variants(original):
            path = d / f"{seed}-{name.replace('/', '_').replace(' ', '')}.o"
            path.write_bytes(data)
            out.append((path, must_fail))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_bad_objects_are_clean_errors(tmp_path, rmc, victims, mode):
    checked = 0
    for path, must_fail in victims:
        work = tmp_path / path.name
        shutil.copy(path, work)
        before = work.read_bytes()
        p = run([rmc, *MODES[mode], work], check=False)
        assert p.returncode in (0, 1), f"{path.name}: {mode}: exit {p.returncode}\n{p.stderr}"
        if must_fail:
            assert p.returncode == 1, f"{path.name}: {mode} accepted it"
        if p.returncode == 1:
            assert f"{work}: error: recordmcount-ng: " in p.stderr, f"{path.name}: {p.stderr}"
            assert work.read_bytes() == before, f"{path.name}: {mode} changed a file it failed on"
        assert not list(tmp_path.glob("*.rmc-*")), f"{path.name}: temporary file left"
        work.unlink()
        checked += 1
    assert checked > 300


def test_bad_objects_under_the_sanitizers(tmp_path, fuzzer, victims):
    """The same objects through the fuzz target: no memory error that the
    plain binary survived by luck."""
    paths = [str(p) for p, _ in victims]
    for i in range(0, len(paths), 200):
        p = run([fuzzer, "-runs=1", *paths[i:i + 200]], cwd=tmp_path, check=False)
        assert p.returncode == 0, p.stderr[-4000:]


def moved_table(obj, to):
    """@obj with its section header table moved to offset @to (zeros before it)."""
    data = obj.read_bytes()
    f = ELFFile(io.BytesIO(data))
    old, size = f["e_shoff"], f["e_shnum"] * f["e_shentsize"]
    out = bytearray(data[:old]) + bytes(to - old) + data[old:old + size]
    struct.pack_into("<Q", out, 0x28, to)
    return bytes(out)


@pytest.mark.parametrize("mode", ["dropin", "ftpad"])
def test_new_section_headers_when_the_table_stays_put(tmp_path, rmc, mode):
    """libelf 0.188 writes the section header table from its copy of the old
    one, and reads past it, when the table's offset does not change although
    sections were added (found by fuzzing). An object whose table already
    sits where the new one goes got garbage headers for the new sections."""
    obj = tmp_path / "a.o"
    run(["gcc", "-O2", "-fno-pie", "-pg", "-mfentry", "-c", TRACED, "-o", obj])
    first = tmp_path / "first.o"
    shutil.copy(obj, first)
    run([rmc, *MODES[mode], first])
    with open(first, "rb") as f:
        new_shoff = ELFFile(f)["e_shoff"]
    crafted = tmp_path / "crafted.o"
    crafted.write_bytes(moved_table(obj, new_shoff))
    run([rmc, *MODES[mode], crafted])
    with open(crafted, "rb") as f:
        assert ELFFile(f)["e_shoff"] == new_shoff, "the case this test is about"
    assert run([rmc, "--check", crafted]).stdout == f"{crafted}: 7 sites checked, 0 violations\n"
    with open(first, "rb") as a, open(crafted, "rb") as b:
        want = [(s.name, s["sh_type"], s["sh_size"]) for s in ELFFile(a).iter_sections()]
        assert [(s.name, s["sh_type"], s["sh_size"]) for s in ELFFile(b).iter_sections()] == want
