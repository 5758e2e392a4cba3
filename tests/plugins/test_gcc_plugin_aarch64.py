# SPDX-License-Identifier: MIT
"""The GCC plugin's aarch64 user layout, built with the cross compiler and
read back from real statically linked programs that qemu-aarch64 runs:
ops slots, BTI placement, mov x9, x30, the site, records and policy."""
import shutil

import capstone
import pytest
from elftools.elf.elffile import ELFFile

import ftpadtest
from ftpadtest import (A64_PLUGIN as PLUGIN, ARCH_AARCH64, FLAG_BTI, FLAG_MOV_X9, Image,
                       check_records, run)
from ftpadtest import TEST_SRC  # noqa: E402

SRC = TEST_SRC
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


def check_program(obj, exe, before=0, after=2, ops=True):
    return check_records(obj, exe, lambda image, site: check_site(image, site, before, after, ops),
                         lambda image, addr: ftpadtest.starts_with_pad(image, addr, "aarch64"),
                         lambda name: "skip_" not in name or name in NOT_SKIPPED_ON_AARCH64)


def run_qemu(exe):
    run(["qemu-aarch64", exe])


OPT_LEVELS = ["-O0", "-O2", "-O3", "-Os"]
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


def entries(obj):
    """{name: first 8 bytes} of every function OBJ defines (aliases such as
    C++'s C1/C2 constructors included)."""
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        return {sym.name: elf.get_section(sym["st_shndx"]).data()[sym["st_value"]:][:8]
                for sym in elf.get_section_by_name(".symtab").iter_symbols()
                if sym["st_info"]["type"] == "STT_FUNC" and sym["st_shndx"] != "SHN_UNDEF"}


def landing_pads(obj):
    """Functions of OBJ whose first instruction is bti c."""
    return {name for name, head in entries(obj).items() if head.startswith(BTI_C)}


@pytest.mark.parametrize("source", ["layout.c", "layout.cc"])
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("bp", ALL_BP)
def test_bti_where_gcc_puts_it(tmp_path, a64_plugin, source, opt, bp):
    """bti c is first exactly where GCC's own -fpatchable-function-entry
    puts it (every function whose address may escape, PACIASP or not), and
    where GCC puts it without a pad in the functions the plugin skips.  A
    static function only called directly has none and still gets its pad
    and record, with mov x9, x30 right at the entry."""
    compiler = CXX if source.endswith(".cc") else CC
    flags = [opt, "-Wno-attributes", *ALL_BP[bp]]
    native, native_pfe = tmp_path / "native.o", tmp_path / "native_pfe.o"
    run([compiler, *flags, "-c", SRC / source, "-o", native])
    run([compiler, *flags, "-fpatchable-function-entry=2", "-c", SRC / source, "-o", native_pfe])
    obj, exe = build(tmp_path, SRC / source, flags)
    sites = {s.name: s for s in check_program(obj, exe)}
    # Padded functions, aliases included: they start with [bti c] mov x9, x30.
    padded = {n for n, head in entries(obj).items()
              if MOV_X9_X30 in (head[:4], head[4:])}
    assert set(sites) <= padded
    ours = landing_pads(obj)
    assert ours & padded == landing_pads(native_pfe) & padded
    assert ours - padded == landing_pads(native) - padded
    assert {n for n, s in sites.items() if s.flags & FLAG_BTI} == ours & set(sites)
    if source == "layout.c" and opt == "-O2" and bp != "none":
        # static helper(): only called directly, so GCC gives it no BTI
        assert "helper" not in landing_pads(native_pfe) and "helper" in sites
        assert not sites["helper"].flags & FLAG_BTI
        assert sites["helper"].site == sites["helper"].entry + 4
    # With pac-ret, layout.c's skip_naked (GCC 12 ignores naked on aarch64)
    # signs its return address and its asm "ret" does not authenticate it:
    # that crashes with or without the plugin.
    if not (bp == "pac-ret+leaf" and source == "layout.c"):
        run_qemu(exe)


