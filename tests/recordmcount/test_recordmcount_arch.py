# SPDX-License-Identifier: MIT
"""recordmcount-ng on mips, loongarch and (one case) arm objects, against
Linux 6.12's own scripts/recordmcount (built by test_recordmcount.py's
reference_recordmcount).  The plain arm comparisons are in
test_recordmcount.py's TARGETS: there the two tools agree byte for byte.

mips: Debian's cross compilers build src/recordmcount/funcs.c with the
kernel's mips flags, 32- and 64-bit, both byte orders, with and without
-mlong-calls (what Kbuild gives modules: the lui/addiu/jalr long call) and
-ffunction-sections.  Two differences from Linux are deliberate
(docs/recordmcount-ng.md) and checked here rather than hidden:
  - Linux carries the "previous mcount relocation" of its fake-call check
    from one section to the next and so drops real call sites; we look
    within the section only;
  - Linux leaves mcount calls in untraced sections alone on mips; we turn
    them into the disabled forms the kernel itself uses (a NOP over `jal`,
    `b 1f` over a long call), as it does on x86, arm and arm64.
A program built the same way then runs under qemu-user, before and after.

loongarch: no cross compiler exists here, so the objects are written by
hand (write_elf below) with the psABI's relocations, and both tools run on
them."""
import shutil
import struct

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

import ftpadtest
from test_recordmcount import (SRC, TRACED, mcount_entries, reference,  # noqa: F401
                               section_facts, two_copies)

# The kernel's mips code flags (arch/mips/Makefile): no PIC, no $gp.
MIPS_KFLAGS = ["-O2", "-pg", "-G", "0", "-mno-abicalls", "-fno-pic", "-ffreestanding"]

# name: (compiler, flags).  Each also runs with -ffunction-sections.
MIPS_TARGETS = {
    "mips32-be": ("mips-linux-gnu-gcc", []),
    "mips32-be-long-calls": ("mips-linux-gnu-gcc", ["-mlong-calls"]),
    "mips32-le": ("mipsel-linux-gnu-gcc", []),
    "mips32-le-long-calls": ("mipsel-linux-gnu-gcc", ["-mlong-calls"]),
    "mips64-le": ("mips64el-linux-gnuabi64-gcc", []),
    # -msym32, as Kbuild uses for kernels loaded in CKSEG0: lui/daddiu
    "mips64-le-long-calls": ("mips64el-linux-gnuabi64-gcc", ["-msym32", "-mlong-calls"]),
    # without it, _mcount's address takes four relocations, one word apart
    "mips64-le-long-calls-nosym32": ("mips64el-linux-gnuabi64-gcc", ["-mlong-calls"]),
    "mips64-be": ("mips64-linux-gnuabi64-gcc", []),
    "mips64-be-long-calls": ("mips64-linux-gnuabi64-gcc", ["-msym32", "-mlong-calls"]),
    "mips64-be-abi64": ("mips-linux-gnu-gcc", ["-mabi=64"]),
    # o64 (ELF32, 64-bit registers): its delay-slot push is a daddiu
    "mips-o64": ("mips64-linux-gnuabi64-gcc", ["-mabi=o64"]),
}

UNTRACED = (".entry.text", ".noinstr.text")
R_MIPS_NONE, R_MIPS_26, R_MIPS_HI16, R_MIPS_HIGHEST = 0, 4, 5, 29
MIPS_NOP = 0
MIPS_JALR_V1 = 0x0060f809
MIPS_LUI_V1 = 0x3c030000
MIPS_SP_PUSH = (0x27bdfff8, 0x67bdfff8)    # addiu sp,sp,-8 (o32); daddiu sp,sp,-8 (o64)


def need(tool):
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is not installed: scripts/install-deps.sh installs it")
    return tool


def compile_mips(tmp_path, target, extra=(), src=SRC / "funcs.c", name="funcs.o"):
    cc, flags = MIPS_TARGETS[target]
    obj = tmp_path / name
    ftpadtest.run([need(cc), *MIPS_KFLAGS, *flags, *extra, "-c", src, "-o", obj])
    return obj


