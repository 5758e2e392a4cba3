# SPDX-License-Identifier: MIT
"""IPA-RA stays off wherever the plugin pads (docs/design.md "Registers across
calls"): a caller that keeps values in call-clobbered registers across a
call to a traced leaf must still compute the right result while a callback
clobbers every call-clobbered register.  The control build leaves IPA-RA on
and must fail the same check, which shows that the check can fail.

The matrix: x86_64 and aarch64 (under qemu-aarch64), cc1 and lto1 (-flto:
the pads come from lto1 at link time), C and C++, user and kernel ABI.  The
kernel ABI has no ftpad records for the runtime to patch, so there the
check is the compile-level half: with the plugin's default, caller() keeps
nothing in a call-clobbered register across the call to the padded leaf,
and with IPA-RA left on it does."""
import re

import pytest

from ftpadtest import A64_PLUGIN, BUILD, INCLUDE, PLUGIN, TEST_SRC, plugin_flags, run

SRC = TEST_SRC / "ipa_ra.c"
ARCHES = {
    "x86_64": dict(
        cc=["gcc"], cxx=["g++"], plugin=PLUGIN, objdump="objdump", runner=[],
        link=[f"-L{BUILD / 'runtime'}", "-lftpad", f"-Wl,-rpath,{BUILD / 'runtime'}"],
        # r11 and xmm8-15: what a callee that IPA-RA has seen may leave alone
        watched=["r11"] + [f"xmm{i}" for i in range(8, 16)]),
    "aarch64": dict(
        cc=["aarch64-linux-gnu-gcc-12"], cxx=["aarch64-linux-gnu-g++-12"], plugin=A64_PLUGIN,
        objdump="aarch64-linux-gnu-objdump", runner=["qemu-aarch64"],
        # static: qemu needs no sysroot
        link=["-static", "-x", "none", BUILD / "runtime" / "aarch64" / "libftpad.a"],
        # x0 is the result; x1-x17 and the vector registers but v8-v15
        watched=[f"x{i}" for i in range(1, 18)] +
                [f"v{i}" for i in [*range(0, 8), *range(16, 32)]]),
}
ARCH = pytest.mark.parametrize("arch", ARCHES)
LTO = pytest.mark.parametrize("lto", [[], ["-flto"]], ids=["cc1", "lto1"])
LANG = pytest.mark.parametrize("lang", ["c", "c++"])


def build(tmp_path, name, arch, lto, lang, extra=(), **plugin_args):
    a = ARCHES[arch]
    compiler = a["cc"] if lang == "c" else [*a["cxx"], "-x", "c++"]
    exe = tmp_path / name
    run([*compiler, "-O2", "-g", *lto, *extra, f"-I{INCLUDE}",
         *plugin_flags(a["plugin"], **plugin_args), SRC, "-o", exe, *a["link"]])
    return exe


def a64_registers(text):
    """aarch64 register operands in order, with w/x and b/h/s/d/q/v
    spellings unified to xN and vN; anything else as it is."""
    regs = []
    for op in re.split(r",\s*", text.split("//")[0]):
        op = op.strip().strip("[]!{}")
        m = re.fullmatch(r"([wx])(\d+)|([bhsdqv])(\d+)(?:\.\w+)?", op)
        regs.append(f"x{m.group(2)}" if m and m.group(1) else f"v{m.group(4)}" if m else op)
    return regs


# aarch64 instructions that read every register operand, and those that
# write their first two.
A64_READ_ALL = ("st", "cmp", "cmn", "tst", "cbz", "cbnz", "tbz", "tbnz", "fcmp", "ccmp")
A64_WRITE_TWO = ("ldp", "ldnp", "ldaxp", "ldxp")


