# SPDX-License-Identifier: MIT
"""Exit sites (docs/format.md "Exit sites (version 2)", docs/gcc-plugin.md
and docs/clang-pass.md "Exit sites") from both plugins, for every compiler
the build made a plugin for (GCC 11 and 12, clang 13 to 16, x86_64 and
aarch64: <build>/ftpad-plugins.txt, as ftpadtest.COMPILERS reads it).

Everything is checked from the real bytes of the linked program, by one
check for every compiler: each return instruction of a padded function
must sit right behind one exit NOP with a kind-1 record, each tail call's
jump behind one with a kind-2 record, and there must be no other exit
record.  recordmcount-ng --check applies libftpad's own pad rule to the
objects, and the programs (aarch64 ones under qemu-aarch64) must print
what they print without the plugin.

Each compiler builds its own programs, at its own levels: GCC exits.c,
exits.cc and thunks.cc (C++ this-adjusting thunks, which GCC writes as
assembly at -O0) at every level, with and without landing pads; clang 14
clang_exits.c at every level (and with armv8.3-a's pointer-authenticating
returns on aarch64) and clang_throw.cc (exceptions through exit sites);
every other clang clang_exits.c at -Os."""

import capstone
import pytest

from ftpadtest import A64_NOP, COMPILERS, Image, NOP5, RECORDMCOUNT, TEST_SRC, run

SRC = TEST_SRC / "exit"
KIND_ENTRY, KIND_EXIT, KIND_TAIL_EXIT = 0, 1, 2
VERSION_EXIT = 2
# pad/ftpad_site.h FTPAD_SITE_NO_RETURN: exit=1 found no return
FLAG_NO_RETURN = 1 << 5
X86_EXIT_NOPS = {NOP5, bytes.fromhex("0f1f440008")}   # GCC's and LLVM's 5-byte NOP

GCCS = [c for c in COMPILERS if c.kind == "gcc"]
CLANG = [c for c in COMPILERS if c.kind == "clang"]
CLANG14 = [c for c in CLANG if c.major == "14"]
OTHER_CLANGS = [c for c in CLANG if c.major != "14"]
GCC_OPTS = ["-O0", "-O1", "-O2", "-O3", "-Os", "-O2 -fPIC"]
CLANG_OPTS = ["-O0", "-O1", "-O2", "-O3", "-Os", "-Oz", "-O2 -fPIC", "-O2 landing",
              "-Os landing"]


def case(compiler, source, opt):
    return pytest.param(compiler, source, opt, id=f"{compiler.id}-{source}-{opt}")


# (compiler, source, opt) of every program the exit check runs on.
PROGRAMS = [
    *(case(c, source, f"{opt}{landing}") for c in GCCS
      for source in ("exits.c", "exits.cc", "../thunks.cc")
      for opt in GCC_OPTS for landing in ("", " landing")),
    *(case(c, "clang_exits.c", opt) for c in CLANG14 for opt in CLANG_OPTS),
    # armv8.3-a's retaa: the site right in front of it.
    *(case(c, "clang_exits.c", "-O2 -march=armv8.3-a landing") for c in CLANG14
      if c.arch == "aarch64"),
    *(case(c, "clang_throw.cc", opt) for c in CLANG14 for opt in ("-O0", "-O2", "-Os landing")),
    # -Os has every kind: conditional tail calls on x86_64 too.
    *(case(c, "clang_exits.c", "-Os") for c in OTHER_CLANGS),
]


def ids(compilers):
    return [c.id for c in compilers]


def options(compiler, opt):
    """OPT as flags: "landing" is the target's landing pads (and aarch64's
    return-address signing: the exit NOP must go behind autiasp, right
    before the ret)."""
    return [compiler.landing if f == "landing" else f for f in opt.split()]


def build(compiler, tmp_path, source, flags, plugin=True, **plugin_args):
    """SOURCE compiled by COMPILER with FLAGS, with the plugin and exit=1
    (PLUGIN_ARGS change them; plugin=False: without the plugin), and
    linked: (object, program).  A plugin's object must pass
    recordmcount-ng --check."""
    source = SRC / source
    tag = "plugin" if plugin else "native"
    obj, exe = tmp_path / f"{source.name}.{tag}.o", tmp_path / f"{source.name}.{tag}"
    # No jump tables: an indirect jump is then always a tail call, so the
    # check can tell them apart from the bytes alone.
    args = compiler.flags(**{"exit": 1, **plugin_args}) if plugin else []
    run([*compiler.driver(source), *flags, "-fno-jump-tables", *args, "-c", source, "-o", obj])
    if plugin:
        checked = run([RECORDMCOUNT, "--check", obj])
        assert " 0 violations" in checked.stdout, checked.stdout
    pie = ["-pie"] if "-fPIC" in flags and compiler.arch == "x86_64" else []
    run([*compiler.driver(source), *flags, *compiler.link, *pie, obj, "-o", exe])
    return obj, exe


