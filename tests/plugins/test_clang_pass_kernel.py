# SPDX-License-Identifier: MIT
"""ftpad-clang.so with abi=kernel: what Linux 6.12 expects from its
compiler flags, from clang.

x86_64: what GCC's -pg -mfentry -mrecord-mcount -mnop-mcount give (clang 14
rejects the last two on x86; Linux runs objtool instead): [endbr64] and the
5-byte NOP 0f 1f 44 00 00, its absolute address in __mcount_loc.  Checked
byte for byte against clang's own -pg -mfentry with each call to __fentry__
turned into that NOP, against what recordmcount-ng records for those calls,
and site for site against GCC.  arm64: byte for byte clang's own
-fpatchable-function-entry=4,2 (CALL_OPS) or =2, with its records, and the
ops literal 8-aligned where clang's own loses the alignment."""

import pytest
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from ftpadtest import (A64_BTI_C, A64_NOP, ENDBR64, FLAG_KERNEL, INCLUDE, NOP5, RECORDMCOUNT,
                       Image, run)
from test_clang_pass import CLANG_PLUGIN, clang_flags
from test_gcc_plugin_kernel import check_arm64_count, records
from ftpadtest import TEST_SRC  # noqa: E402

SRC = TEST_SRC / "kernel_like.c"
X86 = dict(cc=["clang-14"], flags=["-fno-pie", "-mcmodel=kernel", "-mno-red-zone",
                                   "-ffreestanding", "-falign-functions=16"])
A64 = dict(cc=["clang-14", "--target=aarch64-linux-gnu"],
           flags=["-ffreestanding", "-mgeneral-regs-only", "-falign-functions=8"])
# Every function of kernel_like.c but the notrace one.
TRACED = ["sum_list", "clamp", "account", "fmt_hex", "report_bug", "setup_total"]


@pytest.fixture(scope="session")
def clang_plugin():
    if not CLANG_PLUGIN.exists():
        pytest.fail(f"{CLANG_PLUGIN} is missing: run `make` (needs libclang-14-dev)")
    return CLANG_PLUGIN


def compile_pair(tmp_path, arch, flags, native, plugin_args, src=SRC):
    """SRC built by clang with the NATIVE flags, and with the plugin."""
    common = [*arch["cc"], *arch["flags"], *flags, "-c", src]
    native_obj, plugin_obj = tmp_path / "native.o", tmp_path / "plugin.o"
    run([*common, *native, "-o", native_obj])
    run([*common, *clang_flags(abi="kernel", **plugin_args), "-o", plugin_obj])
    return native_obj, plugin_obj


def code_sections(obj):
    """{name: bytearray} of every executable section of OBJ."""
    with open(obj, "rb") as f:
        return {sec.name: bytearray(sec.data()) for sec in ELFFile(f).iter_sections()
                if sec["sh_flags"] & SH_FLAGS.SHF_EXECINSTR}


def relocations(obj, section_matches):
    """(target section, relocation, symbol, section of the symbol or None)
    of every relocation in the sections that section_matches(target)."""
    out = []
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        symtab = elf.get_section_by_name(".symtab")
        for sec in elf.iter_sections():
            if sec["sh_type"] != "SHT_RELA":
                continue
            target = elf.get_section(sec["sh_info"])
            if not section_matches(target):
                continue
            for rel in sec.iter_relocations():
                sym = symtab.get_symbol(rel["r_info_sym"])
                shndx = sym["st_shndx"]
                where = elf.get_section(shndx).name if isinstance(shndx, int) and shndx else None
                out.append((target.name, rel, sym, where))
    return out


def fentry_calls(obj):
    """(section, offset of the call) of every call to __fentry__ in OBJ."""
    return sorted((target, rel["r_offset"] - 1)  # the e8 before the rel32
                  for target, rel, sym, _ in relocations(
                      obj, lambda sec: sec["sh_flags"] & SH_FLAGS.SHF_EXECINSTR)
                  if sym.name == "__fentry__")


def mcount_sites(obj):
    """(section, offset) of every __mcount_loc entry of OBJ, whichever
    symbol its relocation is against (recordmcount names the section's
    first symbol, an assembler its section symbol)."""
    return sorted((where, sym["st_value"] + rel["r_addend"])
                  for _, rel, sym, where in relocations(obj, lambda sec: sec.name == "__mcount_loc"))


