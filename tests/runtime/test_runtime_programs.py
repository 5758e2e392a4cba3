# SPDX-License-Identifier: MIT
"""Real programs compiled with the GCC plugin and traced by libftpad, on
x86_64 natively and on aarch64 under qemu-aarch64.

tests/src/runtime/traced.c runs one scenario per hard case (recursion,
setjmp/longjmp, varargs, large-struct returns, float and vector arguments,
GNU C nested functions, tail calls, a signal handler interrupting a traced
function, threads, fork, dlopen/dlclose) and tests/src/runtime/traced_cxx.cc
throws C++ exceptions through traced frames.  Each is run untraced and
traced by a callback that destroys every call-clobbered register and uses
floating point: the output must be the same, and the (ip, parent_ip) of
every call must be exactly as expected: ip the callee's symbol, parent_ip
the return address of the very call instruction that called it (checked by
decoding it), in the expected caller."""
import collections
import os
import shutil
import struct

import pytest

import ftpadtest
from ftpadtest import A64_PLUGIN, BUILD, INCLUDE, Image, TEST_SRC, run

SRC = TEST_SRC / "runtime"
A64_CC = "aarch64-linux-gnu-gcc-12"
A64_CXX = "aarch64-linux-gnu-g++-12"
SYSROOT = "/usr/aarch64-linux-gnu"


class Arch:
    def __init__(self, name):
        self.name = name
        if name == "x86_64":
            self.cc, self.cxx, self.plugin = "gcc", "g++", ftpadtest.PLUGIN
            self.libdir, self.runner = BUILD / "runtime", []
        else:
            self.cc, self.cxx, self.plugin = A64_CC, A64_CXX, A64_PLUGIN
            self.libdir, self.runner = BUILD / "runtime" / "aarch64", ["qemu-aarch64", "-L", SYSROOT]

    def check_tools(self):
        for tool in (self.cc, self.cxx, *self.runner[:1]):
            if shutil.which(tool) is None:
                pytest.fail(f"{tool} is not installed: scripts/install-deps.sh installs it")
        for p in (self.plugin, self.libdir / "libftpad.so"):
            if not p.exists():
                pytest.fail(f"{p} is missing: run `make` first")

    def run(self, exe, *args, env=None):
        return run([*self.runner, exe, *args], env={**os.environ, **(env or {})})


ARCHES = ["x86_64", "aarch64"]
# A tail-called function returns to its tail caller's caller: the call
# before its parent_ip went to the tail caller.
TAIL_CALLERS = {"t_tail_b": "t_tail_a"}


def parse_events(text):
    """{pid: [(tid, ip, parent_ip, marks_so_far)]}, and the marks."""
    marks, events = [], collections.defaultdict(list)
    for line in text.splitlines():
        f = line.split()
        if f[0] == "mark":
            marks.append((f[1], int(f[2], 16), int(f[4])))
        else:
            events[int(f[1])].append((int(f[2]), int(f[3], 16), int(f[4], 16)))
    return marks, events


class Resolver:
    """Addresses of the process back to (module, function, file address)."""

    def __init__(self, arch):
        self.arch = arch
        self.modules = []  # (base, Image, {name: (addr, size)})

    def add(self, base, image):
        self.modules.append((base, image, image.function_symbols()))

    def function(self, addr):
        """(image, base, name, start) of the function holding addr."""
        for base, image, funcs in reversed(self.modules):
            for name, start, size in funcs:
                if start <= addr - base < start + max(size, 1):
                    return image, base, name, start
        return None, None, None, None

    def name_at(self, addr):
        """The function exactly at addr, with GCC's .N/.cold suffixes off."""
        image, base, name, start = self.function(addr)
        assert image is not None, f"{addr:#x} is in no module"
        assert start == addr - base, f"{addr:#x} is {name}+{addr - base - start:#x}, not an entry"
        return name.split(".")[0]

    def caller(self, parent, ip):
        """The function parent_ip returns into, after checking that the
        instruction before it is a call: a direct one to ip (or to a PLT
        entry), or an indirect one.  Outside every module: "<libc>"."""
        image, base, name, _ = self.function(parent)
        if image is None:
            return "<libc>"
        self.check_call(image, base, parent, ip)
        return name.split(".")[0]

    def check_call(self, image, base, parent, ip):
        file_parent = parent - base
        if self.arch == "x86_64":
            import capstone
            md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
            for size in range(2, 8):
                code = image.read(file_parent - size, size)
                insns = list(md.disasm(code, file_parent - size))
                if len(insns) == 1 and insns[0].size == size and insns[0].mnemonic == "call":
                    op = insns[0].op_str
                    if op.startswith("0x"):
                        self.check_target(image, base, int(op, 16), ip)
                    return
            raise AssertionError(f"no call instruction ends at {parent:#x}")
        insn = struct.unpack("<I", image.read(file_parent - 4, 4))[0]
        if insn & 0xfffffc1f == 0xd63f0000:  # blr
            return
        assert insn >> 26 == 0b100101, f"{insn:08x} before {parent:#x} is neither BL nor BLR"
        imm26 = insn & 0x3ffffff
        target = file_parent - 4 + ((imm26 - (1 << 26) if imm26 & (1 << 25) else imm26) << 2)
        self.check_target(image, base, target, ip)

    def check_target(self, image, base, target, ip):
        """A direct call reaches ip itself, a function that tail-calls it,
        or a PLT entry (another module)."""
        if target + base == ip:
            return
        callee = self.name_at(ip)
        if TAIL_CALLERS.get(callee) == self.function(target + base)[2]:
            return
        for sec in image.elf.iter_sections():
            if sec.name.startswith(".plt") and sec["sh_addr"] <= target < sec["sh_addr"] + sec["sh_size"]:
                return
        raise AssertionError(f"the call before the return address goes to {target:#x}, "
                             f"not to ip {ip - base:#x}")


