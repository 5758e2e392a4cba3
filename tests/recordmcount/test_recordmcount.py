# SPDX-License-Identifier: MIT
"""recordmcount-ng processing real objects, compared with Linux 6.12's own
scripts/recordmcount on the same objects.

The reference is built once from Debian's linux-source-6.12 into a
version-keyed cache outside the clone.  Each compiler below builds
src/recordmcount/funcs.c; both tools process a copy; the __mcount_loc
entries (resolved to section and offset), every section header and every
section's bytes (so every NOP fixup and R_*_NONE rewrite) must agree."""
import os
import re
import shutil
import pathlib
import subprocess
import tarfile
import tempfile

from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

import pytest

import ftpadtest

TARBALL = pathlib.Path("/usr/src/linux-source-6.12.tar.xz")
CACHE = pathlib.Path(os.environ.get("FTPAD_CACHE", "/var/cache/ftpad")) / "linux-6.12-recordmcount"
SOURCES = ("scripts/recordmcount.c", "scripts/recordmcount.h")


def reference_recordmcount():
    """Path of the reference binary, building it on first use.  The build
    happens in a temporary directory renamed into place, so concurrent test
    runs never see half a build.  Only the two source files are extracted;
    none of their code enters this repository."""
    binary = CACHE / "recordmcount"
    if binary.exists():
        return binary
    if not TARBALL.exists():
        raise AssertionError(f"{TARBALL} is missing: run scripts/install-deps.sh (linux-source-6.12)")
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="linux-6.12-recordmcount.", dir=CACHE.parent))
    wanted = {f"linux-source-6.12/{s}" for s in SOURCES}
    with tarfile.open(TARBALL, "r:xz") as tar:
        for member in tar:          # stream: the tarball is 150 MB
            if member.name in wanted:
                (work / pathlib.PurePath(member.name).name).write_bytes(
                    tar.extractfile(member).read())
                wanted.discard(member.name)
                if not wanted:
                    break
    assert not wanted, f"{TARBALL} lacks {sorted(wanted)}"
    # Kbuild's own flags for this hostprog (scripts/.recordmcount.cmd).
    ftpadtest.run(["gcc", "-Wall", "-O2", "-fomit-frame-pointer", "-std=gnu11",
                   "-o", work / "recordmcount", work / "recordmcount.c"])
    os.chmod(work, 0o755)           # mkdtemp made it private
    try:
        os.rename(work, CACHE)
    except OSError:                 # someone else finished first
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return binary


class SectionOf:
    """The name of the section a symbol of @symtab is defined in.  SHN_XINDEX
    is resolved here: pyelftools 0.29 resolves it wrongly."""

    def __init__(self, elf, symtab):
        self.elf, self.symtab = elf, symtab
        self.endian = "little" if elf.little_endian else "big"
        self.data = symtab.data()
        self.names = [s.name for s in elf.iter_sections()]
        self.xndx = next((s.data() for s in elf.iter_sections()
                          if s["sh_type"] == "SHT_SYMTAB_SHNDX"
                          and self.names[s["sh_link"]] == symtab.name), None)

    def __call__(self, index):
        at = index * self.symtab["sh_entsize"] + (6 if self.elf.elfclass == 64 else 14)
        ndx = int.from_bytes(self.data[at:at + 2], self.endian)   # st_shndx
        if ndx == 0xffff:
            ndx = int.from_bytes(self.xndx[4 * index:4 * index + 4], self.endian)
        elif ndx >= 0xff00:
            return self.symtab.get_symbol(index)["st_shndx"]
        return self.names[ndx]


