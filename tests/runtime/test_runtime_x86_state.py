# SPDX-License-Identifier: MIT
"""What a traced x86_64 function has at its entry survives its callbacks:
the flags, the stack alignment, the red zone and the vector state.

- The vector argument registers whole: a function taking eight __m256 /
  __m256d arguments in ymm0-7 returns the same checksum of all their bits
  traced as untraced, while its callback calls memset, strlen and snprintf
  and executes vzeroupper; through the assembly fast path, the full
  register save and the C paths (the recursion assist; sites without an
  ops slot, found by address).
- Threads that block every signal, SIGTRAP included, are never killed by
  the int3 of the patch protocol: libftpad writes without int3 when such a
  thread exists, or refuses with -EAGAIN and says which thread."""
import pathlib
import re

import pytest

from ftpadtest import BUILD, INCLUDE, TEST_SRC, plugin_flags, run

SRC = TEST_SRC / "runtime"
LIBDIR = BUILD / "runtime"


def cpu_has(flag):
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return flag in line.split()
    return False


@pytest.fixture(scope="module")
def avx_progs(plugin, libftpad, tmp_path_factory):
    if not cpu_has("avx2"):
        pytest.skip("the CPU has no AVX2")
    d = tmp_path_factory.mktemp("x86_avx")
    progs = {}
    for slot in ("1", "0"):
        exe = d / f"x86_avx_ops{slot}"
        run(["gcc", "-O2", "-mavx2", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}",
             *plugin_flags(plugin, include="avx_sum", ops=slot), SRC / "x86_avx.c",
             f"-L{LIBDIR}", "-lftpad", f"-Wl,-rpath,{LIBDIR}", "-o", exe])
        progs[slot] = exe
    return progs


@pytest.mark.parametrize("slot", ["1", "0"], ids=["slot", "noslot"])
@pytest.mark.parametrize("mode", ["plain", "regs", "recursion"])
def test_ymm_arguments_survive_a_libc_callback(avx_progs, slot, mode):
    p = run([avx_progs[slot], mode], check=False)
    assert p.returncode == 0 and p.stdout.strip() == "ok calls=1000", p.stdout + p.stderr


VEC_MOVE = re.compile(r"\t(v?mov(?:aps|dqu)|vextracti64x4 \$0x1,|vinserti64x4 \$0x1,)\s*"
                      r"%?(?:([xyz]mm\d),)?(0x[0-9a-f]+)\(%rsp\)(?:,%([xyz]mm\d))?")
WIDTH = {"xmm": 16, "ymm": 32, "zmm": 32}  # zmm: its upper 256 bits only


def trampolines(lib):
    """{symbol: [disassembled lines]} of every ftpad_trampoline* in lib."""
    out = run(["objdump", "-d", "--no-show-raw-insn", lib]).stdout
    funcs, name = {}, None
    for line in out.splitlines():
        m = re.match(r"[0-9a-f]+ <(ftpad_trampoline\w*)>:$", line)
        if m:
            name = m.group(1)
            funcs[name] = []
        elif not line.strip():
            name = None
        elif name:
            funcs[name].append(line)
    return funcs


