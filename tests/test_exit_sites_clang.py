# SPDX-License-Identifier: MIT
"""Exit sites from the clang plugin (exit=1, docs/format.md "Exit sites",
docs/clang-pass.md "Exit sites"), checked from the real bytes of linked
programs: every return instruction of a padded function is preceded by
exactly one exit NOP with a kind-1 record, every tail call's jump by one
with a kind-2 record, and there is no other record; the objects pass
recordmcount-ng --check, and the programs print what they print without
the plugin (aarch64 under qemu-aarch64).

The checks are functions over a compiler of tests/ftpadtest.py's COMPILERS
(its clang 13 to 16, both targets), so that the GCC plugin's tests can
run the same ones: clang 14 on both machines at every optimisation level,
with -fPIC and with landing pads, C and C++ with exceptions; every other
clang with one program."""
import pathlib

import pytest

from ftpadtest import COMPILERS, NOP5, RECORDMCOUNT, Image, run

SRC = pathlib.Path(__file__).parent / "src" / "exit"
KIND_ENTRY, KIND_EXIT, KIND_TAIL_EXIT = 0, 1, 2
VERSION_EXIT = 2
X86_EXIT_NOPS = {NOP5, bytes.fromhex("0f1f440008")}   # GCC's and LLVM's 5-byte NOP
A64_NOP = bytes.fromhex("1f2003d5")

CLANG = [c for c in COMPILERS if c.kind == "clang"]
CLANG14 = [c for c in CLANG if c.major == "14"]
OTHER_CLANGS = [c for c in CLANG if c.major != "14"]
OPTS = ["-O0", "-O1", "-O2", "-O3", "-Os", "-Oz", "-O2 -fPIC", "-O2 landing", "-Os landing"]


def ids(compilers):
    return [c.id for c in compilers]


def options(compiler, opt):
    """OPT as flags: "landing" is the target's landing pads, -fPIC links a PIE."""
    flags = opt.split()
    return [compiler.landing if f == "landing" else f for f in flags]


def build(compiler, tmp_path, source, opt, **plugin_args):
    """SOURCE compiled by COMPILER at OPT with the plugin and PLUGIN_ARGS
    (without it for plugin=False), and linked: (object, program)."""
    use_plugin = plugin_args.pop("plugin", True)
    tag = "plugin" if use_plugin else "native"
    obj, exe = tmp_path / f"{source.stem}.{tag}.o", tmp_path / f"{source.stem}.{tag}"
    flags = options(compiler, opt)
    plugin = compiler.flags(**plugin_args) if use_plugin else []
    run([*compiler.driver(source), *flags, *plugin, "-c", source, "-o", obj])
    pie = ["-pie"] if "-fPIC" in flags and compiler.arch == "x86_64" else []
    run([*compiler.driver(source), *flags, *compiler.link, *pie, obj, "-o", exe])
    return obj, exe


def run_program(compiler, exe):
    """What EXE prints and its status, natively or under qemu-aarch64."""
    p = run([*([] if compiler.arch == "x86_64" else ["qemu-aarch64"]), exe], check=False)
    return p.returncode, p.stdout, p.stderr


def disassembler(arch):
    import capstone
    if arch == "x86_64":
        return capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    return capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)


# Pointer authentication (armv8.3-a), which Debian's capstone does not
# decode: the returns, and PACIA/AUTIA and the like (0xdac1....), which are
# not branches.
A64_PAC_RETURNS = {bytes.fromhex("ff0b5fd6"): "retaa", bytes.fromhex("ff0f5fd6"): "retab"}


def a64_pac_data(word):
    return int.from_bytes(word, "little") >> 16 == 0xdac1


class Insn:
    """What the checks read of one decoded instruction."""

    def __init__(self, address, mnemonic, op_str, raw):
        self.address, self.mnemonic, self.op_str, self.bytes = address, mnemonic, op_str, raw
        self.size = len(raw)


def disassemble(arch, code, address):
    """Every instruction of CODE at ADDRESS, as far as it decodes."""
    md = disassembler(arch)
    if arch == "x86_64":
        return [Insn(i.address, i.mnemonic, i.op_str, bytes(i.bytes))
                for i in md.disasm(code, address)]
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


