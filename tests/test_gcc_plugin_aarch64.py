# SPDX-License-Identifier: MIT
"""The GCC plugin's aarch64 user layout, built with the cross compiler and
read back from real statically linked programs that qemu-aarch64 runs:
ops slots, BTI placement, mov x9, x30, the site, records and policy."""
import pathlib
import shutil

import capstone
import pytest

import ftpadtest
from ftpadtest import (A64_PLUGIN as PLUGIN, ARCH_AARCH64, FLAG_BTI, FLAG_MOV_X9, Image,
                       check_records, run)

SRC = pathlib.Path(__file__).parent / "src"
CC = "aarch64-linux-gnu-gcc-12"
CXX = "aarch64-linux-gnu-g++-12"
NOP = bytes.fromhex("1f2003d5")        # d503201f
BTI_C = bytes.fromhex("5f2403d5")      # d503245f, hint 34
MOV_X9_X30 = bytes.fromhex("e9031eaa")  # aa1e03e9
PACIASP = bytes.fromhex("3f2303d5")     # d503233f, hint 25
# GCC 12 ignores `naked` on aarch64 (with a warning), so skip_naked is an
# ordinary function there and gets a pad like any other.
NOT_SKIPPED_ON_AARCH64 = {"skip_naked"}


@pytest.fixture(scope="module")
def a64_plugin():
    for tool in (CC, CXX, "qemu-aarch64"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: scripts/install-deps.sh installs it")
    if not PLUGIN.exists():
        pytest.fail(f"{PLUGIN} is missing: run `make` with {CC} installed")
    return PLUGIN


def plugin_flags(**args):
    return ftpadtest.plugin_flags(PLUGIN, **args)


def build(tmp_path, source, flags, plugin_args=None):
    """Compile SOURCE with the plugin; link it statically (without the
    plugin, so libc has no pads) so that qemu needs no sysroot."""
    compiler = CXX if source.suffix == ".cc" else CC
    obj = tmp_path / (source.stem + ".o")
    run([compiler, *flags, "-Wno-attributes", *plugin_flags(**(plugin_args or {})),
         "-c", source, "-o", obj])
    exe = tmp_path / source.stem
    run([compiler, *flags, "-static", obj, "-o", exe])
    return obj, exe


def mnemonics(code, addr):
    md = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
    return [i.mnemonic for i in md.disasm(code, addr)]


def check_site(image, site, before, after, ops=True):
    """Everything the aarch64 user layout promises about one site."""
    assert site.version == 1 and site.arch == ARCH_AARCH64 and site.site_len == 4
    assert (site.before, site.after) == (before, after)
    assert site.flags & FLAG_MOV_X9, f"{site.name}: no MOV_X9 flag"
    assert site.entry % 4 == 0
    head = image.read(site.entry, 4)
    mov = site.entry
    if site.flags & FLAG_BTI:
        assert head == BTI_C, f"{site.name}: flag BTI but entry has {head.hex()}"
        mov += 4
    else:
        assert head != BTI_C, f"{site.name}: bti c at entry but not in the record"
    assert image.read(mov, 4) == MOV_X9_X30, f"{site.name}: no mov x9, x30"
    assert site.site == mov + 4, f"{site.name}: site is not right after the MOV"
    # The site and the rest of `after` (the MOV counts as one unit).
    rest = image.read(site.site, 4 * (after - 1))
    assert rest == NOP * (after - 1), f"{site.name}: after is {rest.hex()}"
    assert set(mnemonics(rest, site.site)) == {"nop"}
    if ops:
        assert site.ops % 8 == 0, f"{site.name}: ops slot {site.ops:#x} not 8-aligned"
        assert site.ops + 8 == site.entry, f"{site.name}: ops slot does not end at the entry"
        pre = image.read(site.ops - 4 * before, 4 * before + 8)
    else:
        assert site.ops == 0
        assert site.entry % 8 == 0
        pre = image.read(site.entry - 4 * before, 4 * before)
    assert pre == NOP * (len(pre) // 4), f"{site.name}: before is {pre.hex()}"


def starts_with_pad(image, addr):
    code = image.read(addr, 8, partial=True)
    if code.startswith(BTI_C):
        code = code[4:]
    return code.startswith(MOV_X9_X30)


def check_program(obj, exe, before=0, after=2, ops=True):
    return check_records(obj, exe, lambda image, site: check_site(image, site, before, after, ops),
                         starts_with_pad,
                         lambda name: "skip_" not in name or name in NOT_SKIPPED_ON_AARCH64)


def run_qemu(exe):
    run(["qemu-aarch64", exe])


OPT_LEVELS = ["-O0", "-O2", "-Os"]
BP = [[], ["-mbranch-protection=standard"]]
# Every -mbranch-protection the issue names; bti c only where BTI is on.
ALL_BP = {"none": [], "standard": ["-mbranch-protection=standard"],
          "bti": ["-mbranch-protection=bti"], "pac-ret+leaf": ["-mbranch-protection=pac-ret+leaf"]}


@pytest.mark.parametrize("source", ["layout.c", "layout.cc"])
@pytest.mark.parametrize("opt", OPT_LEVELS)
@pytest.mark.parametrize("bp", BP, ids=["plain", "bti"])
def test_default_layout(tmp_path, a64_plugin, source, opt, bp):
    obj, exe = build(tmp_path, SRC / source, [opt, *bp])
    sites = check_program(obj, exe)
    if bp:
        # Every function reachable by an indirect branch starts with bti c,
        # even those where GCC relies on PACIASP as the landing pad.
        assert any(s.flags & FLAG_BTI for s in sites)
    else:
        assert not any(s.flags & FLAG_BTI for s in sites)
    run_qemu(exe)


@pytest.mark.parametrize("bp", ALL_BP)
def test_branch_protection_variants(tmp_path, a64_plugin, bp):
    obj, exe = build(tmp_path, SRC / "layout.cc", ["-O2", *ALL_BP[bp]])
    sites = check_program(obj, exe)
    assert any(s.flags & FLAG_BTI for s in sites) == (bp in ("standard", "bti"))
    run_qemu(exe)


def test_paciasp_functions_get_bti(tmp_path, a64_plugin):
    """GCC leaves out bti c where PACIASP comes first; our MOV goes in front
    of PACIASP, so the plugin must put bti c back."""
    src = tmp_path / "pac.c"
    src.write_text("__attribute__((noinline)) int g(int x) { return x * 3; }\n"
                   "int f(int x) { return g(x) + 1; }\n"
                   "int (*volatile fp)(int) = f;\n"
                   "int main(int c, char **v) { (void)v; return fp(c) == 4 ? 0 : 1; }\n")
    obj, exe = build(tmp_path, src, ["-O2", "-mbranch-protection=standard"])
    sites = {s.name: s for s in check_program(obj, exe)}
    assert sites["f"].flags & FLAG_BTI
    with Image(exe) as image:
        assert image.read(sites["f"].site + 4, 4) == PACIASP
    run_qemu(exe)


@pytest.mark.parametrize("before,after,ops", [(0, 2, 0), (3, 4, 1), (9, 16, 0), (16, 2, 1)])
@pytest.mark.parametrize("bp", BP, ids=["plain", "bti"])
def test_counts(tmp_path, a64_plugin, before, after, ops, bp):
    obj, exe = build(tmp_path, SRC / "layout.c", ["-O2", *bp],
                     dict(before=before, after=after, ops=ops))
    check_program(obj, exe, before, after, bool(ops))
    run_qemu(exe)


@pytest.mark.parametrize("flags", [["-Os"], ["-O2", "-falign-functions=1"],
                                   ["-O3", "-mbranch-protection=standard", "-falign-functions=1"]])
def test_alignment_is_forced(tmp_path, a64_plugin, flags):
    obj, exe = build(tmp_path, SRC / "layout.c", flags)
    sites = check_program(obj, exe)
    assert any(s.name == "rarely" for s in sites)


def test_after_below_two_is_rejected(tmp_path, a64_plugin):
    p = run([CC, "-c", SRC / "layout.c", "-o", tmp_path / "x.o", *plugin_flags(after=1)],
            check=False)
    assert p.returncode != 0
    assert "-fplugin-arg-ftpad-after=1" in p.stderr.replace("\u2018", "").replace("\u2019", "")


IPA_RA_SRC = """\
volatile int sink;
__attribute__((noinline)) int leaf(int x) { sink = x; return x + 1; }
__attribute__((noinline)) long caller(long a, long b, long c)
{
	long v0 = a * b, v1 = b * c, v2 = a * c, v3 = a * a, v4 = b * b, v5 = c * c;
	long v6 = a * b * c, v7 = (a + 1) * (b + 2), v8 = (b + 3) * (c + 4);
	long v9 = (a + 5) * (c + 6);
	int r = leaf((int)a);
	return v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7 + v8 + v9 + r;
}
"""
# Call-clobbered general registers other than the return value x0.
CLOBBERED = {f"x{i}" for i in range(1, 18)}
STORES = ("str", "stp", "cmp", "cmn", "tst", "cbz", "cbnz", "tbz", "tbnz")


def kept_across_call(asm):
    """Call-clobbered registers that caller() reads after `bl leaf` without
    writing them first: values it kept across the call."""
    body = asm.split("caller:\n", 1)[1].split("\tret", 1)[0]
    after = body.split("\tbl\tleaf\n", 1)[1]
    kept, written = set(), set()
    for line in after.splitlines():
        parts = line.split(None, 1)
        if len(parts) < 2 or parts[0].startswith((".", "//")):
            continue
        ops = [o.strip() for o in parts[1].split(",")]
        regs = [("x" + o[1:]) if o[:1] in "wx" and o[1:].isdigit() else None for o in ops]
        sources = regs if parts[0].startswith(STORES) else regs[1:]
        kept |= {r for r in sources if r in CLOBBERED and r not in written}
        if not parts[0].startswith(STORES) and regs and regs[0]:
            written.add(regs[0])
    return kept


@pytest.mark.parametrize("unsafe", [0, 1])
@pytest.mark.parametrize("abi", ["user", "kernel"])
@pytest.mark.parametrize("lang", [[], ["-x", "c++"]], ids=["c", "c++"])
def test_ipa_ra_stays_off(tmp_path, a64_plugin, unsafe, abi, lang):
    """Compile-level only (no aarch64 runtime yet): with the plugin's
    default, caller() keeps nothing in call-clobbered registers across the
    call to a padded leaf.  With IPA-RA left on it does, even in x9, which
    the leaf's own mov x9, x30 overwrites: the control shows the check bites."""
    src = tmp_path / "ipa.c"
    src.write_text(IPA_RA_SRC)
    asm = run([CC, *lang, "-O2", *plugin_flags(abi=abi, unsafe_ipa_ra=unsafe), "-S", "-o", "-",
               src]).stdout
    if lang:  # C++ names: look for the mangled ones
        asm = asm.replace("_Z6callerlll:", "caller:").replace("_Z4leafi", "leaf")
    kept = kept_across_call(asm)
    if unsafe:
        assert kept, "the control build no longer exercises IPA-RA"
    else:
        assert not kept, f"caller keeps {sorted(kept)} across a padded call"