def reads_before_writing(lines, reg, arch):
    """Does the first instruction in LINES that names REG read it?"""
    for line in lines:
        m = re.match(r"\s*[0-9a-f]+:\s+(\S+)\s*(.*)", line)
        if not m:
            continue
        mnemonic, text = m.groups()
        if arch == "x86_64":
            if f"%{reg}" not in text:
                continue
            sources, _, dest = text.rpartition(",")
            pure_write = mnemonic.startswith(("mov", "lea", "cvt"))
            return not (dest == f"%{reg}" and pure_write and f"%{reg}" not in sources)
        regs = a64_registers(text)
        if reg not in regs:
            continue
        if mnemonic.startswith(A64_READ_ALL):
            return True
        written = 2 if mnemonic.startswith(A64_WRITE_TWO) else 1
        return reg in regs[written:]
    return False


def caller_keeps_values_in(exe, arch="x86_64"):
    """Registers whose value caller() reads after the call to leaf() without
    writing them first: values it kept across the call."""
    a = ARCHES[arch]
    asm = run([a["objdump"], "-d", "--no-show-raw-insn", exe]).stdout
    head = re.search(r"^[0-9a-f]+ <(?:caller|_Z6caller\w*)>:\n", asm, re.M)
    body = asm[head.end():].split("\n\n", 1)[0].splitlines()
    call = next(i for i, line in enumerate(body)
                if re.search(r"\t(call|bl)\s.*<(leaf|_Z4leafi)>", line))
    after = body[call + 1:]
    return {reg for reg in a["watched"] if reads_before_writing(after, reg, arch)}


def run_program(exe, arch):
    return run([*ARCHES[arch]["runner"], exe], check=False)


@ARCH
@LTO
@LANG
def test_plugin_keeps_caller_correct(tmp_path, plugin, libftpad, arch, lto, lang):
    exe = build(tmp_path, "safe", arch, lto, lang)
    assert not caller_keeps_values_in(exe, arch)
    p = run_program(exe, arch)
    assert p.returncode == 0 and p.stdout.startswith("OK"), p.stdout + p.stderr


@ARCH
@LTO
@LANG
def test_control_with_ipa_ra_left_on_fails(tmp_path, plugin, libftpad, arch, lto, lang):
    exe = build(tmp_path, "unsafe", arch, lto, lang, unsafe_ipa_ra=1)
    assert caller_keeps_values_in(exe, arch), "the control build no longer exercises IPA-RA"
    p = run_program(exe, arch)
    assert p.returncode == 1 and p.stdout.startswith("MISMATCH"), p.stdout + p.stderr


@pytest.mark.parametrize("unsafe", [0, 1])
@ARCH
@LTO
@LANG
def test_kernel_abi_keeps_ipa_ra_off(tmp_path, plugin, libftpad, arch, lto, lang, unsafe):
    """Compile-level: the same caller, every function padded in the kernel
    ABI (x86_64: __mcount_loc, so no PIE)."""
    extra = ["-fno-pie", "-no-pie"] if arch == "x86_64" else []
    exe = build(tmp_path, "kernel", arch, lto, lang, extra, abi="kernel", unsafe_ipa_ra=unsafe)
    kept = caller_keeps_values_in(exe, arch)
    assert bool(kept) == bool(unsafe), kept


@ARCH
def test_optimize_attribute_cannot_turn_it_back_on(tmp_path, plugin, arch):
    """optimize("ipa-ra") on the leaf and its caller restores -fipa-ra for
    those functions; the plugin turns it off again for each function it
    pads, so a padded leaf still publishes nothing.  The control: the same
    source with the leaf left unpadded."""
    src = tmp_path / "ipa_ra_optimize.c"
    src.write_text(SRC.read_text()
                   .replace("__attribute__((noinline)) int leaf",
                            '__attribute__((noinline, optimize("ipa-ra"))) int leaf')
                   .replace("__attribute__((noinline)) long caller",
                            '__attribute__((noinline, optimize("ipa-ra"))) long caller'))
    a = ARCHES[arch]
    for name, args, keeps in [("padded", {}, False), ("unpadded", {"exclude": "leaf"}, True)]:
        exe = tmp_path / name
        run([*a["cc"], "-O2", f"-I{INCLUDE}", *plugin_flags(a["plugin"], **args), src,
             "-o", exe, *a["link"]])
        assert bool(caller_keeps_values_in(exe, arch)) == keeps, name
