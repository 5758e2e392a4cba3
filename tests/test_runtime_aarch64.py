# SPDX-License-Identifier: MIT
"""libftpad on aarch64, under qemu-aarch64.

tests/runtime/rt_aarch64.c is compiled with the aarch64 GCC plugin (only
its f_* functions padded), linked with build/runtime/aarch64/libftpad.a
(static: qemu needs no sysroot) or libftpad.so (PIE, run with -L), and run
under qemu-aarch64.  What it prints is checked here against the ELF file:
ip is the symbol, parent_ip the return address of the very BL that called
the function, arguments come through x0-x7 and the stack, results survive a
callback that destroys every call-clobbered register, and disabling puts
back the exact bytes.  Each with and without -mbranch-protection=standard
(bti c at the entry), the main ones at -O0, -O2 and -Os."""
import os
import pathlib
import re
import shutil
import struct

import pytest

import ftpadtest
from ftpadtest import A64_PLUGIN, BUILD, FLAG_BTI, INCLUDE, Image, run

SRC = pathlib.Path(__file__).parent / "runtime"
RT = SRC / "rt_aarch64.c"
IPA_RA = SRC / "ipa_ra_aarch64.c"
CC = "aarch64-linux-gnu-gcc-12"
SYSROOT = "/usr/aarch64-linux-gnu"
LIBDIR = BUILD / "runtime" / "aarch64"
NOP = 0xd503201f
MOV_X9_X30 = 0xaa1e03e9
# What call_all() calls, in order: (function, caller, first arguments).
CALLS = [("f_add", "call_all", [2, 3]), ("f_fma", "call_all", []),
         ("f_big", "call_all", [3]), ("f_ten", "call_all", list(range(1, 11))),
         ("f_outer", "call_all", [4]), ("f_nested.0", "f_outer", [7]),
         ("f_caller", "call_all", [10]), ("f_add", "f_caller", [10, 1])]
BRANCH_PROTECTION = {"plain": [], "bti": ["-mbranch-protection=standard"]}
OPTS = ["-O0", "-O2", "-Os"]