def test_attribute(tmp_path, a64_plugin):
    """ftpad(before, after) in aarch64 units; after counts mov x9, x30."""
    src = tmp_path / "attr.c"
    src.write_text("__attribute__((noinline, ftpad(3, 4))) int f(int x) { return x * 5; }\n"
                   "__attribute__((noinline, ftpad(0, 2))) int g(int x) { return x - 5; }\n"
                   "int main(int c, char **v) { (void)v; return f(c) + g(c) - 6 * c + 5; }\n")
    _, exe = build(tmp_path, src, ["-O2", "-mbranch-protection=standard"])
    with Image(exe) as image:
        sites = {s.name: s for s in image.sites()}
        check_site(image, sites["f"], 3, 4)
        check_site(image, sites["g"], 0, 2)
        check_site(image, sites["main"], 0, 2)
    run_qemu(exe)
    src.write_text("__attribute__((ftpad(0, 1))) int bad_fn(void);\n")
    p = run([CC, *plugin_flags(), "-c", src, "-o", tmp_path / "bad.o"], check=False)
    assert p.returncode != 0
    assert "after must be an integer constant from 2 to 255" in p.stderr, p.stderr


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


# Every combination of before (none, odd, many), after (the minimum, one
# more, many more) and ops.
COUNTS = [(b, a, o) for b in (0, 3, 16) for a in (2, 3, 16) for o in (0, 1)]


@pytest.mark.parametrize("before,after,ops", COUNTS)
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


@pytest.mark.parametrize("opt", ["-O2", "-O3"])
def test_cold_functions_stay_aligned(tmp_path, a64_plugin, opt):
    """GCC packs cold functions into .text.unlikely without aligning them
    to 8 (the control, without the plugin); every ops slot stays 8-aligned
    anyway."""
    src = ftpadtest.cold_source(tmp_path, CC, opt)
    obj, exe = build(tmp_path, src, [opt])
    sites = check_program(obj, exe)
    assert {"c1", "c2", "c3", "c4"} <= {s.name for s in sites}
    run_qemu(exe)


def test_min_insns_and_report(tmp_path, a64_plugin):
    """min-insns counts aarch64 instructions: the tiny leaf is skipped, the
    loop and the attributed leaf keep their pads, and the report says why."""
    from test_gcc_plugin_policy import SOURCE, read_report
    src = tmp_path / "policy.c"
    src.write_text(SOURCE)
    report = tmp_path / "report.jsonl"
    _, exe = build(tmp_path, src, ["-O2"], dict(min_insns=8, report=report))
    with Image(exe) as image:
        sites = {s.name: s for s in image.sites()}
        for site in sites.values():
            check_site(image, site, site.before, site.after)
    rows = read_report(report)
    assert rows["tiny"]["decision"] == "skip" and "tiny" not in sites
    assert rows["tiny"]["reason"] == f"{rows['tiny']['insns']} insns < min-insns 8, no loop"
    assert rows["loop"]["loop"] is True and "loop" in sites
    assert (sites["attr_tiny"].before, sites["attr_tiny"].after) == (3, 9)
    assert set(sites) == {n for n, r in rows.items() if r["decision"] == "pad"}
    run_qemu(exe)


@pytest.mark.parametrize("before", [0, 2])
@pytest.mark.parametrize("after", [2, 4])
@pytest.mark.parametrize("ops", [1, 0], ids=["ops", "no-ops"])
def test_equal_counts_match_gcc_but_for_the_mov(tmp_path, a64_plugin, before, after, ops):
    """The aarch64 user layout with equal counts is GCC's own
    -fpatchable-function-entry=B+2+A,B+2 (=B+A,B without the ops slot),
    byte for byte and record for record (record=patchable), but for one word
    per function: mov x9, x30 where GCC has its first NOP behind the entry."""
    from test_gcc_plugin_kernel import A64, SRC as KERNEL_SRC, code_sections, records
    entry = before + 2 * ops
    common = [CC, "-O2", "-mbranch-protection=standard", *A64["flags"], "-c", KERNEL_SRC]
    native, ours = tmp_path / "native.o", tmp_path / "plugin.o"
    run([*common, f"-fpatchable-function-entry={entry + after},{entry}", "-o", native])
    run([*common, *plugin_flags(before=before, after=after, ops=ops, record="patchable"),
         "-o", ours])
    want, got = code_sections(native), code_sections(ours)
    assert [n for n, _ in got] == [n for n, _ in want]
    movs = sum(code.count(MOV_X9_X30) for _, code in got)
    assert movs == 6 and not any(MOV_X9_X30 in code for _, code in want)
    assert [(n, c.replace(MOV_X9_X30, NOP)) for n, c in got] == want
    section = "__patchable_function_entries"
    assert records(ours, section)[0] == records(native, section)[0]
