# SPDX-License-Identifier: MIT
"""libftpad on aarch64, under qemu-aarch64.

tests/src/runtime/rt_aarch64.c is compiled with the aarch64 GCC plugin (only
its f_* functions padded), linked with build/runtime/aarch64/libftpad.a
(static: qemu needs no sysroot) or libftpad.so (PIE, run with -L), and run
under qemu-aarch64.  What it prints is checked here against the ELF file:
ip is the symbol, parent_ip the return address of the very BL that called
the function, arguments come through x0-x7 and the stack, results survive a
callback that destroys every call-clobbered register, and disabling puts
back the exact bytes.  Each with and without -mbranch-protection=standard
(bti c at the entry), the main ones at -O0, -O2 and -Os."""
import os
import re
import resource
import struct

import pytest

import ftpadtest
from ftpadtest import A64_PLUGIN, BUILD, FLAG_BTI, INCLUDE, Image, TEST_SRC, require_cross, run

SRC = TEST_SRC / "runtime"
RT = SRC / "rt_aarch64.c"
RT_PADS = SRC / "rt_pads_aarch64.c"
PADS = SRC / "pads_aarch64.S"
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
    require_cross(CC, (A64_PLUGIN, LIBDIR / "libftpad.a", LIBDIR / "libftpad.so"))


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
    """tests/src/runtime/stress.c (see test_runtime_threads.py), every function
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


def test_no_call_lost_while_others_patch_the_same_sites(a64_stress):
    """As on x86_64 (test_runtime_threads.py): one ops stays, others come
    and go on the same sites, some with the full register save."""
    p = qemu(a64_stress, "exactrace", "4", "100")
    assert p.stdout == "ok traps=0\n", p.stdout


# ---- hand-made pads: the kernel layout (NOP NOP) and the full register save

BTI_C = 0xd503245f
KERNEL_PADS = ("kadd2", "kadd3_bti", "kdouble", "ksum10", "kcalls")


@pytest.fixture(scope="module")
def rt_pads(a64, tmp_path_factory):
    """tests/src/runtime/rt_pads_aarch64.c over pads_aarch64.S (records written
    by hand, so no compiler is involved), static."""
    exe = tmp_path_factory.mktemp("a64pads") / "rt_pads"
    run([CC, "-O2", "-g", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", "-pthread", RT_PADS,
         PADS, "-static", LIBDIR / "libftpad.a", "-o", exe])
    with Image(exe) as image:
        sites = {s.name: s for s in image.sites()}
    assert not any(sites[n].flags & ftpadtest.FLAG_MOV_X9 for n in KERNEL_PADS)
    assert sites["add1"].flags & ftpadtest.FLAG_MOV_X9
    return exe


def test_kernel_layout_traced(rt_pads):
    """NOP NOP pads, with and without bti c and an ops slot: the runtime
    writes the MOV itself; ip, parent_ip (right behind the BL that called)
    and the arguments, registers and stack, are exact."""
    out = qemu(rt_pads, "trace").stdout
    events = re.findall(r"^event (\S+) ip=(0x[0-9a-f]+) parent=(0x[0-9a-f]+) args=(\S+)$", out, re.M)
    assert [e[0] for e in events] == ["add1", "kadd2", "kadd3_bti", "kdouble", "ksum10", "kcalls",
                                      "kadd2", "kadd2"], out
    assert "after-unregister events=0" in out
    firsts = {"add1": 1, "kadd2": 1, "kadd3_bti": 1, "kdouble": 3}
    with Image(rt_pads) as image:
        funcs = image.functions()
        for i, (name, ip, parent, args) in enumerate(events):
            ip, parent, args = int(ip, 16), int(parent, 16), [int(a) for a in args.split(",")]
            assert ip == funcs[name][0]
            assert bl_target(word(image, parent - 4), parent - 4) == ip
            caller = "kcalls" if i >= 6 else "call_all"
            assert function_at(funcs, parent) in (caller, "cmd_trace")
            if name == "ksum10":
                assert args == list(range(1, 11))
            elif name in firsts and i < 6:
                assert args[0] == firsts[name]
        assert [int(e[3].split(",")[0]) for e in events[6:]] == [5, 7]


def test_kernel_layout_bytes(rt_pads):
    """Enabling a NOP NOP pad writes the MOV into the first NOP and a BL
    into the second (and the slot); disabling puts the NOP back at the site
    and the slot's NOPs, and keeps the MOV, as Linux does."""
    out = qemu(rt_pads, "bytes").stdout
    pads = {}
    for phase, entry, words in re.findall(r"^pad (\w+) (0x[0-9a-f]+) (.+)$", out, re.M):
        pads.setdefault(int(entry, 16), {})[phase] = [int(w, 16) for w in words.split()]
    with Image(rt_pads) as image:
        sites = {s.entry: s for s in image.sites()}
        for entry, ph in pads.items():
            site = sites[entry]
            i = 2 + (site.site - entry) // 4  # the site's index in the dump
            before, enabled, after = ph["before"], ph["enabled"], ph["after"]
            assert before == list(struct.unpack("<6I", image.read(entry - 8, 24)))
            assert before[i] == NOP and enabled[i - 1] == after[i - 1] == MOV_X9_X30
            bl_target(enabled[i], site.site)
            assert after[i] == NOP
            kernel = site.name != "add1"
            assert before[i - 1] == (NOP if kernel else MOV_X9_X30)
            if site.ops:
                assert before[:2] == after[:2] == [NOP, NOP] != enabled[:2]
            if site.flags & FLAG_BTI:
                assert before[2] == enabled[2] == after[2] == BTI_C
            changed = [k for k in range(6) if after[k] != before[k]]
            assert changed == ([i - 1] if kernel else [])