def run_program(compiler, exe):
    """What EXE prints and its status, natively or under qemu-aarch64."""
    p = run([*([] if compiler.arch == "x86_64" else ["qemu-aarch64"]), exe], check=False)
    return p.returncode, p.stdout, p.stderr


# Pointer authentication (armv8.3-a), which Debian's capstone does not
# decode: the returns, and PACIA/AUTIA and the like (0xdac1....), which are
# not branches.
A64_PAC_RETURNS = {bytes.fromhex("ff0b5fd6"): "retaa", bytes.fromhex("ff0f5fd6"): "retab"}


def a64_pac_data(word):
    return int.from_bytes(word, "little") >> 16 == 0xdac1


class Insn:
    """What the check reads of one decoded instruction."""

    def __init__(self, address, mnemonic, op_str, raw):
        self.address, self.mnemonic, self.op_str, self.bytes = address, mnemonic, op_str, raw
        self.size = len(raw)


def disassemble(arch, code, address):
    """Every instruction of CODE at ADDRESS, as far as it decodes."""
    if arch == "x86_64":
        md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        return [Insn(i.address, i.mnemonic, i.op_str, bytes(i.bytes))
                for i in md.disasm(code, address)]
    md = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
    out = []
    for off in range(0, len(code) - len(code) % 4, 4):
        word = code[off:off + 4]
        insn = next(md.disasm(word, address + off), None)
        if insn is not None:
            out.append(Insn(insn.address, insn.mnemonic, insn.op_str, word))
        elif word in A64_PAC_RETURNS:
            out.append(Insn(address + off, A64_PAC_RETURNS[word], "", word))
        elif a64_pac_data(word):
            out.append(Insn(address + off, "pac", "", word))
        else:
            break
    return out


def branch_target(insn):
    """The immediate target of a branch, or None (through a register or memory)."""
    op = insn.op_str.split(",")[-1].strip().lstrip("#")
    try:
        return int(op, 16)
    except ValueError:
        return None


RETURNS = {"ret", "retq", "retaa", "retab"}
JUMPS = {"jmp", "b", "br", "braa", "brab", "braaz", "brabz"}


def ways_out(arch, insns, stays):
    """{address: kind} of every return and tail call's jump in INSNS;
    stays(target) says whether a branch target is still in the function.
    A conditional jump that leaves it (a conditional tail call) is an
    error, since no site can be in front of it."""
    out = {}
    for insn in insns:
        m = insn.mnemonic.split()[-1]     # "notrack jmp", "bnd jmp"
        target = branch_target(insn)
        leaves = target is None or not stays(target)
        if m in RETURNS:
            out[insn.address] = KIND_EXIT
        elif m in JUMPS:
            if leaves:
                out[insn.address] = KIND_TAIL_EXIT
        elif arch == "x86_64" and m.startswith("j") or \
                arch == "aarch64" and (m.startswith("b.") or m in ("cbz", "cbnz", "tbz", "tbnz")):
            assert not leaves, f"{insn.address:#x}: conditional tail call {m} {insn.op_str}"
    return out


def function_parts(image):
    """{entry address: [(start, size), ...]}: each function's symbol and
    its .cold part's, if it has one; and every function symbol's address."""
    symbols = image.function_symbols()
    by_name = {name: addr for name, addr, _ in symbols}
    parts = {}
    for name, addr, size in symbols:
        owner = by_name.get(name[:-len(".cold")]) if name.endswith(".cold") else addr
        if owner is not None:
            parts.setdefault(owner, []).append((addr, size))
    return parts, {addr for _, addr, _ in symbols}


def stays_in(entry, ranges, starts):
    """Is a branch target still in the function at ENTRY made of RANGES?
    A jump to its own entry is a (tail) call; one to the end of a part
    (-O0, behind a noreturn call) stays in it, unless another function
    starts there; one to its .cold part stays."""
    own = {start for start, _ in ranges}

    def stays(target):
        if target == entry or (target in starts and target not in own):
            return False
        return any(start <= target <= start + size for start, size in ranges)
    return stays