@pytest.mark.parametrize("width,reg", [("", "xmm"), ("_avx", "ymm"), ("_avx512", "zmm")])
def test_every_width_saves_and_restores_vector_registers_0_to_7(libftpad, width, reg):
    """Assembly check of each trampoline width, AVX-512 included (which no
    test here can run without such a CPU): registers 0-7 are stored whole
    into the frame and loaded back from the same slots on every way out,
    within the frame the trampoline allocates."""
    funcs = trampolines(BUILD / "runtime" / "libftpad.so")
    # _0 and _1 are one function: objdump names it after either.
    slotless = [f"ftpad_trampoline{width}_{k}" for k in "01"]
    names = [n for n in slotless if n in funcs][:1] + [
        f"ftpad_trampoline{width}_{k}" for k in ("2", "3", "regs")]
    assert len(names) == 4, sorted(funcs)
    for name in names:
        body = funcs[name]
        frame = int(re.search(r"sub +\$0x([0-9a-f]+),%rsp", "\n".join(body)).group(1), 16)
        saved, restored = set(), []
        for line in body:
            m = VEC_MOVE.search(line)
            if not m:
                continue
            op, src, off, dst = m.groups()
            off = int(off, 16)
            kind = "hi" if "64x4" in op else "lo"
            size = 32 if kind == "hi" else WIDTH[(src or dst)[:3]]
            assert off + size <= frame, (name, line)
            if src:
                saved.add((kind, src[3:], off, (src or dst)[:3]))
            else:
                restored.append((kind, dst[3:], off, dst[:3]))
        want_lo = "xmm" if reg == "xmm" else "ymm"
        assert {s[1] for s in saved if s[0] == "lo" and s[3] == want_lo} == set("01234567"), name
        if reg == "zmm":
            assert {s[1] for s in saved if s[0] == "hi"} == set("01234567"), name
        else:
            assert not [s for s in saved if s[0] == "hi"], name
        # Each exit loads back exactly what was saved, from where it was saved.
        exits = sum(1 for line in body if re.search(r"\tret\b", line))
        assert len(restored) == exits * len(saved) and set(restored) == saved, name
        offsets = sorted(s[2] for s in saved)
        assert len(set(offsets)) == len(offsets), name


@pytest.fixture(scope="module")
def sigblk(plugin, libftpad, tmp_path_factory):
    exe = tmp_path_factory.mktemp("x86_sigblk") / "x86_sigblk"
    run(["gcc", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}",
         *plugin_flags(plugin, include="work_*"), SRC / "x86_sigblk.c",
         f"-L{LIBDIR}", "-lftpad", f"-Wl,-rpath,{LIBDIR}", "-o", exe])
    return exe


TOGGLES = "300"


@pytest.mark.parametrize("method", [None, "mprotect"])
def test_threads_blocking_sigtrap_are_traced_without_int3(sigblk, method):
    """Two workers block every signal and call traced functions in tight
    loops while the main thread registers and unregisters 300 times (before
    the fix the process died of SIGTRAP within the first few).  libftpad
    sees them in /proc/self/task/*/status and writes those batches with a
    2-byte jmp over the site instead of int3: every register works, the
    calls are traced, nobody traps."""
    env = {"FTPAD_TEXT_WRITE": method} if method else None
    p = run([sigblk, TOGGLES], check=False, env=env)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    m = re.fullmatch(r"ok registered=(\d+) refused=0 calls=(\d+)\n", p.stdout)
    assert m and m.group(1) == TOGGLES and int(m.group(2)) > 0, p.stdout + p.stderr
    assert "blocks SIGTRAP" not in p.stderr, p.stderr


def test_threads_blocking_sigtrap_lose_no_call_of_an_ops_that_stays(sigblk):
    """The same, with an ops registered throughout and the toggled one
    asking for the full register save: each toggle moves the sites from one
    call to another, which the jmp over the site would skip; they change
    their rel32 in one store instead, and the ops that stays sees exactly
    every call the workers made."""
    p = run([sigblk, TOGGLES, "exact"], check=False)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert re.fullmatch(rf"lost=0\nok registered={TOGGLES} refused=0 calls=\d+\n",
                        p.stdout), p.stdout + p.stderr


def test_threads_blocking_sigtrap_refuse_when_int3_is_the_only_way(sigblk):
    """With FTPAD_TEXT_WRITE=procmem the code may not be made writable, and
    /proc/self/mem writes cannot replace two bytes at once: only int3 is
    left, so each register is refused with -EAGAIN and a message that names
    the thread, and the process lives.  (Each refusal first gives the thread
    10 ms to unblock, so fewer rounds.)"""
    p = run([sigblk, "20"], check=False, env={"FTPAD_TEXT_WRITE": "procmem"})
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert p.stdout == "ok registered=0 refused=20 calls=0\n", p.stdout + p.stderr
    assert re.search(r"ftpad: error: thread \d+ \(blocker\) blocks SIGTRAP, .*"
                     r"FTPAD_TEXT_WRITE=procmem forbids writing without int3; not patched",
                     p.stderr), p.stderr
