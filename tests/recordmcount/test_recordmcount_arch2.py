# SPDX-License-Identifier: MIT
"""recordmcount-ng against Linux 6.12's scripts/recordmcount on powerpc,
powerpc64 (ELFv1 and ELFv2), s390x, sh4, sparc64 and i386, each object
built by Debian's cross compiler for that machine.

Linux's tool fixes nothing up on these machines (only x86, arm and arm64
get NOPs), so besides the same __mcount_loc entries and the same bytes in
every section, each test checks that the object's own sections and
relocations are exactly as the compiler left them, and that every record
lands on the instruction that machine's ftrace patches."""
import shutil
import struct

import pytest

import ftpadtest
from test_recordmcount import (SRC, TRACED, mcount_entries, reference, relocations,  # noqa: F401
                               section_facts, two_copies)

TRACED_SECTIONS = {".init.text", ".sched.text"}
UNTRACED = [".entry.text", ".noinstr.text"]


def word(data, offset, big):
    return int.from_bytes(data[offset:offset + 4], "big" if big else "little")


def bl_site(data, at, big):
    """powerpc: the record is an unrelocated `bl` (the kernel turns it into a nop)."""
    assert word(data, at, big) == 0x48000001, f"{word(data, at, big):#x} is no bl"


def bl_nop_site(data, at, big):
    """powerpc64 ELFv1: `bl` then the `nop` the linker may make the TOC restore."""
    bl_site(data, at, big)
    assert word(data, at + 4, big) == 0x60000000


def mflr_bl_site(data, at, big):
    """powerpc64 ELFv2 -mprofile-kernel: `mflr r0` right before the `bl`."""
    bl_site(data, at, big)
    assert word(data, at - 4, big) == 0x7c0802a6


def brasl_site(opcode):
    """s390x: Linux's adjust (-14) puts the record 12 bytes before the
    brasl's opcode with GCC 12's sequences (see arch/s390.c)."""
    def check(data, at, big):
        assert data[at + 12:at + 14] == opcode, data[at + 12:at + 14].hex()
    return check


def sh_literal_site(data, at, big):
    """sh: the record is the literal pool word holding mcount's address,
    loaded by a `mov.l @(disp,pc),r1` and called through `jmp/jsr @r1`."""
    assert at % 4 == 0 and word(data, at, big) == 0
    insns = [int.from_bytes(data[a:a + 2], "big" if big else "little") for a in range(at - 12, at, 2)]
    loads = [at - 12 + 2 * i for i, op in enumerate(insns)
             if op >> 8 == 0xd1 and ((at - 12 + 2 * i) & ~3) + 4 + 4 * (op & 0xff) == at]
    assert loads, "no mov.l of the literal into r1"
    assert {0x412b, 0x410b} & set(insns), "no jmp/jsr @r1"


def call_site(data, at, big):
    """sparc64: `call` (unrelocated); its delay slot holds a nop or whatever
    the compiler scheduled there, and runs whether or not the call does."""
    assert word(data, at, big) == 0x40000000


def i386_site(data, at, big):
    """i386 REL: `call` whose rel32 still holds the addend -4."""
    assert data[at:at + 5] == bytes.fromhex("e8fcffffff")