# What "k*" selects: the five above, kf0..kf63 and kpage.
K_STAR = len(KERNEL_PADS) + 64 + 1
STOP_SIGNAL = 64 - 4  # SIGRTMAX - 4 (runtime/quiesce.h)
# The program's leave to stop its threads for the MOVs (docs/runtime.md).
STOP = {"FTPAD_STOP_THREADS": "1"}


def assert_pads_as_linked(exe, stdout):
    """The four pads rt_pads dumps after a refused register are the bytes
    the linker wrote: nothing was patched."""
    refused = re.findall(r"^pad refused (0x[0-9a-f]+) (.+)$", stdout, re.M)
    assert len(refused) == 4
    with Image(exe) as image:
        for entry, words in refused:
            entry = int(entry, 16)
            assert [int(w, 16) for w in words.split()] == \
                list(struct.unpack("<6I", image.read(entry - 8, 24)))


def test_kernel_layout_refused_while_threads_run(rt_pads):
    """Without the program's leave (FTPAD_STOP_THREADS unset) the
    MOV is written only while the process is single-threaded.  With a
    second thread running, registering an ops on NOP NOP pads fails with
    -EAGAIN and a message naming a function, the thread count and the way
    out; nothing is written (the pads are the linked bytes) and no signal
    is sent (the waiting thread is never interrupted)."""
    p = qemu(rt_pads, "threads", env={"FTPAD_STOP_THREADS": ""})
    assert p.stdout.startswith("register k* with a thread: -11\n")
    assert "events 0\nstop handler installed: 0\n" in p.stdout
    assert re.search(r"error: ftpad: kadd2 and others: a kernel-ABI pad \(NOP NOP, no mov x9, "
                     r"x30 from the compiler\): its MOV can only be written while the process is "
                     rf"single-threaded, and \d+ threads run; {K_STAR} such functions not patched "
                     r"\(enable them once before starting threads, or set FTPAD_STOP_THREADS=1 ",
                     p.stderr), p.stderr
    assert_pads_as_linked(rt_pads, p.stdout)


def test_kernel_layout_enabled_while_a_thread_waits(rt_pads):
    """Another thread waits in a barrier: the MOVs are written with it
    stopped (it leaves the futex for the signal handler and waits there),
    then the BLs, and every call is traced."""
    p = qemu(rt_pads, "threads", env={"FTPAD_DEBUG": "1", **STOP})
    assert p.stdout.startswith("register k* with a thread: 0\n")
    assert "events 7\nstop handler installed: 1\n" in p.stdout
    assert f"ftpad: {K_STAR} kernel-ABI pad MOVs written with the other threads stopped; " \
        "0 threads stood between the two NOPs: x9 set" in p.stderr
    enabled = re.findall(r"^pad enabled (0x[0-9a-f]+) (.+)$", p.stdout, re.M)
    with Image(rt_pads) as image:
        sites = {s.entry: s for s in image.sites()}
        assert len(enabled) == 4
        for entry, words in enabled:
            entry, words = int(entry, 16), [int(w, 16) for w in words.split()]
            if sites[entry].name == "add1":  # not in k*
                continue
            i = 2 + (sites[entry].site - entry) // 4
            assert words[i - 1] == MOV_X9_X30
            bl_target(words[i], sites[entry].site)