def mips_relocs(path):
    """Every relocation as a dict: section (its target), offset, types
    (r_type, r_type2, r_type3: MIPS64 packs three; pyelftools decodes that
    layout), symbol name (or its section's name) and addend."""
    out = []
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for s in elf.iter_sections():
            if not isinstance(s, RelocationSection):
                continue
            target = elf.get_section(s["sh_info"]).name
            symtab = elf.get_section(s["sh_link"])
            for r in s.iter_relocations():
                sym = symtab.get_symbol(r["r_info_sym"])
                name = sym.name
                if not name and sym["st_info"]["type"] == "STT_SECTION":
                    name = elf.get_section(sym["st_shndx"]).name
                out.append({"section": target, "offset": r["r_offset"],
                            "types": (r["r_info_type"], r.entry.get("r_info_type2", 0),
                                      r.entry.get("r_info_type3", 0)),
                            "sym": name, "addend": r["r_addend"] if r.is_RELA() else None})
    return out


def words(path, section):
    with open(path, "rb") as f:
        elf = ELFFile(f)
        data = elf.get_section_by_name(section).data()
        fmt = ("<" if elf.little_endian else ">") + "I" * (len(data) // 4)
        return list(struct.unpack(fmt, data[:len(data) // 4 * 4]))


def is_traced(name):
    """Linux's list of the sections ftrace traces."""
    return name.startswith(".text") or name in (
        ".init.text", ".ref.text", ".sched.text", ".spinlock.text", ".irqentry.text",
        ".softirqentry.text", ".kprobes.text", ".cpuidle.text")


def call_sites(obj, traced=True):
    """Where funcs.c's mcount calls start, read from the instructions and
    relocations rather than by the tools' rule: a `jal` (R_MIPS_26) or the
    `lui $v1` that starts a long call's address load."""
    sites = []
    for r in mips_relocs(obj):
        if r["sym"] != "_mcount" or is_traced(r["section"]) != traced:
            continue
        insn = words(obj, r["section"])[r["offset"] // 4]
        if r["types"][0] == R_MIPS_26 or (insn == MIPS_LUI_V1 and r["types"][0] in (R_MIPS_HI16, R_MIPS_HIGHEST)):
            sites.append((r["section"], r["offset"]))
    return sites


def linux_rule(obj):
    """What Linux 6.12 records: every mcount relocation of a traced section,
    in section order, except one 4 bytes after the previous one, where
    "previous" carries over from the last traced section it looked at
    (MIPS_is_fake_mcount's static old_r_offset)."""
    out, prev = [], None
    for r in mips_relocs(obj):
        if r["sym"] != "_mcount" or not is_traced(r["section"]):
            continue
        if prev is None or r["offset"] - prev != 4:
            out.append((r["section"], r["offset"]))
        prev = r["offset"]
    return out


def check_disabled(before, after):
    """The mcount calls of the untraced sections are in their disabled
    forms, their first relocation is R_MIPS_NONE, and nothing else moved."""
    sites = call_sites(before, traced=False)
    assert {sec for sec, _ in sites} == set(UNTRACED)
    for sec in UNTRACED:
        old, new = words(before, sec), words(after, sec)
        changed = set()
        for _, off in [s for s in sites if s[0] == sec]:
            i = off // 4
            if old[i] == MIPS_LUI_V1:          # long call: b past the jalr's delay slot
                jalr = old.index(MIPS_JALR_V1, i)
                assert new[i] == 0x10000000 | (jalr + 2 - (i + 1)), f"{sec}+{off:#x}: {new[i]:#010x}"
                changed.add(i)
            else:                              # jal: nop, and o32's stack push with it
                assert new[i] == MIPS_NOP
                changed.add(i)
                if old[i + 1] in MIPS_SP_PUSH:
                    assert new[i + 1] == MIPS_NOP
                    changed.add(i + 1)
        assert [w for j, w in enumerate(new) if j not in changed] == \
               [w for j, w in enumerate(old) if j not in changed]
    rel_before, rel_after = mips_relocs(before), mips_relocs(after)
    nones = 0
    rel_after = [r for r in rel_after if r["section"] != "__mcount_loc"]
    assert len(rel_before) == len(rel_after)
    for b, a in zip(rel_before, rel_after):
        if (b["section"], b["offset"]) in sites and b["sym"] == "_mcount" and b["types"][0] != R_MIPS_NONE \
                and (b["section"], b["offset"]) == (a["section"], a["offset"]):
            assert a["types"] == (R_MIPS_NONE, 0, 0) and a["sym"] == "_mcount", a
            nones += 1
        else:
            assert a == b
    assert nones == len(sites) == 2


MIPS_CASES = [(t, ffs) for t in MIPS_TARGETS for ffs in (False, True)]


@pytest.mark.parametrize("target, ffs", MIPS_CASES,
                         ids=[t + ("-ffunction-sections" if f else "") for t, f in MIPS_CASES])
def test_mips_against_linux(tmp_path, reference, rmc, target, ffs):
    obj = compile_mips(tmp_path, target, ["-ffunction-sections"] if ffs else [])
    ours, theirs = two_copies(obj)
    ref = ftpadtest.run([reference, theirs])
    ng = ftpadtest.run([rmc, ours])
    assert ng.stdout == "" and ng.stderr == "" and ref.stderr == ""

    # Every call site, once: the first relocation of a long call only.
    sites = call_sites(obj)
    assert len(sites) == TRACED
    assert mcount_entries(ours) == sites
    # Linux finds what its own rule predicts, never a site we miss.
    assert mcount_entries(theirs) == linux_rule(obj)
    assert set(mcount_entries(theirs)) <= set(sites)

    # Everything else is byte for byte what Linux made.
    mine, linux = section_facts(ours), section_facts(theirs)
    differ = {mine[i][0] for i in mine if mine[i] != linux[i]}
    tables = {"__mcount_loc", ".rel__mcount_loc", ".rela__mcount_loc"}
    untraced = {n for s in UNTRACED for n in (s, ".rel" + s, ".rela" + s)}
    assert differ <= tables | untraced, differ
    check_disabled(obj, ours)


def test_linux_drops_call_sites_we_keep(tmp_path, reference, rmc):
    """The improvement, shown on the plain 32-bit kernel build of funcs.c:
    .init.text's call is at 12 and .sched.text's at 16, so Linux takes
    sched_fn's call for the second half of a long call and loses it."""
    obj = compile_mips(tmp_path, "mips32-be")
    ours, theirs = two_copies(obj)
    ftpadtest.run([reference, theirs])
    ftpadtest.run([rmc, ours])
    assert (".init.text", 12) in mcount_entries(theirs)
    assert (".sched.text", 16) in mcount_entries(ours)
    assert (".sched.text", 16) not in mcount_entries(theirs)


def test_mips_warn_names_the_untraced_sections(tmp_path, reference, rmc):
    obj = compile_mips(tmp_path, "mips32-be-long-calls")
    ours, theirs = two_copies(obj)
    ref = ftpadtest.run([reference, "-w", theirs])
    ng = ftpadtest.run([rmc, "-w", ours])
    assert ref.stdout.splitlines() == [f"Section {s} has mcount callers being ignored" for s in UNTRACED]
    assert ng.stderr.splitlines() == [
        f"{ours}: warning: recordmcount-ng: section {s} has mcount callers being ignored" for s in UNTRACED]


MIPS64_SYMBOLS = """
	.section .text.other,"ax",@progbits
	.globl	other
	.type	other, @function
other:
	lui	$2, %highest(other)
	daddiu	$2, $2, %higher(other)
	daddiu	$3, $3, %lo(%neg(%gp_rel(other)))
	jal	other
	nop
	jr	$31
	nop
	.section .text.weak_fn,"ax",@progbits
	.weak	weak_fn
	.type	weak_fn, @function
weak_fn:
	move	$1, $31
	jal	_mcount
	nop
	jr	$31
	nop
	.data
	.dword	other
"""


def drop_section_symbol(obj, section):
    """mips and arm gas keep every section symbol, used or not (binutils
    2.40 on x86 drops unused ones).  Leave @section without one, as such an
    assembler would, by pointing its STT_SECTION symbol at the last
    section instead (a harmless duplicate)."""
    data = bytearray(obj.read_bytes())
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        order = "<" if elf.little_endian else ">"
        target = elf.get_section_index(section)
        last = elf.num_sections() - 1
        symtab = elf.get_section_by_name(".symtab")
        shndx_at = 6 if elf.elfclass == 64 else 14     # Elf64_Sym / Elf32_Sym .st_shndx
        for i, sym in enumerate(symtab.iter_symbols()):
            if sym["st_info"]["type"] == "STT_SECTION" and sym["st_shndx"] == target:
                at = symtab["sh_offset"] + i * symtab["sh_entsize"] + shndx_at
                data[at:at + 2] = struct.pack(order + "H", last)
                break
        else:
            raise AssertionError(f"{obj}: no section symbol for {section}")
    obj.write_bytes(bytes(data))


@pytest.mark.parametrize("cc", ["mips64el-linux-gnuabi64-gcc", "mips64-linux-gnuabi64-gcc"])
def test_mips64_r_info_survives_symbol_renumbering(tmp_path, reference, rmc, cc):
    """A weak function alone in its section, without a section symbol: we
    add one, which moves the first global to the end of .symtab and rewrites
    every relocation that named it.  MIPS64's own r_info layout (r_sym, then
    r_ssym, r_type3, r_type2, r_type) must come out as it went in, composed
    types (GPREL16/SUB/LO16) included; libelf does not translate it."""
    src = tmp_path / "weak.s"
    src.write_text("\t.set noreorder\n\t.set noat\n" + MIPS64_SYMBOLS)
    obj = tmp_path / "weak.o"
    ftpadtest.run([need(cc), "-mno-abicalls", "-c", src, "-o", obj])
    drop_section_symbol(obj, ".text.weak_fn")
    ours, theirs = two_copies(obj)
    ref = ftpadtest.run([reference, theirs], check=False)
    assert ref.returncode == 1 and "Cannot find symbol for section" in ref.stderr

    before = mips_relocs(obj)
    assert any(r["types"] == (7, 24, 6) for r in before), before   # GPREL16, SUB, LO16
    ftpadtest.run([rmc, ours])
    assert mcount_entries(ours) == [(".text.weak_fn", 4)]
    assert mips_relocs(ours) == before + [
        {"section": "__mcount_loc", "offset": 0, "types": (18, 0, 0),   # R_MIPS_64
         "sym": ".text.weak_fn", "addend": 4}]
    p = ftpadtest.run(["readelf", "-rW", ours])
    assert "Warning" not in p.stderr + p.stdout


@pytest.mark.parametrize("cc, flags", [("arm-linux-gnueabihf-gcc", ["-mthumb"]),
                                       ("arm-linux-gnueabi-gcc", ["-mthumb", "-mbig-endian"])],
                         ids=["thumb2", "thumb-be"])
def test_arm_records_avoid_function_symbols(tmp_path, reference, rmc, cc, flags):
    """A Thumb function's symbol has the Thumb bit in its value, and the
    linker sets it again in anything relocated against it: with no section
    symbol, the first symbol of .text.static_fn is static_fn itself (value
    1).  Like Linux, records then use the `$t` mapping symbol (value 0)."""
    obj = tmp_path / "funcs.o"
    ftpadtest.run([need(cc), "-O2", "-pg", "-ffunction-sections", *flags, "-c", SRC / "funcs.c", "-o", obj])
    drop_section_symbol(obj, ".text.static_fn")
    ours, theirs = two_copies(obj)
    ftpadtest.run([reference, theirs])
    ftpadtest.run([rmc, ours])
    assert ".text.static_fn" in {sec for sec, _ in mcount_entries(ours)}
    assert mcount_entries(ours) == mcount_entries(theirs)
    assert section_facts(ours) == section_facts(theirs)
    with open(ours, "rb") as f:
        elf = ELFFile(f)
        symtab = elf.get_section_by_name(".symtab")
        target = elf.get_section_index(".text.static_fn")
        bases = {symtab.get_symbol(r["r_info_sym"]).name
                 for r in elf.get_section_by_name(".rel__mcount_loc").iter_relocations()
                 if symtab.get_symbol(r["r_info_sym"])["st_shndx"] == target}
        assert bases == {"$t"}


# ---- a mips program under qemu-user ----

# name: (compiler, flags, qemu)
RUN_TARGETS = {
    "mips32-be": ("mips-linux-gnu-gcc", [], "qemu-mips"),
    "mips32-be-long-calls": ("mips-linux-gnu-gcc", ["-mlong-calls"], "qemu-mips"),
    "mips32-le-long-calls": ("mipsel-linux-gnu-gcc", ["-mlong-calls"], "qemu-mipsel"),
    "mips64-le": ("mips64el-linux-gnuabi64-gcc", [], "qemu-mips64el"),
    "mips64-le-long-calls": ("mips64el-linux-gnuabi64-gcc", ["-mlong-calls"], "qemu-mips64el"),
    "mips64-be-long-calls": ("mips64-linux-gnuabi64-gcc", ["-mlong-calls"], "qemu-mips64"),
}

# What mips_prog.c prints: five calls of caller(), their sum, and how often
# _mcount ran: six instrumented functions per caller() call, two of them in
# sections ftrace does not trace.
EXPECTED_OUTPUT = ["caller 86", "caller 109", "caller 132", "caller 147", "caller 170", "sum 644"]


@pytest.mark.parametrize("target", RUN_TARGETS)
def test_fixed_up_mips_program_behaves_the_same(tmp_path, rmc, target):
    """The untraced functions' calls, disabled by recordmcount-ng, no longer
    reach _mcount, and the program computes exactly what it did: a `jal`
    NOP'd without o32's delay-slot stack push, or a `b` that lands one word
    off, would unbalance the stack and change or crash it."""
    cc, flags, qemu = RUN_TARGETS[target]
    need(cc)
    need(qemu)
    base = [*MIPS_KFLAGS, *flags]
    prog = tmp_path / "prog.o"
    ftpadtest.run([cc, *base, "-c", SRC / "mips_prog.c", "-o", prog])
    mcount = tmp_path / "mcount.o"
    ftpadtest.run([cc, *[f for f in base if f != "-pg"], "-c", SRC / "mips_mcount.S", "-o", mcount])
    fixed = tmp_path / "prog.fixed.o"
    shutil.copyfile(prog, fixed)
    ftpadtest.run([rmc, fixed])
    check_disabled_program(prog, fixed)

    outputs = []
    for o in (prog, fixed):
        exe = o.with_suffix(".exe")
        link = ftpadtest.run([cc, "-nostdlib", "-static", "-Wl,-e,__start", *flags, "-o", exe, o, mcount])
        assert link.stderr == ""        # the lone LO16 left after a long call's HI16 links cleanly
        outputs.append(ftpadtest.run([qemu, exe]).stdout.splitlines())
    plain, disabled = outputs
    assert plain == EXPECTED_OUTPUT + ["mcount_calls 30"]
    assert disabled == EXPECTED_OUTPUT + ["mcount_calls 20"]


def check_disabled_program(before, after):
    disabled = [r for r in mips_relocs(after)
                if r["sym"] == "_mcount" and r["types"][0] == R_MIPS_NONE]
    assert sorted(r["section"] for r in disabled) == sorted(UNTRACED)
    assert len(mcount_entries(after)) == 3      # caller, static_fn, global_fn (the rest are notrace)


# ---- loongarch: hand-made objects ----

EM_LOONGARCH = 258
R_LARCH_32, R_LARCH_64, R_LARCH_MARK_LA = 1, 2, 20
R_LARCH_SOP_PUSH_ABSOLUTE, R_LARCH_SOP_PUSH_PLT_PCREL = 23, 29
R_LARCH_SOP_POP_32_S_0_10_10_16_S2, R_LARCH_B26 = 44, 66
LA_BL = 0x54000000                  # bl 0
LA_NOP = 0x03400000                 # andi zero, zero, 0
LA_RET = 0x4c000020                 # jirl zero, ra, 0


def write_elf(path, elfclass, machine, sections, symbols):
    """A little-endian ET_REL object.  @sections: (name, type, flags, data,
    link, info, align, entsize) with link/info as section names or ints;
    @symbols: (name, bind, type, section name or None, value), locals first.
    .symtab, .strtab and .shstrtab are added.  Relocation data may name
    symbols: give it as a list of (offset, symbol name, type, addend)."""
    is64 = elfclass == 64
    SHT_SYMTAB, SHT_STRTAB, SHT_RELA = 2, 3, 4
    names = [s[0] for s in sections] + [".symtab", ".strtab", ".shstrtab"]
    index = {n: i + 1 for i, n in enumerate(names)}
    strtab, symbytes = b"\0", b""
    symindex = {}
    for i, (name, bind, typ, sec, value) in enumerate([("", 0, 0, None, 0)] + symbols):
        symindex[name] = i
        off = 0
        if name and typ != 3:
            off = len(strtab)
            strtab += name.encode() + b"\0"
        info, shndx = bind << 4 | typ, index[sec] if sec else 0
        symbytes += (struct.pack("<IBBHQQ", off, info, 0, shndx, value, 0) if is64
                     else struct.pack("<IIIBBH", off, value, 0, info, 0, shndx))
    nlocals = sum(1 for s in symbols if s[1] == 0) + 1
    shstrtab = b"\0"
    name_off = {}
    for n in names:
        name_off[n] = len(shstrtab)
        shstrtab += n.encode() + b"\0"

    def rela(entries):
        out = b""
        for off, sym, typ, addend in entries:
            s = symindex[sym] if sym else 0
            out += (struct.pack("<QQq", off, s << 32 | typ, addend) if is64
                    else struct.pack("<IIi", off, s << 8 | typ, addend))
        return out

    word = 8 if is64 else 4
    all_secs = []
    for name, typ, flags, data, link, info, align, entsize in sections:
        if typ == SHT_RELA:
            data, entsize = rela(data), 24 if is64 else 12
        all_secs.append((name, typ, flags, data, index.get(link, link), index.get(info, info), align, entsize))
    all_secs += [(".symtab", SHT_SYMTAB, 0, symbytes, index[".strtab"], nlocals, word, 24 if is64 else 16),
                 (".strtab", SHT_STRTAB, 0, strtab, 0, 0, 1, 0),
                 (".shstrtab", SHT_STRTAB, 0, shstrtab, 0, 0, 1, 0)]
    ehsize, shentsize = (64, 64) if is64 else (52, 40)
    body, offsets = b"", []
    for s in all_secs:
        pad = -(ehsize + len(body)) % max(s[6], 1)
        body += b"\0" * pad
        offsets.append(ehsize + len(body))
        body += s[3]
    body += b"\0" * (-(ehsize + len(body)) % 8)
    shoff = ehsize + len(body)
    shdrs = bytes(shentsize)
    for (name, typ, flags, data, link, info, align, entsize), off in zip(all_secs, offsets):
        shdrs += (struct.pack("<IIQQQQIIQQ", name_off[name], typ, flags, 0, off, len(data), link, info, align, entsize)
                  if is64 else
                  struct.pack("<IIIIIIIIII", name_off[name], typ, flags, 0, off, len(data), link, info, align, entsize))
    ident = b"\x7fELF" + bytes([2 if is64 else 1, 1, 1]) + bytes(9)
    hdr = ident + (struct.pack("<HHIQQQIHHHHHH", 1, machine, 1, 0, 0, shoff, 0, ehsize, 0, 0, shentsize,
                               len(all_secs) + 1, index[".shstrtab"]) if is64 else
                   struct.pack("<HHIIIIIHHHHHH", 1, machine, 1, 0, 0, shoff, 0, ehsize, 0, 0, shentsize,
                               len(all_secs) + 1, index[".shstrtab"]))
    path.write_bytes(hdr + body + shdrs)
    return path


def code(*insns):
    return struct.pack("<" + "I" * len(insns), *insns)


def loongarch_object(path, elfclass):
    """What an old (stack-relocation) LoongArch toolchain makes of -pg code:
    in .text, a `bl _mcount` (SOP_PUSH_PLT_PCREL + SOP_POP...) at 8, an
    address load of _mcount starting with MARK_LA at 0x20, and a new-style
    R_LARCH_B26 `bl _mcount` at 0x48 (no call site for Linux); in .init.text
    a `bl` at 4; in the untraced .entry.text a `bl` at 4."""
    X, A, P = 0x6, 0x2, 0x4             # SHF_ALLOC|SHF_EXECINSTR
    text = code(LA_NOP, LA_NOP, LA_BL, LA_RET, *[LA_NOP] * 4,
                LA_NOP, LA_NOP, LA_NOP, LA_NOP, LA_RET, *[LA_NOP] * 3,
                LA_NOP, LA_NOP, LA_BL, LA_RET)
    small = code(LA_NOP, LA_BL, LA_RET)
    push_pop = lambda off: [(off, "_mcount", R_LARCH_SOP_PUSH_PLT_PCREL, 0),
                            (off, None, R_LARCH_SOP_POP_32_S_0_10_10_16_S2, 0)]
    sections = [
        (".text", 1, X, text, 0, 0, 4, 0),
        (".rela.text", 4, 0x40, push_pop(8) + [
            (0x20, "_mcount", R_LARCH_MARK_LA, 0), (0x20, "_mcount", R_LARCH_SOP_PUSH_ABSOLUTE, 0),
            (0x24, "_mcount", R_LARCH_SOP_PUSH_ABSOLUTE, 0),
            (0x48, "_mcount", R_LARCH_B26, 0)], ".symtab", ".text", 8, 0),
        (".init.text", 1, X, small, 0, 0, 4, 0),
        (".rela.init.text", 4, 0x40, push_pop(4), ".symtab", ".init.text", 8, 0),
        (".entry.text", 1, X, small, 0, 0, 4, 0),
        (".rela.entry.text", 4, 0x40, push_pop(4), ".symtab", ".entry.text", 8, 0),
        (".data", 1, A | 1, bytes(8), 0, 0, 8, 0),
    ]
    symbols = [
        ("", 0, 3, ".text", 0), ("", 0, 3, ".init.text", 0), ("", 0, 3, ".entry.text", 0),
        ("local_fn", 0, 2, ".text", 0),
        ("global_fn", 1, 2, ".text", 0x20), ("weak_fn", 2, 2, ".text", 0x40),
        ("init_fn", 1, 2, ".init.text", 0), ("entry_fn", 1, 2, ".entry.text", 0),
        ("_mcount", 1, 0, None, 0),
    ]
    return write_elf(path, elfclass, EM_LOONGARCH, sections, symbols)


LOONGARCH_SITES = [(".text", 8), (".text", 0x20), (".init.text", 4)]


def test_loongarch64_hand_made_object(tmp_path, reference, rmc):
    obj = loongarch_object(tmp_path / "la64.o", 64)
    assert "LoongArch" in ftpadtest.run(["readelf", "-h", obj]).stdout
    ours, theirs = two_copies(obj)
    ftpadtest.run([reference, theirs])
    p = ftpadtest.run([rmc, ours])
    assert p.stderr == ""
    assert mcount_entries(theirs) == LOONGARCH_SITES
    assert mcount_entries(ours) == LOONGARCH_SITES
    assert section_facts(ours) == section_facts(theirs)
    with open(ours, "rb") as f:
        rel = ELFFile(f).get_section_by_name(".rela__mcount_loc")
        assert {r["r_info_type"] for r in rel.iter_relocations()} == {R_LARCH_64}


def test_loongarch32_hand_made_object(tmp_path, reference, rmc):
    """Linux's LARCH32_is_fake_mcount takes ELF64_R_TYPE of a 32-bit r_info,
    that is the whole word, symbol included, so it finds no call site at
    all; we read the type."""
    obj = loongarch_object(tmp_path / "la32.o", 32)
    ours, theirs = two_copies(obj)
    before = obj.read_bytes()
    ftpadtest.run([reference, theirs])
    ftpadtest.run([rmc, ours])
    assert theirs.read_bytes() == before
    assert mcount_entries(ours) == LOONGARCH_SITES
    with open(ours, "rb") as f:
        rel = ELFFile(f).get_section_by_name(".rela__mcount_loc")
        assert {r["r_info_type"] for r in rel.iter_relocations()} == {R_LARCH_32}