def mcount_entries(path):
    """__mcount_loc entries as (section name, offset) pairs, in order; the
    REL addend is read from the section word, the RELA one from the entry."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        table = elf.get_section_by_name("__mcount_loc")
        if table is None:
            return []
        rels = [s for s in elf.iter_sections()
                if isinstance(s, RelocationSection)
                and elf.get_section(s["sh_info"]).name == "__mcount_loc"]
        assert len(rels) == 1, f"{path}: {len(rels)} relocation sections for __mcount_loc"
        rel = rels[0]
        symtab = elf.get_section(rel["sh_link"])
        section_of = SectionOf(elf, symtab)
        data = table.data()
        word = elf.elfclass // 8
        out = []
        for r in rel.iter_relocations():
            sym = symtab.get_symbol(r["r_info_sym"])
            if r.is_RELA():
                addend = r["r_addend"]
            else:
                addend = int.from_bytes(data[r["r_offset"]:r["r_offset"] + word],
                                        "little" if elf.little_endian else "big")
            out.append((section_of(r["r_info_sym"]),
                        (sym["st_value"] + addend) % (1 << elf.elfclass)))
        return out


def section_facts(path):
    """Every section: its header fields that do not depend on file layout,
    and its bytes.  Two tools that made the same change agree on these."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        out = {}
        for i, s in enumerate(elf.iter_sections()):
            h = s.header
            out[i] = (s.name, h["sh_type"], h["sh_flags"], h["sh_size"], h["sh_link"],
                      h["sh_info"], h["sh_addralign"], h["sh_entsize"],
                      b"" if h["sh_type"] == "SHT_NOBITS" else s.data())
        return out