# name: (compiler, flags, site check).  The flags are Linux's for the
# recordmcount path of each machine, always with -fno-pie as Kbuild has.
# powerpc: Linux 6.12 builds PPC32 and ELFv2 with -fpatchable-function-entry
# (no recordmcount), or ELFv2 with -pg -mprofile-kernel and objtool --mcount;
# recordmcount is left with ELFv1's `-pg -mabi=elfv1 -mcall-aixdesc`.  The
# plain -pg objects of each are what recordmcount would meet.
TARGETS = {
    "powerpc": ("powerpc-linux-gnu-gcc", ["-pg"], bl_site),
    "powerpc-ffunction-sections": ("powerpc-linux-gnu-gcc", ["-pg", "-ffunction-sections"], bl_site),
    # -mcall-aixdesc: the call names the dot symbol `._mcount`
    "powerpc64-elfv1": ("powerpc64-linux-gnu-gcc",
                        ["-pg", "-mabi=elfv1", "-mcall-aixdesc", "-mcmodel=medium"], bl_nop_site),
    "powerpc64-elfv1-plain": ("powerpc64-linux-gnu-gcc", ["-pg"], bl_nop_site),
    "powerpc64-elfv1-ffunction-sections": (
        "powerpc64-linux-gnu-gcc",
        ["-pg", "-mabi=elfv1", "-mcall-aixdesc", "-mcmodel=medium", "-ffunction-sections"], bl_nop_site),
    "powerpc64le": ("powerpc64le-linux-gnu-gcc", ["-pg", "-mabi=elfv2", "-mcmodel=medium"], bl_nop_site),
    "powerpc64le-profile-kernel": ("powerpc64le-linux-gnu-gcc",
                                   ["-pg", "-mprofile-kernel", "-mcmodel=medium"], mflr_bl_site),
    "powerpc64le-ffunction-sections": ("powerpc64le-linux-gnu-gcc",
                                       ["-pg", "-mcmodel=medium", "-ffunction-sections"], bl_nop_site),
    "s390x": ("s390x-linux-gnu-gcc", ["-pg"], brasl_site(b"\xc0\xe5")),           # brasl %r14
    "s390x-fentry": ("s390x-linux-gnu-gcc", ["-pg", "-mfentry"], brasl_site(b"\xc0\x05")),  # brasl %r0
    "s390x-ffunction-sections": ("s390x-linux-gnu-gcc", ["-pg", "-ffunction-sections"],
                                 brasl_site(b"\xc0\xe5")),
    "sh4": ("sh4-linux-gnu-gcc", ["-pg"], sh_literal_site),
    "sh4-be": ("sh4-linux-gnu-gcc", ["-pg", "-mb"], sh_literal_site),
    "sh4-ffunction-sections": ("sh4-linux-gnu-gcc", ["-pg", "-ffunction-sections"], sh_literal_site),
    "sparc64": ("sparc64-linux-gnu-gcc", ["-pg", "-mcmodel=medlow", "-mcpu=ultrasparc"], call_site),
    "sparc64-ffunction-sections": ("sparc64-linux-gnu-gcc",
                                   ["-pg", "-mcmodel=medlow", "-ffunction-sections"], call_site),
    "i386-ffunction-sections": ("i686-linux-gnu-gcc", ["-pg", "-mfentry", "-ffunction-sections"],
                                i386_site),
}


def compile_obj(tmp_path, target, extra=()):
    cc, flags, _ = TARGETS[target]
    if shutil.which(cc) is None:
        pytest.fail(f"{cc} is not installed: scripts/install-deps.sh installs it")
    obj = tmp_path / "funcs.o"
    ftpadtest.run([cc, "-O2", "-fno-pie", *flags, *extra, "-c", SRC / "funcs.c", "-o", obj])
    return obj


def signed(offset, path):
    """Record offsets are modulo the address size; s390's go below zero."""
    bits = 64 if path.read_bytes()[4] == 2 else 32      # EI_CLASS: ELFCLASS64
    return offset - (1 << bits) if offset >= 1 << (bits - 1) else offset


@pytest.mark.parametrize("target", TARGETS)
def test_same_records_as_linux_and_no_fixups(tmp_path, reference, rmc, target):
    """The same records as Linux; no fixups (on i386 because the REL
    addend -4 sits in each call, elsewhere because Linux has none)."""
    obj = compile_obj(tmp_path, target)
    ours, theirs = two_copies(obj)
    ref = ftpadtest.run([reference, theirs])
    ng = ftpadtest.run([rmc, ours])
    assert ng.stdout == "" and ng.stderr == ""
    assert ref.stderr == ""

    entries = mcount_entries(ours)
    assert entries == mcount_entries(theirs)
    assert len(entries) == TRACED, entries
    secs = {sec for sec, _ in entries}
    assert secs >= TRACED_SECTIONS
    assert all(s.startswith(".text") or s in TRACED_SECTIONS for s in secs), secs
    assert section_facts(ours) == section_facts(theirs)

    # No fixups on these machines: every section the compiler wrote, and
    # every relocation, is as it was; only __mcount_loc and its
    # relocations (and their names) are new.
    before, after = section_facts(obj), section_facts(ours)
    changed = {after[i][0] for i in before if before[i] != after[i]}
    assert changed <= {".shstrtab"}, changed
    added = [after[i][0] for i in after if i not in before]
    assert added in (["__mcount_loc", ".rela__mcount_loc"], ["__mcount_loc", ".rel__mcount_loc"])
    assert relocations(ours) == relocations(obj)

    # Each record is the instruction (or, on sh, the literal) ftrace patches.
    big = ours.read_bytes()[5] == 2     # EI_DATA: ELFDATA2MSB
    data = {name: body for name, *_, body in after.values()}
    check = TARGETS[target][2]
    for sec, offset in entries:
        check(data[sec], signed(offset, ours), big)