def mcount_section(obj):
    """(flags, alignment, entry size, relocation types) of __mcount_loc."""
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        sec = elf.get_section_by_name("__mcount_loc")
        rela = elf.get_section_by_name(".rela__mcount_loc")
        types = {r["r_info_type"] for r in rela.iter_relocations()}
        return sec["sh_flags"], sec["sh_addralign"], sec["sh_entsize"], types


@pytest.mark.parametrize("opt", ["-O0", "-O2", "-Os"])
@pytest.mark.parametrize("ibt", [[], ["-fcf-protection=branch"]], ids=["plain", "ibt"])
@pytest.mark.parametrize("padding", [0, 16])
def test_x86_64_is_pg_mfentry_with_the_calls_turned_into_nops(tmp_path, clang_plugin, opt, ibt,
                                                              padding):
    """The code is clang's own with -pg -mfentry, with every call to
    __fentry__ replaced by the 5-byte NOP, and __mcount_loc lists exactly
    those places: what objtool --mcount --mnop makes of clang's output
    for Linux.  With padding, both also have -fpatchable-function-entry=N,N's
    N bytes of 0x90 before every function (CALL_PADDING) and its records."""
    native = ["-pg", "-mfentry"]
    args = {}
    if padding:
        native.append(f"-fpatchable-function-entry={padding},{padding}")
        args["before"] = padding
    native_obj, plugin_obj = compile_pair(tmp_path, X86, [opt, *ibt], native, args)
    calls = fentry_calls(native_obj)
    assert len(calls) == len(TRACED)  # clang's -pg honours no_instrument_function
    want = code_sections(native_obj)
    got = code_sections(plugin_obj)
    assert sorted(want) == sorted(got)
    for sec, off in calls:
        assert want[sec][off] == 0xe8
        want[sec][off:off + 5] = NOP5
    for name in want:
        assert want[name] == got[name], f"{name} differs"
    assert mcount_sites(plugin_obj) == calls
    if padding:
        assert records(plugin_obj, "__patchable_function_entries")[0] == \
            records(native_obj, "__patchable_function_entries")[0]


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_x86_64_recordmcount_ng_records_the_same_sites(tmp_path, clang_plugin, opt):
    """Post-processing clang's -pg -mfentry object with recordmcount-ng (as
    Linux's Kbuild does with scripts/recordmcount) records the same sites
    as the plugin; what it leaves is the calls, which Linux turns into NOPs
    at boot, where the plugin writes the NOPs at once."""
    native_obj, plugin_obj = compile_pair(
        tmp_path, X86, [opt, "-fcf-protection=branch"], ["-pg", "-mfentry"], {})
    run([RECORDMCOUNT, native_obj])
    assert len(mcount_sites(plugin_obj)) == len(TRACED)
    assert mcount_sites(native_obj) == mcount_sites(plugin_obj)


@pytest.mark.parametrize("opt", ["-O0", "-O2", "-Os"])
@pytest.mark.parametrize("ibt", [[], ["-fcf-protection=branch"]], ids=["plain", "ibt"])
def test_x86_64_same_sites_as_gcc(tmp_path, clang_plugin, opt, ibt):
    """GCC's -pg -mfentry -mrecord-mcount -mnop-mcount and the clang plugin
    on the same source: the same functions recorded, each at its entry or
    right behind its endbr64, each the NOP 0f 1f 44 00 00, in an
    __mcount_loc section of the same kind."""
    gcc_obj, clang_obj = tmp_path / "gcc.o", tmp_path / "clang.o"
    run(["gcc", "-fno-pie", "-mcmodel=kernel", "-mno-red-zone", "-ffreestanding",
         "-falign-functions=16", opt, *ibt, "-pg", "-mfentry", "-mrecord-mcount",
         "-mnop-mcount", "-c", SRC, "-o", gcc_obj])
    run([*X86["cc"], *X86["flags"], opt, *ibt, *clang_flags(abi="kernel"), "-c", SRC,
         "-o", clang_obj])
    sites = {}
    for name, obj in (("gcc", gcc_obj), ("clang", clang_obj)):
        exe = tmp_path / f"{name}.elf"
        run(["gcc", "-nostdlib", "-static", "-Wl,-e,0", obj, "-o", exe])
        with Image(exe) as image:
            data = image.elf.get_section_by_name("__mcount_loc").data()
            addrs = [int.from_bytes(data[i:i + 8], "little") for i in range(0, len(data), 8)]
            funcs = image.function_symbols()
            got = {}
            for addr in addrs:
                assert image.read(addr, 5) == NOP5, f"{name}: {addr:#x}"
                fn, entry, _ = max((f for f in funcs if f[1] <= addr), key=lambda f: f[1])
                assert addr == entry + (4 if image.read(entry, 4) == ENDBR64 else 0), fn
                got[fn.split(".")[0]] = addr - entry
            sites[name] = got
    assert set(sites["clang"]) == set(sites["gcc"]) == set(TRACED)
    if not ibt:
        assert set(sites["clang"].values()) == set(sites["gcc"].values()) == {0}
    assert mcount_section(clang_obj) == mcount_section(gcc_obj)


