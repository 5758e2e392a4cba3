# SPDX-License-Identifier: MIT
"""IPA-RA stays off wherever the plugin pads (DESIGN.md "Registers across
calls"): a caller that keeps values in call-clobbered registers across a
call to a traced leaf must still compute the right result while a callback
clobbers every call-clobbered register.  The control build leaves IPA-RA on
and must fail the same check, which shows that the check can fail."""
import pathlib
import re

import pytest

from ftpadtest import BUILD, INCLUDE, plugin_flags, run

SRC = pathlib.Path(__file__).parent / "src" / "ipa_ra.c"


# Without LTO the pads come from cc1; with -flto from lto1 at link time.
# The same source as C (cc1, lto1) and as C++ (cc1plus, lto1).
LTO = pytest.mark.parametrize("lto", [[], ["-flto"]], ids=["cc1", "lto1"])
LANG = pytest.mark.parametrize("lang", [["gcc"], ["g++", "-x", "c++"]], ids=["c", "c++"])


def build(tmp_path, name, lto, lang, **plugin_args):
    exe = tmp_path / name
    run([*lang, "-O2", "-g", *lto, f"-I{INCLUDE}", *plugin_flags(**plugin_args), SRC, "-o", exe,
         f"-L{BUILD / 'runtime'}", "-lftpad", f"-Wl,-rpath,{BUILD / 'runtime'}"])
    return exe


def reads_before_writing(lines, reg):
    """Does the first instruction in LINES that names REG read it?"""
    for line in lines:
        m = re.match(r"\s*[0-9a-f]+:\s+(\S+)\s*(.*)", line)
        if not m or f"%{reg}" not in m.group(2):
            continue
        mnemonic, operands = m.groups()
        sources, _, dest = operands.rpartition(",")
        pure_write = mnemonic.startswith(("mov", "lea", "cvt"))
        return not (dest == f"%{reg}" and pure_write and f"%{reg}" not in sources)
    return False


def caller_keeps_values_in(exe):
    """Registers whose value caller() reads after the call to leaf() without
    writing them first: values it kept across the call."""
    asm = run(["objdump", "-d", "--no-show-raw-insn", exe]).stdout
    head = re.search(r"^[0-9a-f]+ <(?:caller|_Z6caller\w*)>:\n", asm, re.M)
    body = asm[head.end():].split("\n\n", 1)[0].splitlines()
    call = next(i for i, line in enumerate(body) if "\tcall" in line)  # the only call: leaf()
    after = body[call + 1:]
    return {reg for reg in ["r11"] + [f"xmm{i}" for i in range(8, 16)]
            if reads_before_writing(after, reg)}


@LTO
@LANG
def test_plugin_keeps_caller_correct(tmp_path, plugin, libftpad, lto, lang):
    exe = build(tmp_path, "safe", lto, lang)
    p = run([exe], check=False)
    assert p.returncode == 0 and p.stdout.startswith("OK"), p.stdout + p.stderr


@LTO
@LANG
def test_control_with_ipa_ra_left_on_fails(tmp_path, plugin, libftpad, lto, lang):
    exe = build(tmp_path, "unsafe", lto, lang, unsafe_ipa_ra=1)
    assert caller_keeps_values_in(exe), "the control build no longer exercises IPA-RA"
    p = run([exe], check=False)
    assert p.returncode == 1 and p.stdout.startswith("MISMATCH"), p.stdout + p.stderr


@pytest.mark.parametrize("unsafe", [0, 1])
def test_kernel_abi_keeps_ipa_ra_off(tmp_path, plugin, unsafe):
    """The kernel ABI has no ftpad records for the runtime to patch, so this
    is the compile-level half: with the plugin's default nothing is kept in
    r11 or xmm8-15 across the call to the padded leaf; the control keeps."""
    obj = tmp_path / "k.o"
    run(["gcc", "-O2", "-fno-pie", f"-I{INCLUDE}", "-c", SRC, "-o", obj,
         *plugin_flags(abi="kernel", unsafe_ipa_ra=unsafe)])
    kept = caller_keeps_values_in(obj)
    assert bool(kept) == bool(unsafe), kept