def test_kernel_layout_refused_while_a_thread_blocks_signals(rt_pads):
    """A thread that blocks every signal cannot be stopped: while it runs,
    registering an ops on NOP NOP pads fails with -EAGAIN after
    FTPAD_STOP_TIMEOUT_MS, with a message naming a function and the
    thread, and nothing is written; the user layout, which needs no MOV,
    is still patched.  While the same kind of thread sleeps in the kernel
    (away from the pads), the pads are enabled."""
    p = qemu(rt_pads, "blocked", env=STOP)
    assert p.stdout.startswith("register k* with a spinning thread that blocks every signal: -11\n")
    assert "events 0\nregister add1 with that thread: 0\nevents 1\n" in p.stdout
    assert "register k* with a sleeping thread that blocks every signal: 0\nevents 7\n" \
        in p.stdout
    assert re.search(r"error: ftpad: kadd2 and others: a kernel-ABI pad \(NOP NOP, no mov x9, "
                     r"x30 from the compiler\): its MOV is written while every other thread is "
                     rf"stopped by signal {STOP_SIGNAL}, and thread \d+ did not stop within 2000 ms "
                     r"\((it blocks the signal|it did not take the signal: blocked, or not scheduled)\); "
                     rf"{K_STAR} such functions not patched", p.stderr), p.stderr
    assert_pads_as_linked(rt_pads, p.stdout)


@pytest.mark.parametrize("mode", ["translated", "singlestep"])
def test_kernel_layout_movs_written_under_running_threads(rt_pads, mode):
    """Four threads call kf0..kf63 in hot loops while 16 batches of fresh
    NOP NOP pads get their MOVs, each batch with the threads stopped
    wherever they were (8 while they run free, 8 while they wait in a
    barrier), and while the prepared ones are toggled: every result right,
    every callback's ip a kf function and parent_ip right behind a BLR,
    and the calls counted exactly in the 8 barrier-fenced windows.  With
    qemu's -singlestep, where a signal can land on any instruction,
    threads are now and then stopped right between the two NOPs and fixed
    up (counted as `stood`, not asserted: it is chance)."""
    if mode == "translated":
        p = qemu(rt_pads, "kstress", "200", env=STOP)
    else:
        p = run(["qemu-aarch64", "-singlestep", rt_pads, "kstress", "0"],
                env={**os.environ, **STOP})
    assert re.fullmatch(r"kstress ok toggles=\d+ stops=16 stood=\d+\n", p.stdout), p.stdout


def symbol(image, name):
    return image.elf.get_section_by_name(".symtab").get_symbol_by_name(name)[0]["st_value"]