def test_x86_64_kernel_has_no_ops_slot(tmp_path, clang_plugin):
    p = run(["clang-14", "-c", SRC, "-o", tmp_path / "x.o", *clang_flags(abi="kernel", ops=1)],
            check=False)
    assert p.returncode != 0 and "x86_64 kernel layout has no ops slot" in p.stderr, p.stderr


def test_x86_64_call_padding_on_every_function(tmp_path, clang_plugin):
    """before=N in the x86_64 kernel ABI pads every function, the notrace
    one too: Linux's call depth tracking needs it everywhere."""
    obj = tmp_path / "k.o"
    run([*X86["cc"], *X86["flags"], "-O2", *clang_flags(abi="kernel", before=16), "-c", SRC,
         "-o", obj])
    exe = tmp_path / "k.elf"
    run(["gcc", "-nostdlib", "-static", "-Wl,-e,0", obj, "-o", exe])
    with Image(exe) as image:
        for name, addr, _ in image.function_symbols():
            assert image.read(addr - 16, 16) == b"\x90" * 16, name


@pytest.mark.parametrize("opt", ["-O0", "-O2", "-Os"])
@pytest.mark.parametrize("bp", ["none", "standard", "bti", "pac-ret+leaf"])
@pytest.mark.parametrize("ops", [1, 0], ids=["call-ops", "no-ops"])
def test_arm64_matches_patchable_function_entry(tmp_path, clang_plugin, opt, bp, ops):
    native = ["-fpatchable-function-entry=4,2" if ops else "-fpatchable-function-entry=2"]
    flags = [opt, f"-mbranch-protection={bp}"]
    native_obj, plugin_obj = compile_pair(tmp_path, A64, flags, native, {"ops": ops})
    want, got = code_sections(native_obj), code_sections(plugin_obj)
    assert want == got
    want, native_sections = records(native_obj, "__patchable_function_entries")
    got, our_sections = records(plugin_obj, "__patchable_function_entries")
    assert got == want and len(got) == len(TRACED)
    assert all(f & SH_FLAGS.SHF_LINK_ORDER and align == 8 for f, align in our_sections)
    assert "__ftpad_sites" not in code_sections(plugin_obj)


@pytest.mark.parametrize("before", [0, 1, 2, 3])
@pytest.mark.parametrize("after", [2, 3])
@pytest.mark.parametrize("ops", [1, 0], ids=["call-ops", "no-ops"])
def test_arm64_every_count(tmp_path, clang_plugin, before, after, ops):
    """Every before/after/ops is clang's own
    -fpatchable-function-entry=TOTAL,BEFORE-THE-ENTRY, byte for byte, with
    the same records, except an odd `before` with the ops literal: clang
    aligns the start of the area, which leaves the literal misaligned, and
    the plugin puts one NOP of filler ahead of it."""
    entry = before + 2 * ops
    native = [f"-fpatchable-function-entry={entry + after},{entry}"]
    native_obj, plugin_obj = compile_pair(
        tmp_path, A64, ["-O2", "-mbranch-protection=standard"], native,
        dict(before=before, after=after, ops=ops))
    check_arm64_count(native_obj, plugin_obj, before, ops, len(TRACED), "clang")