def exit_records(sites, nop_len):
    """The exit records of SITES, each checked against its function's
    entry record: {site address: record}."""
    entries = {s.entry: s for s in sites if s.kind == KIND_ENTRY}
    exits = {}
    for s in sites:
        if s.kind == KIND_ENTRY:
            continue
        e = entries.get(s.entry)
        assert e is not None, f"exit record {s} of a function with no entry record"
        assert (s.version, s.arch, s.before, s.after, s.flags) == \
            (VERSION_EXIT, e.arch, 0, 0, 0), s
        assert (s.ops, s.name_addr, s.name, s.site_len) == \
            (e.ops, e.name_addr, e.name, nop_len), s
        assert s.kind in (KIND_EXIT, KIND_TAIL_EXIT), s
        assert s.site not in exits, f"two records for the exit site {s}"
        exits[s.site] = s
    return entries, exits


def check_exit_sites(image, arch):
    """Every exit of every padded function of IMAGE has exactly one exit
    site with its record, and there is no other exit record.  Returns
    {function name: sorted kinds of its exit records}."""
    nops = X86_EXIT_NOPS if arch == "x86_64" else {A64_NOP}
    nop_len = len(next(iter(nops)))
    sites = image.sites()
    entries, exits = exit_records(sites, nop_len)
    assert exits, "no exit records"
    parts, starts = function_parts(image)
    summary = {}
    for entry, record in entries.items():
        ranges = parts[entry]
        stays = stays_in(entry, ranges, starts)
        want = {}
        for start, size in ranges:
            insns = disassemble(arch, image.read(start, size), start)
            assert sum(i.size for i in insns) == size, f"{record.name}: code does not disassemble"
            for address, kind in ways_out(arch, insns, stays).items():
                site = address - nop_len
                assert address != entry and image.read(site, nop_len) in nops, \
                    f"{record.name}: no exit NOP in front of the exit at {address:#x}"
                want[site] = kind
        got = {a: s.kind for a, s in exits.items() if s.entry == entry}
        assert got == want, (f"{record.name}: exit records {sorted(got.items())} != "
                             f"exits in its code {sorted(want.items())}")
        # No way out: the entry record says the function never returns.
        assert bool(record.flags & FLAG_NO_RETURN) == (not got), (record.name, record.flags)
        summary[record.name] = sorted(got.values())
    return summary


# What each program has, so that the check cannot pass empty.

def exits_c_has(kinds, compiler, opt):
    """GCC's exits.c at -O2: several returns in one function, direct and
    indirect tail calls, and functions that never return with no exit site
    at all."""
    if opt != "-O2":
        return
    assert kinds["leaf"] == [KIND_EXIT]
    assert kinds["many_returns"].count(KIND_EXIT) >= 2, kinds
    assert kinds["direct_tail"] == [KIND_TAIL_EXIT]
    assert kinds["pointer_tail"] == [KIND_TAIL_EXIT]
    assert kinds["fail"] == [] and kinds["jump_out"] == [], kinds
    for name in ("make_pair", "average", "scaled", "fib", "main"):
        assert KIND_EXIT in kinds[name], (name, kinds)


def clang_exits_c_has(kinds, compiler, opt):
    """clang_exits.c: each kind of function has the exits its source asks
    for."""
    assert kinds["leaf"] == [KIND_EXIT]
    assert kinds["fail"] == [] and kinds["jump_out"] == []     # noreturn
    assert kinds["main"] and set(kinds["several"]) == {KIND_EXIT}
    for name in ("ret_pair", "ret_big", "ret_double", "fact", "fib", "maybe_jump"):
        assert KIND_EXIT in kinds[name], name
    assert kinds["ret_ldouble"]  # aarch64: a tail call of __divtf3 from -O2 on
    if opt.split()[0] not in ("-O0", "-O1"):
        # clang makes tail calls from -O2 on.
        assert kinds["direct_tail"] == [KIND_TAIL_EXIT]
        assert kinds["pointer_tail"] == [KIND_TAIL_EXIT]
        assert kinds["cond_tail"] == [KIND_EXIT, KIND_TAIL_EXIT]
        if compiler.arch == "x86_64" and opt in ("-O2", "-O3"):
            assert len(kinds["several"]) >= 3  # a return after each epilogue


def clang_throw_cc_has(kinds, compiler, opt):
    """C++ exceptions thrown through functions with exit sites, rethrown,
    destructors run on the way; an inline (COMDAT) function."""
    assert kinds["_Z6middlei"] and kinds["_Z7catcheri"] and kinds["_Z5twicei"]


HAS = {"exits.c": exits_c_has, "clang_exits.c": clang_exits_c_has,
       "clang_throw.cc": clang_throw_cc_has}