@pytest.fixture(scope="module")
def a64():
    for tool in (CC, "qemu-aarch64"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: scripts/install-deps.sh installs it")
    for p in (A64_PLUGIN, LIBDIR / "libftpad.a", LIBDIR / "libftpad.so"):
        if not p.exists():
            pytest.fail(f"{p} is missing: run `make` with {CC} installed")


def build(tmp_path, source, flags=(), plugin_args=None, static=True, name=None, opt="-O2"):
    """Compile SOURCE with the aarch64 plugin and link it with libftpad."""
    exe = tmp_path / (name or source.stem)
    obj = exe.with_suffix(".o")
    args = {"include": "f_*", **(plugin_args or {})}
    run([CC, opt, "-g", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", *flags,
         *ftpadtest.plugin_flags(A64_PLUGIN, **args), "-c", source, "-o", obj])
    # f_nested's address is taken: GCC builds its trampoline on the stack.
    link = [CC, *flags, obj, "-o", exe, "-Wl,--no-warn-execstack"]
    if static:
        run([*link, "-static", LIBDIR / "libftpad.a"])
    else:
        run([*link, "-pie", f"-L{LIBDIR}", "-lftpad", f"-Wl,-rpath,{LIBDIR}"])
    return exe


def qemu(exe, *args, env=None, check=True):
    return run(["qemu-aarch64", "-L", SYSROOT, exe, *args],
               env={**os.environ, **(env or {})}, check=check)


def word(image, addr):
    return struct.unpack("<I", image.read(addr, 4))[0]


def bl_target(insn, addr):
    """Where the BL at addr branches to (asserting that it is one)."""
    assert insn >> 26 == 0b100101, f"{insn:08x} at {addr:#x} is not a BL"
    imm26 = insn & 0x3ffffff
    return addr + ((imm26 - (1 << 26) if imm26 & (1 << 25) else imm26) << 2)


def function_at(funcs, addr):
    return next(n for n, (a, size) in funcs.items() if a <= addr < a + size)


@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("bp", sorted(BRANCH_PROTECTION))
def test_ip_parent_ip_and_arguments(tmp_path, a64, bp, opt):
    exe = build(tmp_path, RT, BRANCH_PROTECTION[bp], opt=opt)
    out = qemu(exe, "trace").stdout
    events = re.findall(r"^event (\S+) ip=(0x[0-9a-f]+) parent=(0x[0-9a-f]+) args=(\S+)$",
                        out, re.M)
    assert [e[0] for e in events] == [c[0] for c in CALLS], out
    assert "after-unregister events=0" in out
    with Image(exe) as image:
        funcs = image.functions()
        sites = {s.name: s for s in image.sites()}
        assert all(bool(s.flags & FLAG_BTI) == (bp == "bti") for s in sites.values())
        for (name, ip, parent, args), (_, caller, want) in zip(events, CALLS):
            ip, parent = int(ip, 16), int(parent, 16)
            assert ip == funcs[name][0], f"{name}: ip is not the symbol"
            assert function_at(funcs, parent) == caller, f"{name}: parent_ip {parent:#x}"
            # parent_ip returns right behind the BL that called this function
            # (f_outer calls f_nested through a pointer: BLR).
            insn = word(image, parent - 4)
            if name == "f_nested.0":
                assert insn & 0xfffffc1f == 0xd63f0000, f"{insn:08x} is not a BLR"
            else:
                assert bl_target(insn, parent - 4) == ip
            got = [int(a) for a in args.split(",")][:len(want)]
            assert got == want, f"{name}: arguments"


@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("bp", sorted(BRANCH_PROTECTION))
def test_results_survive_a_callback_clobbering_every_register(tmp_path, a64, bp, opt):
    exe = build(tmp_path, RT, BRANCH_PROTECTION[bp], opt=opt)
    assert qemu(exe, "clobber").stdout.strip() == "clobber ok 8"


@pytest.mark.parametrize("bp", sorted(BRANCH_PROTECTION))
def test_enabling_changes_one_word_and_disabling_restores_it(tmp_path, a64, bp):
    exe = build(tmp_path, RT, BRANCH_PROTECTION[bp])
    out = qemu(exe, "bytes").stdout
    pads = {}
    for phase, entry, words in re.findall(r"^pad (\w+) (0x[0-9a-f]+) (.+)$", out, re.M):
        pads.setdefault(int(entry, 16), {})[phase] = [int(w, 16) for w in words.split()]
    assert len(pads) == 3, out
    with Image(exe) as image:
        sites = {s.entry: s for s in image.sites()}
        for entry, phases in pads.items():
            site = sites[entry]
            assert phases["before"] == list(struct.unpack("<6I", image.read(entry - 8, 24)))
            assert phases["after"] == phases["before"], "disabling must restore every byte"
            i = 2 + (site.site - entry) // 4  # the site's index in the dump
            assert phases["before"][i] == NOP and phases["before"][i - 1] == MOV_X9_X30
            enabled, before = phases["enabled"], phases["before"]
            # Only the slot (the ops pointer) and the site word change.
            changed = [k for k in range(6) if enabled[k] != before[k]]
            assert changed == [0, 1, i], f"{entry:#x}: words {changed} changed"
            # A BL to the stub page mapped near the module, not into it.
            stub = bl_target(enabled[i], site.site)
            with pytest.raises(KeyError):
                image.read(stub, 4)
            assert enabled[0] | enabled[1] << 32 != NOP | NOP << 32


@pytest.mark.parametrize("bp", sorted(BRANCH_PROTECTION))
def test_unwinding_from_a_callback(tmp_path, a64, bp):
    """backtrace() in a callback walks through the trampoline (its CFI takes
    x16 as the return column) into the traced function, right behind its
    site, and on to its caller with the return address saved from x9."""
    exe = build(tmp_path, RT, BRANCH_PROTECTION[bp])
    frames = [int(a, 16) for a in re.findall(r"^frame (0x[0-9a-f]+)$",
                                              qemu(exe, "backtrace").stdout, re.M)]
    with Image(exe) as image:
        funcs = image.functions()
        site = next(s for s in image.sites() if s.name == "f_add").site
        i = frames.index(site + 4)
        assert function_at(funcs, frames[i - 1]) == "ftpad_trampoline"
        assert function_at(funcs, frames[i + 1]) == "f_caller"
        assert function_at(funcs, frames[i + 2]) in ("cmd_backtrace", "main")


LIB_SOURCE = """
long lib_add(long a, long b)
{
	return a + b;
}
"""


@pytest.mark.parametrize("bp", sorted(BRANCH_PROTECTION))
def test_dlopened_library(tmp_path, a64, bp):
    """A padded library dlopened by the program is traced through its own
    stub page, within BL's reach of it wherever the loader put it."""
    (tmp_path / "lib.c").write_text(LIB_SOURCE)
    lib = tmp_path / "liblib.so"
    run([CC, "-O2", "-fPIC", "-shared", *BRANCH_PROTECTION[bp],
         *ftpadtest.plugin_flags(A64_PLUGIN), tmp_path / "lib.c", "-o", lib])
    with Image(lib) as image:
        assert [s.name for s in image.sites()] == ["lib_add"]
    exe = build(tmp_path, RT, BRANCH_PROTECTION[bp], static=False)
    out = qemu(exe, "dlopen", lib).stdout
    m = re.fullmatch(r"dlopen ok lib_add lib=(0x[0-9a-f]+) main=(0x[0-9a-f]+) "
                     r"parent=(0x[0-9a-f]+)\n", out)
    assert m, out
    lib_add, main, parent = (int(x, 16) for x in m.groups())
    with Image(exe) as image:
        funcs = image.functions()
        # parent_ip is in cmd_dlopen (or main, if inlined) of the PIE.
        assert function_at(funcs, parent - main + funcs["main"][0]) in ("cmd_dlopen", "main")


@pytest.mark.parametrize("bp", sorted(BRANCH_PROTECTION))
def test_redirect_and_rewritten_arguments(tmp_path, a64, bp):
    exe = build(tmp_path, RT, BRANCH_PROTECTION[bp])
    assert qemu(exe, "redirect").stdout.strip() == "redirect ok"


@pytest.mark.parametrize("method", ["default", "procmem", "mprotect"])
def test_toggling_code_already_run(tmp_path, a64, method):
    """qemu translates code once and does not see /proc/self/mem writes;
    the runtime must notice (its probe) and still count every call."""
    exe = build(tmp_path, RT)
    env = {} if method == "default" else {"FTPAD_TEXT_WRITE": method}
    assert qemu(exe, "toggle", "40", env=env).stdout.strip() == "toggle ok 40"


def test_shared_libftpad_in_a_pie(tmp_path, a64):
    exe = build(tmp_path, RT, BRANCH_PROTECTION["bti"], static=False)
    with Image(exe) as image:
        assert image.elf["e_type"] == "ET_DYN"
    assert qemu(exe, "clobber").stdout.strip() == "clobber ok 8"
    assert qemu(exe, "toggle", "10").stdout.strip() == "toggle ok 10"


@pytest.mark.parametrize("static", [True, False], ids=["static", "pie"])
def test_printing_tracer(tmp_path, a64, static):
    exe = build(tmp_path, RT, static=static)
    trace = tmp_path / "trace.txt"
    p = qemu(exe, "calls", env={"FTPAD_FILTER": "f_a*,f_t*", "FTPAD_OUTPUT": str(trace)})
    assert p.stdout.strip() == "calls ok 8"
    lines = trace.read_text().splitlines()
    calls = [re.match(r"\S+-\d+ (\S+) <-(\S+)$", line).groups() for line in lines[:-1]]
    assert calls == [("f_add", "call_all"), ("f_ten", "call_all"), ("f_add", "f_caller")]
    assert lines[-1] == "ftpad: 8 sites found, 2 sites enabled, 3 calls seen"


def test_ipa_ra_stays_off(tmp_path, a64):
    exe = build(tmp_path, IPA_RA, plugin_args={"include": "leaf"})
    p = qemu(exe, check=False)
    assert p.returncode == 0 and p.stdout.startswith("OK"), p.stdout + p.stderr


def test_ipa_ra_control_fails(tmp_path, a64):
    """Left on, IPA-RA lets caller() keep values in registers the pad's
    mov x9, x30 and the callback destroy: the same check must fail."""
    exe = build(tmp_path, IPA_RA, plugin_args={"include": "leaf", "unsafe_ipa_ra": 1})
    p = qemu(exe, check=False)
    assert p.returncode == 1 and p.stdout.startswith("MISMATCH"), p.stdout + p.stderr


@pytest.fixture(scope="module")
def a64_stress(a64, tmp_path_factory):
    """tests/runtime/stress.c (see test_runtime_threads.py), every function
    padded, built for aarch64."""
    exe = tmp_path_factory.mktemp("a64stress") / "stress"
    run([CC, "-O2", "-g", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", "-pthread",
         *ftpadtest.plugin_flags(A64_PLUGIN), SRC / "stress.c", "-static",
         LIBDIR / "libftpad.a", "-o", exe])
    return exe


def test_toggling_under_running_threads(a64_stress):
    """Four threads in hot loops over traced functions while the main thread
    registers, refilters and unregisters 10,000 times: every callback's ip
    and arguments, every result, no late callback.  The single-word NOP <->
    BL needs no trap, so none is counted.  Default write method only: see
    docs/runtime.md for FTPAD_TEXT_WRITE=mprotect under qemu-user."""
    p = qemu(a64_stress, "race", "4", "10000")
    assert p.stdout == "ok traps=0\n", p.stdout


def test_no_call_lost_while_enabled(a64_stress):
    p = qemu(a64_stress, "exact", "4", "300")
    assert p.stdout.startswith("ok "), p.stdout