def test_arm64_call_ops_literal_aligned_at_Os(tmp_path, clang_plugin):
    """Without -falign-functions=8 clang aligns functions to 4 at -Os, and
    its own CALL_OPS literal goes misaligned; the plugin's stays 8-aligned."""
    flags = ["-Os"]
    common = [*A64["cc"], "-ffreestanding", "-mgeneral-regs-only", *flags, "-c", SRC]
    native_obj, plugin_obj = tmp_path / "n.o", tmp_path / "p.o"
    run([*common, "-fpatchable-function-entry=4,2", "-o", native_obj])
    run([*common, *clang_flags(abi="kernel"), "-o", plugin_obj])
    with open(plugin_obj, "rb") as f:
        aligns = {s.name: s["sh_addralign"] for s in ELFFile(f).iter_sections()}
    want, _ = records(native_obj, "__patchable_function_entries")
    got, _ = records(plugin_obj, "__patchable_function_entries")
    assert any(off % 8 for _, off in want), "clang kept the alignment: update the docs"
    assert all(off % 8 == 0 and aligns[sec] >= 8 for sec, off in got), got


def linked_addresses(tmp_path, arch, obj, section):
    """Addresses a record section holds once OBJ is linked (absolute)."""
    exe = tmp_path / f"{obj.stem}.elf"
    cc = "gcc" if arch is X86 else "aarch64-linux-gnu-gcc-12"
    run([cc, "-nostdlib", "-static", "-Wl,-e,0", "-Wl,--no-gc-sections", obj, "-o", exe])
    with Image(exe) as image:
        data = b"".join(s.data() for s in image.elf.iter_sections() if s.name == section)
        addresses = [int.from_bytes(data[i:i + 8], "little") for i in range(0, len(data), 8)]
    return addresses, exe


@pytest.mark.parametrize("abi", ["user", "kernel"])
@pytest.mark.parametrize("record", ["ftpad", "mcount", "patchable"])
@pytest.mark.parametrize("arch_name", ["x86_64", "aarch64"])
def test_every_record_kind_in_every_abi(tmp_path, clang_plugin, abi, record, arch_name):
    """record= is independent of abi=, as with the GCC plugin:
    __ftpad_sites records, __mcount_loc holds each site, and
    __patchable_function_entries the start of the area before the entry
    (or the first unit behind the landing pad when there is none)."""
    arch = X86 if arch_name == "x86_64" else A64
    landing = "-fcf-protection=branch" if arch is X86 else "-mbranch-protection=standard"
    obj = tmp_path / "k.o"
    run([*arch["cc"], "-O2", "-fno-pie", landing, *arch["flags"],
         *clang_flags(abi=abi, record=record), "-c", SRC, "-o", obj])
    section = {"ftpad": "__ftpad_sites", "mcount": "__mcount_loc",
               "patchable": "__patchable_function_entries"}[record]
    addresses, exe = linked_addresses(tmp_path, arch, obj, section)
    with Image(exe) as image:
        syms = {n.split(".")[0]: a for n, a, _ in image.function_symbols()}
        lead = ENDBR64 if arch is X86 else A64_BTI_C
        has_ops = abi == "user" or arch is A64
        if record == "ftpad":
            sites = {s.name.split(".")[0]: s for s in image.sites()}
            assert sorted(sites) == sorted(TRACED)
            for name, site in sites.items():
                assert site.entry == syms[name]
                assert bool(site.flags & FLAG_KERNEL) == (abi == "kernel")
                assert (site.ops != 0) == has_ops
            return
        assert len(addresses) == len(TRACED)
        for name in TRACED:
            entry = syms[name]
            behind = entry + (4 if image.read(entry, 4) == lead else 0)
            if record == "patchable":
                want = entry - 8 if has_ops else behind
            else:
                want = behind + (4 if arch is A64 else 0)  # the site
                assert image.read(want, 5 if arch is X86 else 4) == \
                    (NOP5 if arch is X86 else A64_NOP)
            assert want in addresses, f"{name}: {want:#x} not in {section}"


