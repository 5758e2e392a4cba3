# SPDX-License-Identifier: MIT
"""Exit sites (docs/format.md "Exit sites (version 2)") from the GCC plugin,
for every GCC the build made a plugin for (GCC 11 and 12, x86_64 and the
aarch64 cross compilers: <build>/ftpad-plugins.txt, as ftpadtest.COMPILERS
reads it).

Everything is checked from the real bytes of the linked program: each
return instruction of a padded function must sit right behind one exit NOP
with a kind-1 record, each tail call's jump behind one with a kind-2
record, and there must be no other exit record.  recordmcount-ng --check
applies libftpad's own pad rule to the objects, and the programs (aarch64
ones under qemu-aarch64) must print what they print without the plugin.

The checks take a ftpadtest.Compiler and a few paths, so that the clang
pass's tests can run them over their own part of ftpadtest.COMPILERS."""
import pathlib

import capstone
import pytest

from ftpadtest import A64_NOP, COMPILERS, NOP5, RECORDMCOUNT, Image, run

SRC = pathlib.Path(__file__).parent / "src" / "exit"
# thunks.cc: C++ this-adjusting thunks, which GCC writes as assembly at -O0.
SOURCES = ["exits.c", "exits.cc", "../thunks.cc"]
KIND_ENTRY, KIND_EXIT, KIND_TAIL_EXIT = 0, 1, 2
VERSION_EXIT = 2

GCCS = [c for c in COMPILERS if c.kind == "gcc"]
EVERY_GCC = pytest.mark.parametrize("compiler", GCCS, ids=[c.id for c in GCCS])
OPTS = ["-O0", "-O1", "-O2", "-O3", "-Os", "-O2 -fPIC"]


def landing_flags(compiler):
    """The landing pads and return-address signing: the exit NOP must go
    behind aarch64's autiasp, right before the ret."""
    return ["-fcf-protection"] if compiler.arch == "x86_64" else ["-mbranch-protection=standard"]


def build(tmp_path, compiler, source, flags, **plugin_args):
    """SOURCE compiled with the plugin and exit=1 into an object, which
    recordmcount-ng --check must accept, and linked into a program."""
    source = SRC / source
    obj, exe = tmp_path / (source.name + ".o"), tmp_path / (source.name + ".exe")
    # No jump tables: an indirect jump is then always a tail call, so the
    # check can tell them apart from the bytes alone.
    run([*compiler.driver(source), *flags, "-fno-jump-tables",
         *compiler.flags(**{"exit": 1, **plugin_args}), "-c", source, "-o", obj])
    checked = run([RECORDMCOUNT, "--check", obj])
    assert " 0 violations" in checked.stdout, checked.stdout
    run([*compiler.driver(source), *flags, *compiler.link, obj, "-o", exe])
    return obj, exe


def run_program(compiler, exe):
    """The program's exit status and output."""
    runner = [] if compiler.arch == "x86_64" else ["qemu-aarch64"]
    p = run([*runner, exe], check=False)
    return p.returncode, p.stdout