def test_elfv1_calls_name_the_dot_symbol(tmp_path):
    """The premise of the powerpc64-elfv1 case: with Linux's ELFv1 flags the
    calls name `._mcount`, which both tools match by ignoring the '.'."""
    obj = compile_obj(tmp_path, "powerpc64-elfv1")
    assert {r[3] for r in relocations(obj) if r[3].endswith("_mcount")} == {"._mcount"}


WARN_TARGETS = ["powerpc", "powerpc64-elfv1", "powerpc64le", "s390x", "sh4", "sparc64"]


@pytest.mark.parametrize("target", WARN_TARGETS)
def test_warn_names_the_untraced_sections_and_changes_nothing_there(tmp_path, reference, rmc, target):
    """-w: Linux names each untraced section that calls mcount once and,
    having no NOP for the machine, stops looking at it."""
    obj = compile_obj(tmp_path, target)
    ours, theirs = two_copies(obj)
    ref = ftpadtest.run([reference, "-w", theirs])
    ng = ftpadtest.run([rmc, "-w", ours])
    ref_secs = [line.split()[1] for line in ref.stdout.splitlines()
                if line.endswith("has mcount callers being ignored")]
    prefix = f"{ours}: warning: recordmcount-ng: section "
    ng_secs = [line[len(prefix):].split()[0] for line in ng.stderr.splitlines()
               if line.startswith(prefix) and line.endswith(" has mcount callers being ignored")]
    assert ng_secs == ref_secs == UNTRACED
    assert len(ng.stderr.splitlines()) == len(UNTRACED)
    assert section_facts(ours) == section_facts(theirs)


def test_gcc_recorded_s390x_objects_are_left_alone(tmp_path, reference, rmc):
    """What Linux 6.12 really builds s390x with: GCC writes __mcount_loc
    itself (-mrecord-mcount) and NOPs the calls (-mnop-mcount).  Both tools
    see an object that already has .rela__mcount_loc and leave it alone."""
    obj = compile_obj(tmp_path, "s390x-fentry", extra=["-mrecord-mcount", "-mnop-mcount"])
    before = obj.read_bytes()
    ours, theirs = two_copies(obj)
    ref = ftpadtest.run([reference, theirs])
    ng = ftpadtest.run([rmc, ours])
    assert "__mcount_loc already exists" in ref.stderr
    assert ng.stderr == f"{ours}: warning: recordmcount-ng: __mcount_loc already exists; left alone\n"
    assert ours.read_bytes() == theirs.read_bytes() == before
    assert len(mcount_entries(ours)) == TRACED + len(UNTRACED)  # GCC records every -pg function


def test_s390_31bit_is_refused(tmp_path, reference, rmc):
    """Where we differ on purpose: Linux processes a 31-bit s390 object
    with relocation type 0 (R_390_NONE), a table that points nowhere; we
    say the machine is not served and leave the object as it was."""
    obj = compile_obj(tmp_path, "s390x", extra=["-m31"])
    ours, theirs = two_copies(obj)
    ftpadtest.run([reference, theirs])
    ref_types = {r[2] for r in relocations(theirs, skip=()) if r[0] == "__mcount_loc"}
    assert ref_types == {0}          # R_390_NONE: Linux's table is useless
    before = ours.read_bytes()
    ng = ftpadtest.run([rmc, ours], check=False)
    assert ng.returncode == 1
    assert ng.stderr == f"{ours}: error: recordmcount-ng: unsupported machine (e_machine 22, 32-bit)\n"
    assert ours.read_bytes() == before


# ---- more than 65,280 sections in a big-endian ELF32 object ----