def relocations(path, skip=("__mcount_loc",)):
    """Every relocation outside __mcount_loc as (target section, offset, type,
    symbol name or section, addend): what a relocation means, whatever the
    symbol indexes."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        out, resolvers = [], {}
        for s in elf.iter_sections():
            if not isinstance(s, RelocationSection):
                continue
            target = elf.get_section(s["sh_info"]).name
            if target in skip:
                continue
            if s["sh_link"] not in resolvers:
                resolvers[s["sh_link"]] = SectionOf(elf, elf.get_section(s["sh_link"]))
            section_of = resolvers[s["sh_link"]]
            symtab = section_of.symtab
            for r in s.iter_relocations():
                sym = symtab.get_symbol(r["r_info_sym"])
                what = sym.name or section_of(r["r_info_sym"])
                out.append((target, r["r_offset"], r["r_info_type"], what,
                            r["r_addend"] if r.is_RELA() else None))
        return out


SRC = ftpadtest.TEST_SRC / "recordmcount"

# name: (compiler, flags, how many calls in .entry.text/.noinstr.text become NOPs)
# i386 objects are REL: the call's rel32 holds the addend -4, so Linux (and
# we) leave those calls alone.  Always -fno-pie, as Kbuild: a PIE call goes
# through the GOT and is no call site recordmcount understands.
TARGETS = {
    "x86_64-fentry": ("gcc", ["-fno-pie", "-pg", "-mfentry"], 2),
    "x86_64-mcount": ("gcc", ["-fno-pie", "-pg"], 2),
    "x86_64-ffunction-sections": ("gcc", ["-fno-pie", "-pg", "-mfentry", "-ffunction-sections"], 2),
    # Debian's i686 cross compiler, never `gcc -m32`: that needs gcc-multilib,
    # which would remove every cross compiler.
    "i386-fentry": ("i686-linux-gnu-gcc", ["-fno-pie", "-pg", "-mfentry"], 0),
    "i386-mcount": ("i686-linux-gnu-gcc", ["-fno-pie", "-pg"], 0),
    "aarch64": ("aarch64-linux-gnu-gcc", ["-pg"], 2),
    "aarch64-be": ("aarch64-linux-gnu-gcc", ["-pg", "-mbig-endian"], 2),
    "aarch64-ffunction-sections": ("aarch64-linux-gnu-gcc", ["-pg", "-ffunction-sections"], 2),
    # arm: `push {lr}; bl __gnu_mcount_nc`, ARM (EABI's default armv5te, and
    # armhf -marm) and Thumb-2 (armhf's default), both byte orders.
    "arm-eabi": ("arm-linux-gnueabi-gcc", ["-pg"], 2),
    "arm-eabi-be": ("arm-linux-gnueabi-gcc", ["-pg", "-mbig-endian"], 2),
    "arm-eabi-ffunction-sections": ("arm-linux-gnueabi-gcc", ["-pg", "-ffunction-sections"], 2),
    "armhf-arm": ("arm-linux-gnueabihf-gcc", ["-pg", "-marm"], 2),
    "armhf-arm-ffunction-sections": ("arm-linux-gnueabihf-gcc", ["-pg", "-marm", "-ffunction-sections"], 2),
    "armhf-thumb2": ("arm-linux-gnueabihf-gcc", ["-pg", "-mthumb"], 2),
    "armhf-thumb2-be": ("arm-linux-gnueabihf-gcc", ["-pg", "-mthumb", "-mbig-endian"], 2),
    "armhf-thumb2-ffunction-sections": ("arm-linux-gnueabihf-gcc", ["-pg", "-mthumb", "-ffunction-sections"], 2),
}

# The calls funcs.c makes in traced sections: global_fn, static_fn, weak_fn
# and caller in .text (or .text.<name>), init_fn, sched_fn.  notrace_fn has none.
TRACED = 6


@pytest.fixture(scope="module")
def reference():
    return reference_recordmcount()


def compile_obj(tmp_path, target, extra=(), src=SRC / "funcs.c", name="funcs.o"):
    cc, flags, _ = TARGETS[target]
    if shutil.which(cc) is None:
        pytest.fail(f"{cc} is not installed: scripts/install-deps.sh installs it")
    obj = tmp_path / name
    ftpadtest.run([cc, "-O2", *flags, *extra, "-c", src, "-o", obj])
    return obj


def two_copies(obj):
    ours, theirs = obj.with_suffix(".ng.o"), obj.with_suffix(".ref.o")
    shutil.copyfile(obj, ours)
    shutil.copyfile(obj, theirs)
    return ours, theirs


def none_relocs(path):
    return [r for r in relocations(path) if r[2] == 0]


@pytest.mark.parametrize("target", TARGETS)
def test_same_records_and_fixups_as_linux(tmp_path, reference, rmc, target):
    obj = compile_obj(tmp_path, target)
    ours, theirs = two_copies(obj)
    ref = ftpadtest.run([reference, theirs])
    ng = ftpadtest.run([rmc, ours])
    assert ng.stdout == "" and ng.stderr == ""
    assert ref.stderr == ""

    entries = mcount_entries(ours)
    assert entries == mcount_entries(theirs)
    assert len(entries) == TRACED, entries
    assert {sec for sec, _ in entries} >= {".init.text", ".sched.text"}
    assert section_facts(ours) == section_facts(theirs)
    # The comparison above covers the fixups; this makes sure there were some.
    assert len(none_relocs(ours)) == TARGETS[target][2]
    # Nothing but the fixups changed the object's own relocations.
    before = relocations(obj)
    assert len(relocations(ours)) == len(before)


@pytest.mark.parametrize("target", ["x86_64-fentry", "aarch64", "armhf-thumb2"])
def test_warn_names_the_untraced_sections(tmp_path, reference, rmc, target):
    obj = compile_obj(tmp_path, target)
    ours, theirs = two_copies(obj)
    ref = ftpadtest.run([reference, "-w", theirs])
    ng = ftpadtest.run([rmc, "-w", ours])
    ref_secs = re.findall(r"Section (\S+) has mcount callers being ignored", ref.stdout)
    ng_secs = re.findall(rf"^{re.escape(str(ours))}: warning: recordmcount-ng: "
                         r"section (\S+) has mcount callers being ignored$", ng.stderr, re.M)
    assert ng_secs == ref_secs == [".entry.text", ".noinstr.text"]
    assert section_facts(ours) == section_facts(theirs)


def test_second_run_leaves_the_object_alone(tmp_path, rmc):
    obj = compile_obj(tmp_path, "x86_64-fentry")
    ftpadtest.run([rmc, obj])
    once = obj.read_bytes()
    inode = obj.stat().st_ino
    p = ftpadtest.run([rmc, obj])
    assert p.stderr == f"{obj}: warning: recordmcount-ng: __mcount_loc already exists; left alone\n"
    assert obj.read_bytes() == once
    assert obj.stat().st_ino == inode  # not even rewritten with the same bytes
    assert sorted(x.name for x in tmp_path.iterdir()) == ["funcs.o"]  # no temp file left


def test_output_is_deterministic_and_keeps_the_mode(tmp_path, rmc):
    obj = compile_obj(tmp_path, "aarch64-be")
    ours, again = two_copies(obj)
    os.chmod(ours, 0o640)
    ftpadtest.run([rmc, ours, again])
    assert ours.read_bytes() == again.read_bytes()
    assert (ours.stat().st_mode & 0o777) == 0o640


def test_dry_run_writes_nothing(tmp_path, rmc):
    obj = compile_obj(tmp_path, "x86_64-fentry")
    before = obj.read_bytes()
    p = ftpadtest.run([rmc, "--dry-run", obj])
    assert p.stdout == f"{obj}: {TRACED} call sites to record, 2 calls to turn into NOPs\n"
    assert obj.read_bytes() == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["funcs.o"]


def test_objects_without_calls_are_unchanged(tmp_path, reference, rmc):
    obj = compile_obj(tmp_path, "x86_64-fentry", extra=["-fno-pie"])
    plain = tmp_path / "plain.o"
    ftpadtest.run(["gcc", "-O2", "-c", SRC / "funcs.c", "-o", plain])  # no -pg
    before = plain.read_bytes()
    ftpadtest.run([reference, plain])
    assert plain.read_bytes() == before
    inode = plain.stat().st_ino
    p = ftpadtest.run([rmc, plain])
    assert p.stderr == "" and plain.read_bytes() == before
    assert plain.stat().st_ino == inode  # nothing to do: nothing written


def test_weak_function_alone_in_its_section(tmp_path, reference, rmc):
    """-ffunction-sections without unwind tables: the assembler drops the
    unused section symbol of .text.weak_fn and its only symbol is weak.
    Linux fails; we add the section symbol, as objtool does, and every other
    relocation keeps its meaning."""
    obj = compile_obj(tmp_path, "x86_64-ffunction-sections", extra=["-fno-asynchronous-unwind-tables"])
    ours, theirs = two_copies(obj)
    ref = ftpadtest.run([reference, theirs], check=False)
    assert ref.returncode == 1
    assert "Cannot find symbol for section" in ref.stderr and ".text.weak_fn" in ref.stderr

    ftpadtest.run([rmc, ours])
    entries = mcount_entries(ours)
    assert len(entries) == TRACED
    assert (".text.weak_fn", 0) in entries
    # Symbols renumbered, meaning kept: same targets, symbols and addends,
    # and the same types except the two calls turned into NOPs.
    after, before = relocations(ours), relocations(obj)
    assert [r[:2] + r[3:] for r in after] == [r[:2] + r[3:] for r in before]
    assert sum(a[2] != b[2] for a, b in zip(after, before)) == len(none_relocs(ours)) == 2
    with open(ours, "rb") as f:
        elf = ELFFile(f)
        symtab = elf.get_section_by_name(".symtab")
        section_of = SectionOf(elf, symtab)
        secsyms = [s for i, s in enumerate(symtab.iter_symbols())
                   if s["st_info"]["type"] == "STT_SECTION" and section_of(i) == ".text.weak_fn"]
        assert len(secsyms) == 1 and secsyms[0]["st_info"]["bind"] == "STB_LOCAL"
        locals_ = [s["st_info"]["bind"] == "STB_LOCAL" for s in symtab.iter_symbols()]
        assert locals_ == sorted(locals_, reverse=True)  # locals first
        assert symtab["sh_info"] == sum(locals_)
    # And the linker agrees: the object still links.
    ftpadtest.run(["ld", "-r", ours, "-o", tmp_path / "linked.o"])


@pytest.mark.parametrize("content, reason", [
    (b"not an object", "not an ELF file"),
    (b"\x7fELF\x02\x09" + bytes(58), "unrecognized ELF data encoding 9"),
    (b"\x7fELF\x07\x01" + bytes(58), "unrecognized ELF class 7"),
    (b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x01\x00\x3e\x00", "truncated ELF file"),
], ids=["garbage", "data-encoding", "class", "truncated"])
def test_bad_input_is_an_error_and_untouched(tmp_path, rmc, content, reason):
    bad = tmp_path / "bad.o"
    bad.write_bytes(content)
    p = ftpadtest.run([rmc, bad], check=False)
    assert p.returncode == 1
    assert p.stderr == f"{bad}: error: recordmcount-ng: {reason}\n"
    assert bad.read_bytes() == content
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.o"]


def _patch_header(obj, offset, value, size=2):
    data = bytearray(obj.read_bytes())
    data[offset:offset + size] = value.to_bytes(size, "little")
    obj.write_bytes(bytes(data))


@pytest.mark.parametrize("offset, value, reason", [
    (16, 2, "not a relocatable object (ET_REL)"),            # e_type = ET_EXEC
    (18, 2, "unsupported machine (e_machine 2, 64-bit)"),    # e_machine = EM_SPARC
])
def test_wrong_kind_of_object(tmp_path, reference, rmc, offset, value, reason):
    obj = compile_obj(tmp_path, "x86_64-fentry")
    _patch_header(obj, offset, value)
    before = obj.read_bytes()
    p = ftpadtest.run([rmc, obj], check=False)
    assert p.returncode == 1
    assert p.stderr == f"{obj}: error: recordmcount-ng: {reason}\n"
    assert obj.read_bytes() == before
    assert ftpadtest.run([reference, obj], check=False).returncode == 1  # Linux agrees


def test_every_file_is_processed_after_a_failure(tmp_path, rmc):
    good = compile_obj(tmp_path, "x86_64-fentry")
    missing = tmp_path / "missing.o"
    p = ftpadtest.run([rmc, missing, good], check=False)
    assert p.returncode == 1
    assert p.stderr.startswith(f"{missing}: error: recordmcount-ng: cannot open: ")
    assert len(mcount_entries(good)) == TRACED


def test_ftrace_o_is_skipped(tmp_path, rmc):
    """kernel/trace/ftrace.o references mcount without calling it: Linux
    skips any path ending in /ftrace.o, and so do we."""
    (tmp_path / "trace").mkdir()
    obj = compile_obj(tmp_path / "trace", "x86_64-fentry", name="ftrace.o")
    before = obj.read_bytes()
    p = ftpadtest.run([rmc, obj])
    assert p.stderr == "" and obj.read_bytes() == before


def many_sections_asm(path, nfuncs, last_weak=False):
    """x86_64 assembly: @nfuncs functions, each alone in its section with a
    call to __fentry__, so the object has 2 * @nfuncs + a few sections."""
    parts = []
    for i in range(nfuncs):
        bind = ".weak" if last_weak and i == nfuncs - 1 else ".globl"
        parts.append(f'.section .text.f{i},"ax",@progbits\n{bind} f{i}\n.type f{i},@function\n'
                     f"f{i}:\n\tcall __fentry__\n\tret\n")
    path.write_text("".join(parts))
    obj = path.with_suffix(".o")
    ftpadtest.run(["as", "--64", path, "-o", obj])
    return obj


# Enough functions for more than 65,280 sections: e_shnum, e_shstrndx and
# st_shndx all overflow into SHN_XINDEX.
MANY = 32_800


def test_more_sections_than_shn_loreserve(tmp_path, reference, rmc):
    obj = many_sections_asm(tmp_path / "many.s", MANY)
    ours, theirs = two_copies(obj)
    ftpadtest.run([reference, theirs])
    ftpadtest.run([rmc, ours])
    entries = mcount_entries(ours)
    assert len(entries) == MANY and entries[-1] == (f".text.f{MANY - 1}", 0)
    assert entries == mcount_entries(theirs)
    with open(ours, "rb") as f:
        assert ELFFile(f)["e_shnum"] == 0   # the count lives in section 0


def test_new_section_symbol_beyond_shn_loreserve(tmp_path, reference, rmc):
    """The weak-function case again, for a section whose index needs
    SHN_XINDEX in the symbol table: Linux fails, we extend .symtab_shndx."""
    obj = many_sections_asm(tmp_path / "weak.s", MANY, last_weak=True)
    ours, theirs = two_copies(obj)
    ref = ftpadtest.run([reference, theirs], check=False)
    assert ref.returncode == 1 and "Cannot find symbol for section" in ref.stderr
    ftpadtest.run([rmc, ours])
    entries = mcount_entries(ours)
    assert len(entries) == MANY and entries[-1] == (f".text.f{MANY - 1}", 0)
    assert relocations(ours) == relocations(obj)
    p = ftpadtest.run(["readelf", "-sW", ours])
    assert "Warning" not in p.stderr and "Warning" not in p.stdout