class Disassembler:
    """The exits of one function's code, for one architecture."""

    def __init__(self, arch):
        self.arch = arch
        if arch == "x86_64":
            self.cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
            self.nop, self.returns, self.jump = NOP5, {"ret", "retq"}, "jmp"
            self.indirect = set()
        else:
            self.cs = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
            self.nop, self.returns, self.jump = A64_NOP, {"ret", "retaa", "retab"}, "b"
            self.indirect = {"br", "braa", "brab", "braaz", "brabz"}
        self.cs.detail = True

    def exits(self, code, start, inside):
        """{address: kind} of every return and tail-call jump in CODE at
        START; inside(address) says whether a branch target is still in
        the function (its hot or its cold part)."""
        out = {}
        for insn in self.cs.disasm(code, start):
            if insn.mnemonic in self.returns:
                out[insn.address] = KIND_EXIT
            elif insn.mnemonic == self.jump or insn.mnemonic in self.indirect:
                target = self.direct_target(insn)
                if target is None or not inside(target):
                    out[insn.address] = KIND_TAIL_EXIT
            elif self.conditional(insn):
                target = self.direct_target(insn)
                assert target is None or inside(target), \
                    f"{insn.address:#x}: conditional jump out of the function: {insn}"
        return out

    def conditional(self, insn):
        """A conditional branch (capstone 4 puts aarch64's bl among the
        jumps, so the mnemonics say it)."""
        if self.arch == "x86_64":
            return insn.group(capstone.CS_GRP_JUMP) and insn.mnemonic != "jmp"
        return insn.mnemonic.startswith("b.") or insn.mnemonic in {"cbz", "cbnz", "tbz", "tbnz"}

    def direct_target(self, insn):
        ops = insn.operands
        if len(ops) == 1 and ops[0].type == (capstone.x86.X86_OP_IMM if self.arch == "x86_64"
                                             else capstone.arm64.ARM64_OP_IMM):
            return ops[0].imm
        return None


def function_parts(image):
    """{entry address: [(start, size), ...]}: each function's symbol and
    its .cold part's, if it has one."""
    symbols = image.function_symbols()
    by_name = {name: addr for name, addr, _ in symbols}
    parts = {}
    for name, addr, size in symbols:
        owner = by_name.get(name[:-len(".cold")]) if name.endswith(".cold") else addr
        if owner is not None:
            parts.setdefault(owner, []).append((addr, size))
    return parts


def check_exit_sites(image, arch):
    """Every exit of every padded function of IMAGE has exactly one exit
    site with its record, and there is no other exit record.  Returns
    {function name: sorted kinds of its exit records}."""
    dis = Disassembler(arch)
    sites = image.sites()
    entries = {s.entry: s for s in sites if s.kind == KIND_ENTRY}
    exits = {}
    for s in sites:
        if s.kind == KIND_ENTRY:
            continue
        assert s.entry in entries, f"exit record {s} of a function with no entry record"
        entry = entries[s.entry]
        assert (s.version, s.arch, s.before, s.after, s.flags) == \
            (VERSION_EXIT, entry.arch, 0, 0, 0), s
        assert (s.ops, s.name_addr, s.site_len) == \
            (entry.ops, entry.name_addr, len(dis.nop)), s
        assert s.site not in exits, f"two records for the exit site {s}"
        exits[s.site] = s
    parts = function_parts(image)
    summary = {}
    for entry, record in entries.items():
        ranges = parts[entry]
        found = {}
        for start, size in ranges:
            found.update(dis.exits(image.read(start, size), start,
                                   lambda a: any(b <= a < b + n for b, n in ranges)))
        want = {}
        for address, kind in found.items():
            site = address - len(dis.nop)
            assert image.read(site, len(dis.nop)) == dis.nop, \
                f"{record.name}: no exit NOP in front of the exit at {address:#x}"
            assert site in exits, f"{record.name}: the exit NOP at {site:#x} has no record"
            want[site] = kind
        got = {a: s.kind for a, s in exits.items() if s.entry == entry}
        assert got == want, f"{record.name}: exit records {got} != exits in its code {want}"
        summary[record.name] = sorted(got.values())
    return summary


def native_output(tmp_path, compiler, source, flags):
    """What SOURCE's program prints when built without the plugin."""
    exe = tmp_path / "native.exe"
    run([*compiler.driver(SRC / source), *flags, *compiler.link, SRC / source, "-o", exe])
    return run_program(compiler, exe)