@pytest.mark.parametrize("compiler, source, opt", PROGRAMS)
def test_every_exit_has_a_site(tmp_path, compiler, source, opt):
    """Every return and tail call of every padded function has its exit
    site and record, the program has what its source asks for, and it
    prints what it prints without the plugin (the C++ ones unwind
    exceptions through functions with exit sites)."""
    flags = options(compiler, opt)
    _, exe = build(compiler, tmp_path, source, flags)
    with Image(exe) as image:
        kinds = check_exit_sites(image, compiler.arch)
    assert kinds, "no padded functions"
    HAS.get(source, lambda *a: None)(kinds, compiler, opt)
    _, native = build(compiler, tmp_path, source, flags, plugin=False)
    assert run_program(compiler, exe) == run_program(compiler, native)


def c_source(compiler):
    return "exits.c" if compiler.kind == "gcc" else "clang_exits.c"


@pytest.mark.parametrize("compiler", COMPILERS, ids=ids(COMPILERS))
def test_exit0_is_the_default_and_adds_nothing(tmp_path, compiler):
    """exit=0 writes the object byte for byte as without the argument, and
    it has entry records only, of version 1."""
    src = SRC / c_source(compiler)
    default, off = tmp_path / "default.o", tmp_path / "off.o"
    run([*compiler.driver(src), "-O2", *compiler.flags(), "-c", src, "-o", default])
    run([*compiler.driver(src), "-O2", *compiler.flags(exit=0), "-c", src, "-o", off])
    assert default.read_bytes() == off.read_bytes()
    exe = tmp_path / "off"
    run([*compiler.driver(src), *compiler.link, off, "-o", exe])
    with Image(exe) as image:
        sites = image.sites()
    assert sites and all(s.kind == KIND_ENTRY and s.version == 1 for s in sites)


@pytest.mark.parametrize("compiler", GCCS, ids=ids(GCCS))
@pytest.mark.parametrize("args, why", [
    ({"abi": "kernel"}, "the kernel ABI has no exit sites"),
    ({"record": "mcount"}, "exit sites are recorded only with record=ftpad"),
    ({"record": "patchable"}, "exit sites are recorded only with record=ftpad"),
])
def test_exit_refused_without_ftpad_records(tmp_path, compiler, args, why):
    """GCC: exit=1 needs the user ABI and ftpad records: anything else
    stops the compiler with a message that says why."""
    p = run([*compiler.driver(SRC / "exits.c"), *compiler.flags(exit=1, **args), "-c",
             SRC / "exits.c", "-o", tmp_path / "x.o"], check=False)
    assert p.returncode != 0
    assert why in p.stderr and "exit" in p.stderr, p.stderr


@pytest.mark.parametrize("compiler", CLANG14, ids=ids(CLANG14))
def test_exit_sites_need_the_code_generated_here(compiler, tmp_path):
    """clang: with -flto the code is generated by the linker, which never
    loads the plugin: exit=1 is an error that says so, and no object is
    written."""
    src, obj = SRC / "clang_exits.c", tmp_path / "lto.o"
    p = run([*compiler.driver(src), "-O2", "-flto", *compiler.flags(exit=1), "-c", src,
             "-o", obj], check=False)
    assert p.returncode != 0 and "exit=1 needs the code generated in this compile" in p.stderr
    assert not obj.exists()


COMDAT_SOURCES = [SRC.parent / "comdat_a.cc", SRC.parent / "comdat_b.cc"]
GC = ["-ffunction-sections", "-Wl,--gc-sections"]
COMDAT_CASES = [pytest.param(c, gc, id=f"{c.id}-{'gc' if gc else 'nogc'}")
                for c in [*GCCS, *CLANG14] for gc in ([[], GC] if c.kind == "gcc" else [GC])]


@pytest.mark.parametrize("linker", ["bfd", "gold", "lld"])
@pytest.mark.parametrize("compiler, gc", COMDAT_CASES)
def test_comdat_exit_records_follow_their_function(tmp_path, compiler, gc, linker):
    """COMDAT functions defined in two objects: whichever copy a linker
    keeps (and --gc-sections drops), its exit records are exactly its own
    and all of them, never a dropped copy's (gold keeps records only
    through the .reloc reference from the text)."""
    exe = tmp_path / "prog"
    # The cross gcc looks for ld.lld only under its own prefix.
    lld_path = (["-B/usr/bin/"] if compiler.kind == "gcc" and compiler.arch == "aarch64"
                and linker == "lld" else [])
    run([*compiler.cxx, "-O2", *gc, f"-fuse-ld={linker}", *lld_path, *compiler.link,
         *compiler.flags(exit=1), *COMDAT_SOURCES, "-o", exe])
    with Image(exe) as image:
        kinds = check_exit_sites(image, compiler.arch)
    for name in ("_Z13shared_inlinei", "_Z12shared_twiceIiET_S0_"):
        assert kinds[name] == [KIND_EXIT], kinds
    assert run_program(compiler, exe)[:2] == (0, "13\n")