def between(exe):
    """Run `between` (no core file), and check kpage's layout first."""
    with Image(exe) as image:
        site = next(s for s in image.sites() if s.name == "kpage")
        assert site.site % 4096 == 0 and not site.flags & ftpadtest.FLAG_MOV_X9
        kpage, ret = site.entry, symbol(image, "spin_victim_ret")
    p = run(["qemu-aarch64", exe, "between"], check=False, env={**os.environ, **STOP},
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    return p, kpage, ret


POISON = 0x5a5a5a5a5a5a5a5a


def test_thread_stopped_between_the_nops_gets_x9(rt_pads):
    """A thread stopped right between the two NOPs of kpage (it spins in a
    500-instruction block that ends with kpage's first NOP, the last word of
    a page; qemu takes signals only at block starts, and a block never
    crosses a page), with x9 poisoned, while kpage gets its MOV and its BL:
    the signal handler gives it x9 = x30, so when it goes on into the BL
    the callback sees the right parent_ip and kpage returns right.  Tried
    in up to 20 child processes until the stop found the thread there (it
    says so: stood=1); in practice the first."""
    p, kpage, ret = between(rt_pads)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"event ip={kpage:#x} parent={ret:#x}\nstops=1 stood=1 result=42\n" \
        "between exit 0 after" in p.stdout, p.stdout


def test_without_the_fix_up_it_crashes(rt_pads, tmp_path):
    """The control: the same program with a copy of runtime/arch/aarch64.c
    whose fix-up leaves x9 alone (linked ahead of libftpad.a, so it
    replaces that object): the thread runs the BL with the poison in x9,
    the callback gets it as parent_ip, and kpage returns there: SIGSEGV."""
    source = (ftpadtest.ROOT / "runtime" / "arch" / "aarch64.c").read_text()
    fixup = "uc->uc_mcontext.regs[9] = uc->uc_mcontext.regs[30];"
    assert source.count(fixup) == 1, "aarch64.c's x9 fix-up is no longer written so"
    copy = tmp_path / "arch" / "aarch64_nofix.c"
    copy.parent.mkdir()
    copy.write_text(source.replace(fixup, "/* no fix-up */"))
    nofix = tmp_path / "aarch64_nofix.o"
    # "../arch.h" is found through -I runtime/arch.
    run([CC, "-std=gnu11", "-O2", "-fPIC", "-fvisibility=hidden", "-mbranch-protection=standard",
         f"-I{INCLUDE}", f"-I{ftpadtest.ROOT / 'runtime' / 'arch'}",
         f"-I{ftpadtest.ROOT / 'pad'}", f"-I{ftpadtest.ROOT / 'runtime'}", "-c", copy, "-o", nofix])
    exe = tmp_path / "rt_pads_nofix"
    run([CC, "-O2", "-g", f"-I{INCLUDE}", "-pthread", RT_PADS, PADS, nofix, "-static",
         LIBDIR / "libftpad.a", "-o", exe])
    p, kpage, _ = between(exe)
    assert f"event ip={kpage:#x} parent={POISON:#x}\nbetween died of signal 11\n" in p.stdout, \
        p.stdout + p.stderr


def test_kernel_layout_toggled_under_threads_once_prepared(rt_pads):
    """Once its MOV was written (here while single-threaded), a NOP NOP pad
    toggles like the user layout, NOP <-> BL, while four threads run it:
    300 toggles, then 20 rounds counted exactly between barriers."""
    assert qemu(rt_pads, "prepared", "300").stdout == "prepared ok 300\n"


def test_full_register_save(rt_pads):
    """FTPAD_OPS_FL_SAVE_REGS: the callback reads x19-x28, the carry flag,
    pc, x9 and x30 as they were at the entry, and the registers it changes
    (x19, x28, x29, the carry) are what the function runs with and returns
    to its caller.  Without the flag, ftpad_get_pt_regs() is NULL."""
    p = qemu(rt_pads, "regs")
    assert p.stdout == ("regs x19=0x9191 x20=0x2020 x27=0x2727 x28=0x8282 x0=0 x29=0x2929\n"
                        "partial 1 x0=1 x19=0x1919\n")


PLAIN_A64 = r"""
#include <stdio.h>
__attribute__((noipa)) long f_square(long x) { return x * x; }
__attribute__((noipa)) long f_twice(long x) { return f_square(x) + f_square(x + 1); }
int main(void) { printf("%ld\n", f_twice(3)); return 0; }
"""


def test_ftpad_record_command(tmp_path, a64):
    """build/runtime/aarch64/bin/ftpad, the aarch64 `ftpad record`, run under
    qemu: it finds its libftpad.so (../libftpad.so), sets the environment
    and runs PROG with it preloaded.  Without binfmt_misc an aarch64 PROG
    cannot be exec'd directly, so PROG is qemu-aarch64 running the
    program, which passes the environment on; the host's loader then
    ignores the aarch64 preload with a warning."""
    tool = LIBDIR / "bin" / "ftpad"
    assert tool.exists(), f"{tool} is missing: run `make` with {CC} installed"
    (tmp_path / "plain.c").write_text(PLAIN_A64)
    exe = tmp_path / "plain"
    run([CC, "-O2", *ftpadtest.plugin_flags(A64_PLUGIN, include="f_*"), tmp_path / "plain.c",
         "-o", exe])
    out = tmp_path / "trace.txt"
    p = qemu(tool, "record", "--text", "-f", "f_sq*", "-o", out, "--", "qemu-aarch64", "-L", SYSROOT, exe)
    assert p.stdout == "25\n"
    lines = out.read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in lines[:-1]] == ["f_square <-f_twice"] * 2, lines
    assert lines[-1] == "ftpad: 2 sites found, 1 sites enabled, 2 calls seen"
    assert qemu(tool, "--version").stdout.startswith("ftpad ")