def ways_out(arch, insns, start, end, functions):
    """{address: kind} of every return and tail call's jump in the code of a
    function at [START, END); a conditional jump that leaves the function
    (a conditional tail call) is an error, since no site can be in front of
    it.  A jump to the function's end (-O0, behind a noreturn call) stays
    in it, unless another of FUNCTIONS starts there.  No jump tables in the
    sources: their jump looks like a tail call."""
    out = {}
    returns = {"ret", "retq", "retaa", "retab"}
    for insn in insns:
        m = insn.mnemonic.split()[-1]     # "notrack jmp", "bnd jmp"
        target = branch_target(insn)
        leaves = target is None or not start < target <= end or target in functions
        if m in returns:
            out[insn.address] = KIND_EXIT
        elif m in ("jmp", "b", "br"):
            if leaves:
                out[insn.address] = KIND_TAIL_EXIT
        elif arch == "x86_64" and m.startswith("j") or \
                arch == "aarch64" and (m.startswith("b.") or m in ("cbz", "cbnz", "tbz", "tbnz")):
            assert not leaves, f"{insn.address:#x}: conditional tail call {m} {insn.op_str}"
    return out


def check_exit_sites(compiler, exe):
    """The exit records of EXE against its bytes.  Returns {function name:
    sorted kinds of its exit records}."""
    arch = compiler.arch
    with Image(exe) as image:
        sites = image.sites()
        sizes = {addr: size for _, addr, size in image.function_symbols()}
        entries = {s.entry: s for s in sites if s.kind == KIND_ENTRY}
        exits = [s for s in sites if s.kind != KIND_ENTRY]
        assert exits, f"{exe}: no exit records"
        found = {}
        for s in exits:
            e = entries.get(s.entry)
            assert e is not None, f"{s}: exit record of a function with no entry record"
            assert (s.version, s.arch, s.ops, s.name, s.before, s.after, s.flags) == \
                (VERSION_EXIT, e.arch, e.ops, e.name, 0, 0, 0), s
            assert s.kind in (KIND_EXIT, KIND_TAIL_EXIT), s
            assert s.site_len == (5 if arch == "x86_64" else 4), s
            assert (s.site, s.kind) not in found.get(s.entry, set()), f"two records for {s}"
            found.setdefault(s.entry, set()).add((s.site, s.kind))
        kinds = {}
        for entry, e in entries.items():
            size = sizes[entry]
            insns = disassemble(arch, image.read(entry, size), entry)
            assert sum(i.size for i in insns) == size, f"{e.name}: code does not disassemble"
            want = set()
            for i, (addr, kind) in enumerate(sorted(ways_out(arch, insns, entry, entry + size, sizes).items())):
                k = next(j for j, insn in enumerate(insns) if insn.address == addr)
                assert k > 0, f"{e.name}: {addr:#x} leaves at the entry"
                nop = insns[k - 1]
                assert bytes(nop.bytes) in (X86_EXIT_NOPS if arch == "x86_64" else {A64_NOP}), \
                    f"{e.name}: no exit NOP in front of {insns[k].mnemonic} at {addr:#x}"
                want.add((nop.address, kind))
            got = found.get(entry, set())
            assert got == want, (f"{e.name}: exit records {sorted((hex(a), k) for a, k in got)} "
                                 f"!= ways out {sorted((hex(a), k) for a, k in want)}")
            kinds[e.name] = sorted(k for _, k in got)
        return kinds


def check_object(obj):
    p = run([RECORDMCOUNT, "--check", obj], check=False)
    assert p.returncode == 0, p.stdout + p.stderr


def check_program(compiler, tmp_path, source, opt):
    """SOURCE with exit=1: records against bytes, recordmcount-ng --check,
    and the same output as without the plugin.  Returns check_exit_sites'."""
    obj, exe = build(compiler, tmp_path, source, opt, exit=1)
    check_object(obj)
    kinds = check_exit_sites(compiler, exe)
    _, native = build(compiler, tmp_path, source, opt, plugin=False)
    assert run_program(compiler, exe) == run_program(compiler, native)
    return kinds


def check_exits_c(compiler, tmp_path, opt):
    """clang_exits.c: besides the general checks, each kind of function has
    the exits its source asks for, so that a check cannot pass empty."""
    kinds = check_program(compiler, tmp_path, SRC / "clang_exits.c", opt)
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
    return kinds