def fib_edges(n, parent):
    out = [("t_fib", parent)]
    if n >= 2:
        out += fib_edges(n - 1, "t_fib") + fib_edges(n - 2, "t_fib")
    return out


# The main thread's calls, scenario by scenario (traced.c).
MAIN_EDGES = [
    fib_edges(10, "main"),
    [("t_jump_outer", "scenario_longjmp"), ("t_jump_inner", "t_jump_outer"),
     ("t_after_jump", "scenario_longjmp")],
    [("t_vformat", "scenario_varargs"), ("t_vsum", "scenario_varargs"),
     ("t_vsum", "scenario_varargs")],
    [("t_make_big", "scenario_struct")],
    [("t_floats", "scenario_floats")],
    # qsort calls t_compar through GCC's stack trampoline: from libc.
    [("t_sort_with_nested", "scenario_nested"), ("t_compar", "<libc>"),
     ("t_outer", "scenario_nested"), ("t_nested", "t_outer"), ("t_nested", "t_outer")],
    # A tail call: t_tail_b returns straight to t_tail_a's caller.
    [("t_tail_a", "scenario_tail"), ("t_tail_b", "scenario_tail")],
    [("t_raises", "scenario_signals"), ("t_in_handler", "on_signal"),
     ("t_spins", "scenario_signals"), ("t_in_handler", "on_signal")],
    [],  # threads: in the other threads
    [("t_child_work", "scenario_fork"), ("t_leaf", "t_child_work")],
    [("t_lib_square", "scenario_dlopen"), ("t_lib_square", "scenario_dlopen")],
]
THREAD_EDGES = [("t_thread_work", "thread_main")] + [("t_leaf", "t_thread_work")] * 3
CHILD_EDGES = [("t_child_work", "scenario_fork"), ("t_leaf", "t_child_work")]
OUTPUT = """recursion: 55
longjmp: 5 50
varargs: 6.7500 55.0000 [7 2.50 x 0.125 1234567890123]
struct: 103 127 5355
floats: 1747.187500
nested: 815 54321 1
tail: 15
signals: 20 1 48
threads: 36 66 96 126
fork: 0 14
dlopen: 9 16
"""


def squash(edges):
    """Consecutive qsort comparisons count as one: their number is libc's."""
    out = []
    for e in edges:
        if not (e == ("t_compar", "<libc>") and out and out[-1] == e):
            out.append(e)
    return out


@pytest.fixture(scope="module", params=ARCHES)
def traced(request, tmp_path_factory):
    arch = Arch(request.param)
    arch.check_tools()
    d = tmp_path_factory.mktemp(f"traced_{arch.name}")
    plugin = f"-fplugin={arch.plugin}"
    run([arch.cc, "-O2", "-g", plugin, "-shared", "-fPIC", SRC / "traced_lib.c",
         "-o", d / "libtraced_lib.so"])
    # t_compar's stack trampoline needs an executable stack.
    run([arch.cc, "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-pthread", plugin, f"-I{INCLUDE}",
         SRC / "traced.c", f"-L{arch.libdir}", "-lftpad", f"-Wl,-rpath,{arch.libdir}",
         "-Wl,-z,execstack", "-Wl,--no-warn-execstack", "-o", d / "traced"])
    return arch, d


def test_tail_call_and_static_chain_are_real(traced):
    """Without a real tail call and a real static chain the test below
    proves nothing: check the compiler made them."""
    arch, d = traced
    with Image(d / "traced") as image:
        funcs = image.functions()
        code = image.read(funcs["t_tail_a"][0], funcs["t_tail_a"][1])
        outer = image.read(funcs["t_outer"][0], funcs["t_outer"][1])
        nested = next(n for n in funcs if n.startswith("t_nested."))
    if arch.name == "x86_64":
        import capstone
        md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        tail = [i for i in md.disasm(code, funcs["t_tail_a"][0]) if i.mnemonic == "jmp"]
        assert tail and int(tail[-1].op_str, 16) == funcs["t_tail_b"][0]
        assert any("r10" in i.op_str for i in md.disasm(outer, 0)), "t_outer sets no static chain"
    else:
        words = struct.unpack(f"<{len(code) // 4}I", code)
        assert any(w >> 26 == 0b000101 for w in words), "t_tail_a has no B (tail call)"
        words = struct.unpack(f"<{len(outer) // 4}I", outer)
        # Some instruction of t_outer writes x18 (Rd = 18).
        assert any(w & 0x1f == 18 and w >> 26 != 0b100101 for w in words)
    assert nested