def fast_mcount_entries(path):
    """(section name, offset) of each __mcount_loc relocation, read with
    struct alone: pyelftools and readelf take minutes over 65,000 sections.
    Handles both classes and byte orders, REL and RELA, SHN_XINDEX."""
    data = open(path, "rb").read()
    is64, end = data[4] == 2, ">" if data[5] == 2 else "<"
    if is64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shnum, shstrndx = struct.unpack_from(end + "HH", data, 0x3c)
        shdr, symfmt, symsize = end + "IIQQQQIIQQ", end + "IBBHQQ", 24
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shnum, shstrndx = struct.unpack_from(end + "HH", data, 0x30)
        shdr, symfmt, symsize = end + "IIIIIIIIII", end + "IIIBBH", 16
    first = struct.unpack_from(shdr, data, shoff)
    shnum = shnum or first[5]                     # sh_size of section 0
    shstrndx = first[6] if shstrndx == 0xffff else shstrndx   # its sh_link
    hsize = struct.calcsize(shdr)
    # name, type, flags, addr, offset, size, link, info, align, entsize
    secs = [struct.unpack_from(shdr, data, shoff + i * hsize) for i in range(shnum)]
    strtab_off = secs[shstrndx][4]

    def cstr(off):
        return data[off:data.index(b"\0", off)].decode()

    names = [cstr(strtab_off + s[0]) for s in secs]
    mloc = names.index("__mcount_loc")
    rel = next(s for s in secs if s[1] in (4, 9) and s[7] == mloc)      # SHT_RELA, SHT_REL
    symtab = secs[rel[6]]
    xndx = next((s for s in secs if s[1] == 18 and s[6] == rel[6]), None)  # SHT_SYMTAB_SHNDX
    out = []
    for at in range(rel[4], rel[4] + rel[5], rel[9]):
        if is64:
            r_offset, info = struct.unpack_from(end + "QQ", data, at)
            sym = info >> 32
        else:
            r_offset, info = struct.unpack_from(end + "II", data, at)
            sym = info >> 8
        addend = (struct.unpack_from(end + ("q" if is64 else "i"), data, at + (16 if is64 else 8))[0]
                  if rel[1] == 4 else
                  struct.unpack_from(end + ("Q" if is64 else "I"), data, secs[mloc][4] + r_offset)[0])
        fields = struct.unpack_from(symfmt, data, symtab[4] + sym * symsize)
        value = fields[4] if is64 else fields[1]
        shndx = fields[3] if is64 else fields[5]
        if shndx == 0xffff:
            shndx, = struct.unpack_from(end + "I", data, xndx[4] + 4 * sym)
        out.append((names[shndx], value + addend))
    return out


MANY = 32_800   # functions, each in its own section: more than 65,280 sections


def many_sections_ppc_asm(path, nfuncs):
    """powerpc assembly: @nfuncs functions, each alone in its section, each
    `mflr r0; bl _mcount; blr`."""
    path.write_text("".join(
        f'.section .text.f{i},"ax",@progbits\n.globl f{i}\n.type f{i},@function\n'
        f"f{i}:\n\tmflr 0\n\tbl _mcount\n\tblr\n" for i in range(nfuncs)))
    obj = path.with_suffix(".o")
    ftpadtest.run(["powerpc-linux-gnu-as", path, "-o", obj])
    return obj


def test_more_sections_than_shn_loreserve_big_endian_elf32(tmp_path, reference, rmc):
    """ELF32, big-endian, SHN_XINDEX everywhere.  Where we differ on
    purpose: Linux 6.12 finds the symbol tables by comparing sh_type without
    swapping it, so on a little-endian host it has no SHT_SYMTAB_SHNDX for
    a big-endian object and crashes on the first SHN_XINDEX symbol."""
    obj = many_sections_ppc_asm(tmp_path / "many.s", MANY)
    ours, theirs = two_copies(obj)
    ref = ftpadtest.run([reference, theirs], check=False)
    assert ref.returncode != 0
    ftpadtest.run([rmc, ours])
    data = ours.read_bytes()
    assert data[4:6] == b"\x01\x02"                       # ELFCLASS32, ELFDATA2MSB
    assert struct.unpack_from(">H", data, 0x30)[0] == 0   # e_shnum in section 0
    assert fast_mcount_entries(ours) == [(f".text.f{i}", 4) for i in range(MANY)]