@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("compiler", CLANG14, ids=ids(CLANG14))
def test_every_way_out_has_its_exit_site(compiler, tmp_path, opt):
    check_exits_c(compiler, tmp_path, opt)


@pytest.mark.parametrize("compiler", [c for c in CLANG14 if c.arch == "aarch64"], ids=["aarch64"])
def test_pointer_authenticating_returns(compiler, tmp_path):
    """armv8.3-a's retaa: the site right in front of it."""
    check_exits_c(compiler, tmp_path, "-O2 -march=armv8.3-a landing")


@pytest.mark.parametrize("opt", ["-O0", "-O2", "-Os landing"])
@pytest.mark.parametrize("compiler", CLANG14, ids=ids(CLANG14))
def test_exceptions_through_exit_sites(compiler, tmp_path, opt):
    """C++ exceptions thrown through functions with exit sites, rethrown,
    destructors run on the way; an inline (COMDAT) function."""
    kinds = check_program(compiler, tmp_path, SRC / "clang_throw.cc", opt)
    assert kinds["_Z6middlei"] and kinds["_Z7catcheri"] and kinds["_Z5twicei"]


@pytest.mark.parametrize("compiler", OTHER_CLANGS, ids=ids(OTHER_CLANGS))
def test_other_clang_versions(compiler, tmp_path):
    """-Os has every kind: conditional tail calls on x86_64 too."""
    check_exits_c(compiler, tmp_path, "-Os")


@pytest.mark.parametrize("compiler", CLANG, ids=ids(CLANG))
def test_exit0_is_the_default_and_adds_nothing(compiler, tmp_path):
    """exit=0 writes the object byte for byte as without the argument, and
    it has entry records only."""
    src = SRC / "clang_exits.c"
    default, off = tmp_path / "default.o", tmp_path / "off.o"
    run([*compiler.driver(src), "-O2", *compiler.flags(), "-c", src, "-o", default])
    run([*compiler.driver(src), "-O2", *compiler.flags(exit=0), "-c", src, "-o", off])
    assert default.read_bytes() == off.read_bytes()
    exe = tmp_path / "off"
    run([*compiler.driver(src), *compiler.link, off, "-o", exe])
    with Image(exe) as image:
        assert {s.kind for s in image.sites()} == {KIND_ENTRY}


@pytest.mark.parametrize("compiler", CLANG14, ids=ids(CLANG14))
def test_exit_sites_need_the_code_generated_here(compiler, tmp_path):
    """With -flto the code is generated by the linker, which never loads
    the plugin: exit=1 is an error that says so, and no object is written."""
    src, obj = SRC / "clang_exits.c", tmp_path / "lto.o"
    p = run([*compiler.driver(src), "-O2", "-flto", *compiler.flags(exit=1), "-c", src,
             "-o", obj], check=False)
    assert p.returncode != 0 and "exit=1 needs the code generated in this compile" in p.stderr
    assert not obj.exists()


@pytest.mark.parametrize("linker", ["bfd", "gold", "lld"])
@pytest.mark.parametrize("compiler", CLANG14, ids=ids(CLANG14))
def test_comdat_keeps_one_copy_of_exit_records(compiler, tmp_path, linker):
    """An inline function in two objects: the linker keeps one copy, and
    with it exactly its own exit records, also with --gc-sections (gold
    keeps records only through the .reloc reference from the text)."""
    src = SRC.parent
    objs = []
    for name in ("comdat_a", "comdat_b"):
        obj = tmp_path / f"{name}.o"
        run([*compiler.driver(src / f"{name}.cc"), "-O2", "-ffunction-sections",
             *compiler.flags(exit=1), f"-I{src}", "-c", src / f"{name}.cc", "-o", obj])
        objs.append(obj)
    exe = tmp_path / "comdat"
    run([*compiler.cxx, *compiler.link, f"-fuse-ld={linker}", "-Wl,--gc-sections", *objs,
         "-o", exe])
    kinds = check_exit_sites(compiler, exe)
    assert kinds["_Z13shared_inlinei"] == [KIND_EXIT]
    assert kinds["_Z12shared_twiceIiET_S0_"] == [KIND_EXIT]