def test_program_traced_with_exact_edges(traced, tmp_path):
    arch, d = traced
    lib = d / "libtraced_lib.so"
    plain = arch.run(d / "traced", lib)
    assert plain.stdout == OUTPUT
    events_file = tmp_path / "events.txt"
    traced_run = arch.run(d / "traced", lib,
                          env={"FTPAD_TRACED": "1", "FTPAD_EVENTS": str(events_file)})
    assert traced_run.stdout == plain.stdout
    marks, events = parse_events(events_file.read_text())
    assert len(events) == 2, "one parent and one forked child"
    resolver = Resolver(arch.name)
    exe = Image(d / "traced")
    resolver.add(next(v for k, v, _ in marks if k == "exe"), exe)
    lib_bases = [v for k, v, _ in marks if k == "lib"]
    parent_pid, child_pid = sorted(events, key=lambda pid: -len(events[pid]))
    main_tid = events[parent_pid][0][0]
    # Each scenario's events end where its mark says.
    bounds = [n for k, _, n in marks if k == "scenario"] + [len(events[parent_pid])]
    main_events = [e for e in events[parent_pid] if e[0] == main_tid]
    got, start, lib_round = [], 0, 0
    for i, end in enumerate(bounds):
        section = [e for e in events[parent_pid][start:end] if e[0] == main_tid]
        edges = []
        for _, ip, parent in section:
            if i == len(bounds) - 1:  # dlopen: the library loaded for this call
                resolver.modules = resolver.modules[:1]
                resolver.add(lib_bases[lib_round], Image(lib))
                lib_round += 1
            edges.append((resolver.name_at(ip), resolver.caller(parent, ip)))
        got.append(squash(edges))
        start = end
    for i, (g, w) in enumerate(zip(got, MAIN_EDGES)):
        assert g == w, f"scenario {i}"
    assert len(got) == len(MAIN_EDGES)
    assert sum(len(s) for s in got) < len(main_events) + 1
    # Threads: each of the four saw its own calls, all of them.
    resolver.modules = resolver.modules[:1]
    threads = collections.defaultdict(list)
    for tid, ip, parent in events[parent_pid]:
        if tid != main_tid:
            threads[tid].append((resolver.name_at(ip), resolver.caller(parent, ip)))
    assert sorted(threads.values()) == [THREAD_EDGES] * 4
    child = [(resolver.name_at(ip), resolver.caller(parent, ip)) for _, ip, parent in events[child_pid]]
    assert child == CHILD_EDGES


@pytest.fixture(scope="module", params=ARCHES)
def traced_cxx(request, tmp_path_factory):
    arch = Arch(request.param)
    arch.check_tools()
    d = tmp_path_factory.mktemp(f"traced_cxx_{arch.name}")
    run([arch.cxx, "-O2", "-g", "-Wall", "-Wextra", "-Werror", f"-fplugin={arch.plugin}",
         f"-I{INCLUDE}", SRC / "traced_cxx.cc", f"-L{arch.libdir}", "-lftpad",
         f"-Wl,-rpath,{arch.libdir}", "-o", d / "traced_cxx"])
    return arch, d / "traced_cxx"


def demangled(name):
    return {"_Z9t_throweri": "t_thrower", "_ZN7t_GuardC1Ei": "t_Guard::t_Guard",
            "_ZN7t_GuardC2Ei": "t_Guard::t_Guard", "_ZN7t_GuardD1Ev": "t_Guard::~t_Guard",
            "_ZN7t_GuardD2Ev": "t_Guard::~t_Guard", "_Z9t_handledPKc": "t_handled",
            "_Z9t_catcheri": "t_catcher", "_Z7t_afteri": "t_after"}.get(name, name)


def test_cxx_exceptions_through_traced_frames(traced_cxx, tmp_path):
    arch, exe = traced_cxx
    plain = arch.run(exe)
    assert plain.stdout == "exceptions: 4 10 5\n"
    events_file = tmp_path / "events.txt"
    traced_run = arch.run(exe, env={"FTPAD_TRACED": "1", "FTPAD_EVENTS": str(events_file)})
    assert traced_run.stdout == plain.stdout
    marks, events = parse_events(events_file.read_text())
    resolver = Resolver(arch.name)
    resolver.add(marks[0][1], Image(exe))
    (pid, evs), = events.items()
    edges = [(demangled(resolver.name_at(ip)), demangled(resolver.caller(parent, ip)))
             for _, ip, parent in evs]
    down = []
    for _ in range(4):
        down += [("t_thrower", None), ("t_Guard::t_Guard", "t_thrower")]
    # Unwinding runs the four destructors from t_thrower's cleanups.
    want = ([("t_catcher", "main")] + down + [("t_Guard::~t_Guard", "t_thrower")] * 4 +
            [("t_handled", "t_catcher"), ("t_after", "main")])
    want[1] = ("t_thrower", "t_catcher")
    for i in range(3, 9, 2):
        want[i] = ("t_thrower", "t_thrower")
    assert edges == want