@pytest.mark.parametrize("arch_name", ["x86_64", "aarch64"])
@pytest.mark.parametrize("unsafe", [0, 1])
def test_kernel_abi_keeps_ipra_off(tmp_path, clang_plugin, arch_name, unsafe):
    """Compile-level, with -mllvm -enable-ipra: with the plugin's default
    caller() keeps nothing in a call-clobbered register across the call to
    the padded leaf; with IPRA left on it does."""
    from test_clang_pass import ARCHES
    from test_ipa_ra import SRC as IPA_RA_SRC, caller_keeps_values_in
    exe = tmp_path / "k"
    cc = X86["cc"] if arch_name == "x86_64" else A64["cc"]
    run([*cc, "-O2", "-fno-pie", "-no-pie",
         "-mllvm", "-enable-ipra", f"-I{INCLUDE}", *clang_flags(abi="kernel", unsafe_ipa_ra=unsafe),
         IPA_RA_SRC, "-o", exe, *ARCHES[arch_name]["libftpad"]])
    kept = caller_keeps_values_in(exe, arch_name)
    assert bool(kept) == bool(unsafe), kept


@pytest.mark.parametrize("opt", ["-O0", "-O2", "-Os"])
@pytest.mark.parametrize("ibt", [[], ["-fcf-protection=branch"]], ids=["plain", "ibt"])
def test_x86_64_clang_pg_takes_the_place_of_pg_mfentry(tmp_path, clang_plugin, opt, ibt):
    """clang-pg=1 (how a clang-built kernel loads the plugin, docs/kbuild.md):
    with -pg -mfentry the object is abi=kernel's without them, byte for byte
    (no call to __fentry__, the NOPs and their __mcount_loc records); without
    -pg it is clang's own without the plugin, with no report line."""
    common = [*X86["cc"], *X86["flags"], opt, *ibt, "-c", SRC]
    pg = clang_flags(abi="kernel", pg=1, report=tmp_path / "pg.jsonl")
    kernel_obj, pg_obj = tmp_path / "kernel.o", tmp_path / "pg.o"
    run([*common, *clang_flags(abi="kernel"), "-o", kernel_obj])
    run([*common, "-pg", "-mfentry", *pg, "-o", pg_obj])
    assert code_sections(pg_obj) == code_sections(kernel_obj)
    assert mcount_sites(pg_obj) == mcount_sites(kernel_obj)
    assert len(mcount_sites(pg_obj)) == len(TRACED)
    assert not fentry_calls(pg_obj)
    assert len((tmp_path / "pg.jsonl").read_text().splitlines()) == len(TRACED) + 1  # + notrace
    plain_obj, off_obj = tmp_path / "plain.o", tmp_path / "off.o"
    run([*common, "-mfentry", "-o", plain_obj])
    run([*common, "-mfentry", *clang_flags(abi="kernel", pg=1, report=tmp_path / "off.jsonl"),
         "-o", off_obj])
    assert code_sections(off_obj) == code_sections(plain_obj)
    assert not mcount_sites(off_obj) and not (tmp_path / "off.jsonl").exists()


def test_clang_pg_without_pg_takes_any_target(tmp_path, clang_plugin):
    """Kbuild's KCFLAGS also reach compiles for targets without a layout (a
    32-bit vDSO); without -pg the plugin stays out of them."""
    run(["clang-14", "-m32", "-O2", "-c", SRC, "-o", tmp_path / "x.o",
         *clang_flags(abi="kernel", pg=1)])
    p = run(["clang-14", "-m32", "-O2", "-c", SRC, "-o", tmp_path / "y.o",
             *clang_flags(abi="kernel")], check=False)
    assert p.returncode != 0 and "no pad layout for target i386" in p.stderr, p.stderr


@pytest.mark.parametrize("flags,message", [
    (["-pg", "-mfentry", "-fplugin-arg-ftpad-clang-pg=2"],
     "bad argument -fplugin-arg-ftpad-clang-pg=2: must be 0 or 1"),
    (["-pg", "-fplugin-arg-ftpad-clang-pg=1"], "takes the place of -pg -mfentry"),
    (["-pg", "-mfentry", "-fplugin-arg-ftpad-clang-pg=0"], "-pg -mfentry puts a call first"),
], ids=["bad-value", "pg-alone", "pg-0"])
def test_clang_pg_errors(tmp_path, clang_plugin, flags, message):
    p = run([*X86["cc"], *X86["flags"], "-O2", "-c", SRC, "-o", tmp_path / "x.o",
             *clang_flags(abi="kernel"), *flags], check=False)
    assert p.returncode != 0 and message in p.stderr, p.stderr
    assert not (tmp_path / "x.o").exists()