@EVERY_GCC
@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("landing", [False, True], ids=["plain", "landing"])
@pytest.mark.parametrize("source", SOURCES)
def test_every_exit_has_a_site(tmp_path, compiler, opt, landing, source):
    """Every return and tail call of every padded function has its exit
    site and record, and the program prints what it prints without them
    (the C++ one unwinds exceptions through functions with exit sites)."""
    flags = [*opt.split(), *(landing_flags(compiler) if landing else [])]
    _, exe = build(tmp_path, compiler, source, flags)
    with Image(exe) as image:
        summary = check_exit_sites(image, compiler.arch)
    assert summary, "no padded functions"
    assert run_program(compiler, exe) == native_output(tmp_path, compiler, source, flags)


@EVERY_GCC
def test_what_the_program_exercises(tmp_path, compiler):
    """exits.c at -O2 has what the check above must see: several returns
    in one function, direct and indirect tail calls, and functions that
    never return with no exit site at all."""
    _, exe = build(tmp_path, compiler, "exits.c", ["-O2"])
    with Image(exe) as image:
        summary = check_exit_sites(image, compiler.arch)
    assert summary["leaf"] == [KIND_EXIT]
    assert summary["many_returns"].count(KIND_EXIT) >= 2, summary
    assert summary["direct_tail"] == [KIND_TAIL_EXIT]
    assert summary["pointer_tail"] == [KIND_TAIL_EXIT]
    assert summary["fail"] == [] and summary["jump_out"] == [], summary
    for name in ("make_pair", "average", "scaled", "fib", "main"):
        assert KIND_EXIT in summary[name], (name, summary)


@EVERY_GCC
def test_exit_sites_are_off_by_default(tmp_path, compiler):
    """exit=0, the default, gives entry records only."""
    _, exe = build(tmp_path, compiler, "exits.c", ["-O2"], exit=0)
    with Image(exe) as image:
        sites = image.sites()
    assert sites and all(s.kind == KIND_ENTRY and s.version == 1 for s in sites)


@EVERY_GCC
@pytest.mark.parametrize("args, why", [
    ({"abi": "kernel"}, "the kernel ABI has no exit sites"),
    ({"record": "mcount"}, "exit sites are recorded only with record=ftpad"),
    ({"record": "patchable"}, "exit sites are recorded only with record=ftpad"),
])
def test_exit_refused_without_ftpad_records(tmp_path, compiler, args, why):
    """exit=1 needs the user ABI and ftpad records: anything else stops
    the compiler with a message that says why."""
    p = run([*compiler.driver(SRC / "exits.c"), *compiler.flags(exit=1, **args), "-c",
             SRC / "exits.c", "-o", tmp_path / "x.o"], check=False)
    assert p.returncode != 0
    assert why in p.stderr and "exit" in p.stderr, p.stderr


COMDAT_SOURCES = [SRC.parent / "comdat_a.cc", SRC.parent / "comdat_b.cc"]


@EVERY_GCC
@pytest.mark.parametrize("linker", ["bfd", "gold", "lld"])
@pytest.mark.parametrize("gc", [[], ["-ffunction-sections", "-Wl,--gc-sections"]],
                         ids=["nogc", "gc"])
def test_comdat_exit_records_follow_their_function(tmp_path, compiler, linker, gc):
    """COMDAT functions defined in two objects: whichever copy a linker
    keeps (and --gc-sections drops), its exit records are exactly its own
    and all of them, never a dropped copy's."""
    exe = tmp_path / "prog"
    # The cross gcc looks for ld.lld only under its own prefix.
    lld_path = ["-B/usr/bin/"] if compiler.arch == "aarch64" and linker == "lld" else []
    run([*compiler.cxx, "-O2", *gc, f"-fuse-ld={linker}", *lld_path, *compiler.link,
         *compiler.flags(exit=1), *COMDAT_SOURCES, "-o", exe])
    with Image(exe) as image:
        summary = check_exit_sites(image, compiler.arch)
    for name in ("_Z13shared_inlinei", "_Z12shared_twiceIiET_S0_"):
        assert summary[name] == [KIND_EXIT], summary
    assert run_program(compiler, exe) == (0, "13\n")
