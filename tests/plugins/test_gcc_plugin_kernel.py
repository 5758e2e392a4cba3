# SPDX-License-Identifier: MIT
"""abi=kernel: byte for byte what Linux 6.12's own compiler flags give.

x86_64: -pg -mfentry -mrecord-mcount -mnop-mcount (plus
-fpatchable-function-entry=16,16 for CALL_PADDING): ENDBR, the 5-byte NOP and
its __mcount_loc record.  arm64: -fpatchable-function-entry=4,2 (CALL_OPS)
or =2, recorded in __patchable_function_entries, but with one record section
per function and the ops literal 8-aligned where GCC loses the alignment."""

import capstone
import pytest
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from ftpadtest import (A64_PLUGIN, ENDBR64, FLAG_BTI, FLAG_ENDBR, FLAG_KERNEL, NOP5, PLUGIN,
                       Image, plugin_flags, run)
from ftpadtest import TEST_SRC  # noqa: E402

BTI_C = bytes.fromhex("5f2403d5")
A64_NOP = bytes.fromhex("1f2003d5")

SRC = TEST_SRC / "kernel_like.c"
# C++: COMDAT functions, constructors, destructors, templates.
CXX_SRC = TEST_SRC / "layout.cc"
X86 = dict(cc="gcc", plugin=PLUGIN,
           flags=["-fno-pie", "-mcmodel=kernel", "-mno-red-zone", "-ffreestanding",
                  "-falign-functions=16"])
A64 = dict(cc="aarch64-linux-gnu-gcc-12", plugin=A64_PLUGIN,
           flags=["-ffreestanding", "-mgeneral-regs-only", "-falign-functions=8"])


def compile_pair(tmp_path, arch, flags, native, plugin_args, src=SRC):
    common = [*arch["flags"], *flags, "-c", src]
    native_obj, plugin_obj = tmp_path / "native.o", tmp_path / "plugin.o"
    run([arch["cc"], *common, *native, "-o", native_obj])
    run([arch["cc"], *common, *plugin_flags(arch["plugin"], abi="kernel", **plugin_args),
         "-o", plugin_obj])
    return native_obj, plugin_obj


def code_sections(obj):
    """[(name, bytes)] of every executable section of OBJ, in file order:
    .text, .text.unlikely, .init.text, COMDAT .text._Z... and the rest."""
    with open(obj, "rb") as f:
        return [(sec.name, sec.data()) for sec in ELFFile(f).iter_sections()
                if sec["sh_flags"] & SH_FLAGS.SHF_EXECINSTR]


def records(obj, section):
    """(target section, offset) of every relocation in SECTION's copies,
    sorted, plus the number of such sections and their flags."""
    out, sections = [], []
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        symtab = elf.get_section_by_name(".symtab")
        for sec in elf.iter_sections():
            if sec.name == section:
                sections.append(sec)
            if sec["sh_type"] != "SHT_RELA" or sec.name != ".rela" + section:
                continue
            for rel in sec.iter_relocations():
                sym = symtab.get_symbol(rel["r_info_sym"])
                target = (elf.get_section(sym["st_shndx"]).name
                          if sym["st_info"]["type"] == "STT_SECTION" else sym.name)
                out.append((target, sym["st_value"] + rel["r_addend"]))
        flags = [(s["sh_flags"], s["sh_addralign"]) for s in sections]
    return sorted(out), flags


def assert_same_text(native, plugin):
    want, got = code_sections(native), code_sections(plugin)
    assert [n for n, _ in got] == [n for n, _ in want]
    assert ".text" in [n for n, _ in want]
    for (name, a), (_, b) in zip(want, got):
        assert a == b, f"{name} differs"


@pytest.mark.parametrize("opt", ["-O0", "-O2", "-Os"])
@pytest.mark.parametrize("ibt", [[], ["-fcf-protection=branch"]], ids=["plain", "ibt"])
@pytest.mark.parametrize("padding", [0, 16])
def test_x86_64_matches_mrecord_mcount(tmp_path, plugin, opt, ibt, padding):
    native = ["-pg", "-mfentry", "-mrecord-mcount", "-mnop-mcount"]
    args = {}
    if padding:
        native.append(f"-fpatchable-function-entry={padding},{padding}")
        args["before"] = padding
    native_obj, plugin_obj = compile_pair(tmp_path, X86, [opt, *ibt], native, args)
    assert_same_text(native_obj, plugin_obj)
    want, _ = records(native_obj, "__mcount_loc")
    got, _ = records(plugin_obj, "__mcount_loc")
    assert got == want and len(got) == 6  # every function but the notrace one
    # No ftpad records in the kernel ABI.
    assert records(plugin_obj, "__ftpad_sites") == ([], [])


def test_x86_64_kernel_has_no_ops_slot(tmp_path, plugin):
    p = run(["gcc", "-c", SRC, "-o", tmp_path / "x.o",
             *plugin_flags(abi="kernel", ops=1)], check=False)
    assert p.returncode != 0 and "kernel layout has no ops slot" in p.stderr, p.stderr


BRANCH_PROTECTION = {"plain": [], "standard": ["-mbranch-protection=standard"],
                     "bti": ["-mbranch-protection=bti"],
                     "pac-ret+leaf": ["-mbranch-protection=pac-ret+leaf"]}


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("bp", BRANCH_PROTECTION)
@pytest.mark.parametrize("ops", [1, 0], ids=["call-ops", "no-ops"])
def test_arm64_matches_patchable_function_entry(tmp_path, plugin, opt, bp, ops):
    native = ["-fpatchable-function-entry=4,2" if ops else "-fpatchable-function-entry=2"]
    native_obj, plugin_obj = compile_pair(tmp_path, A64, [opt, *BRANCH_PROTECTION[bp]], native,
                                          {"ops": ops})
    assert_same_text(native_obj, plugin_obj)
    want, native_sections = records(native_obj, "__patchable_function_entries")
    got, our_sections = records(plugin_obj, "__patchable_function_entries")
    assert got == want and len(got) == 6
    # One link-order section per function, where GCC 12 has one per file
    # (PR110729).
    assert len(our_sections) == len(got) > len(native_sections)
    assert all(f & SH_FLAGS.SHF_LINK_ORDER and align == 8 for f, align in our_sections)


@pytest.mark.parametrize("before", [0, 1, 2, 3])
@pytest.mark.parametrize("after", [2, 3, 5])
@pytest.mark.parametrize("ops", [1, 0], ids=["call-ops", "no-ops"])
def test_arm64_every_count_matches_gcc(tmp_path, plugin, before, after, ops):
    """Every combination of before, after and ops is GCC's own
    -fpatchable-function-entry=TOTAL,BEFORE-THE-ENTRY, byte for byte, with
    the same records; BTI, which comes first, included.  Except an odd
    `before` with the ops literal: GCC aligns the start of the area, which
    leaves the literal misaligned, and the plugin adds one NOP of filler
    ahead of it to keep it 8-aligned."""
    entry = before + 2 * ops
    native = [f"-fpatchable-function-entry={entry + after},{entry}"]
    native_obj, plugin_obj = compile_pair(
        tmp_path, A64, ["-O2", "-mbranch-protection=standard"], native,
        dict(before=before, after=after, ops=ops))
    check_arm64_count(native_obj, plugin_obj, before, ops, 6, "GCC")


def check_arm64_count(native_obj, plugin_obj, before, ops, functions, compiler):
    """The plugin's arm64 kernel object (PLUGIN_OBJ) has COMPILER's own
    -fpatchable-function-entry code and records (NATIVE_OBJ) for its
    FUNCTIONS, except with the ops literal after an odd BEFORE: then only
    the plugin keeps the literal 8-aligned."""
    want, _ = records(native_obj, "__patchable_function_entries")
    got, _ = records(plugin_obj, "__patchable_function_entries")
    assert len(got) == len(want) == functions
    if ops and before % 2:
        assert all((off + 4 * before) % 8 == 0 for _, off in got), got
        assert any((off + 4 * before) % 8 for _, off in want), \
            f"{compiler} kept the literal aligned"
        return
    assert_same_text(native_obj, plugin_obj)
    assert got == want


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_cxx_matches_gcc(tmp_path, plugin, arch):
    """C++ (COMDAT, inline, template, constructor and destructor functions)
    in the kernel ABI: GCC's own bytes, every COMDAT section compared."""
    a = dict(X86 if arch == "x86_64" else A64)
    a["cc"] = "g++" if arch == "x86_64" else "aarch64-linux-gnu-g++-12"
    a["flags"] = [f for f in a["flags"] if f != "-mgeneral-regs-only"]  # twice<double>
    if arch == "x86_64":
        native = ["-pg", "-mfentry", "-mrecord-mcount", "-mnop-mcount"]
        section, flags = "__mcount_loc", []
    else:
        # Linux's arm64 notrace (kernel_like.c)
        native = ["-fpatchable-function-entry=4,2"]
        section = "__patchable_function_entries"
        flags = ["-Dno_instrument_function=patchable_function_entry(0, 0)"]
    native_obj, plugin_obj = compile_pair(tmp_path, a, ["-O0", *flags], native, {}, src=CXX_SRC)
    assert_same_text(native_obj, plugin_obj)
    want, _ = records(native_obj, section)
    got, _ = records(plugin_obj, section)
    assert got == want and len(got) == 13  # every function but skip_notrace


@pytest.mark.parametrize("before", [0, 3])
@pytest.mark.parametrize("after", [5, 6, 9])
@pytest.mark.parametrize("ibt", [[], ["-fcf-protection=branch"]], ids=["plain", "ibt"])
def test_x86_64_every_count(tmp_path, plugin, before, after, ibt):
    """Every before and after of the x86_64 kernel layout.  after=5 is
    Linux's, byte for byte; a longer one adds NOPs behind the site, which
    no GCC flag gives: there every __mcount_loc entry is a 5-byte NOP behind
    the symbol (and ENDBR), followed by after-5 bytes of NOPs, and the
    CALL_PADDING bytes before it are 0x90."""
    native = ["-pg", "-mfentry", "-mrecord-mcount", "-mnop-mcount"]
    if before:
        native.append(f"-fpatchable-function-entry={before},{before}")
    native_obj, plugin_obj = compile_pair(tmp_path, X86, ["-O2", *ibt], native,
                                          dict(before=before, after=after))
    if after == 5:
        assert_same_text(native_obj, plugin_obj)
        assert records(native_obj, "__mcount_loc")[0] == records(plugin_obj, "__mcount_loc")[0]
    addresses, syms, exe = linked_addresses(plugin_obj, "__mcount_loc", tmp_path, X86)
    assert len(addresses) == 6
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    with Image(exe) as image:
        functions = image.functions()
        landing = 0
        for addr in addresses:
            name = next(n for n, (v, _) in functions.items() if v in (addr, addr - 4))
            entry = functions[name][0]
            has_endbr = image.read(entry, 4) == ENDBR64
            landing += has_endbr
            assert addr == entry + 4 * has_endbr, name
            assert image.read(addr, 5) == NOP5
            rest = image.read(addr + 5, after - 5)
            assert sum(i.size for i in md.disasm(rest, addr + 5) if i.mnemonic == "nop") == \
                after - 5, name
            assert image.read(entry - before, before) == b"\x90" * before
        assert bool(landing) == bool(ibt)


@pytest.mark.parametrize("how", ["attribute", "policy"])
@pytest.mark.parametrize("arch", ["x86_64", "x86_64-call-padding", "aarch64"])
def test_own_layout_of_one_function(tmp_path, plugin, arch, how):
    """One function's own layout (an ftpad attribute or a policy rule) in
    the kernel ABI is what GCC gives for the same counts in a
    patchable_function_entry attribute: before=2 is two NOPs ahead of the
    entry (x86_64, as CALL_PADDING would put them, and in place of
    CALL_PADDING's 16 where that is on) or of the ops literal (arm64), and
    on arm64 after=3 one NOP more behind the entry; the other function keeps
    the default."""
    a = A64 if arch == "aarch64" else X86
    before, args = 2, {}
    body = "int f(int x) { return x * 3; }\nint g(int x) { return x + 1; }\n"
    if arch.startswith("x86_64"):
        after, section = 5, "__mcount_loc"
        native_attr = f"patchable_function_entry({before}, {before})"
        native = ["-pg", "-mfentry", "-mrecord-mcount", "-mnop-mcount"]
        if arch.endswith("call-padding"):
            native.append("-fpatchable-function-entry=16,16")
            args["before"] = 16
    else:
        after, section = 3, "__patchable_function_entries"
        native_attr = f"patchable_function_entry({before + 2 + after}, {before + 2})"
        native = ["-fpatchable-function-entry=4,2"]
    native_src = tmp_path / "native.c"
    native_src.write_text(f"__attribute__(({native_attr})) " + body)
    src = tmp_path / "plugin.c"
    if how == "attribute":
        src.write_text(f"__attribute__((ftpad({before}, {after}))) " + body)
    else:
        src.write_text(body)
        policy = tmp_path / "k.policy"
        policy.write_text(f"pad f before={before} after={after}\n")
        args["policy"] = policy
    native_obj, plugin_obj = tmp_path / "native.o", tmp_path / "plugin.o"
    common = [a["cc"], *a["flags"], "-O2", "-c"]
    run([*common, *native, native_src, "-o", native_obj])
    run([*common, *plugin_flags(a["plugin"], abi="kernel", **args), src, "-o", plugin_obj])
    assert_same_text(native_obj, plugin_obj)
    want, _ = records(native_obj, section)
    got, _ = records(plugin_obj, section)
    assert got == want and len(got) == 2


def test_arm64_call_ops_literal_aligned_at_Os(tmp_path, plugin):
    """Linux has to turn CALL_OPS off at -Os with GCC, which drops the
    alignment; the plugin keeps every ops literal 8-aligned."""
    native_obj, plugin_obj = compile_pair(tmp_path, A64, ["-Os"],
                                          ["-fpatchable-function-entry=4,2"], {})
    with open(plugin_obj, "rb") as f:
        aligns = {s.name: s["sh_addralign"] for s in ELFFile(f).iter_sections()}
    want, _ = records(native_obj, "__patchable_function_entries")
    got, _ = records(plugin_obj, "__patchable_function_entries")
    assert any(off % 8 for _, off in want), "GCC kept the alignment: update docs/kbuild notes"
    assert all(off % 8 == 0 and aligns[sec] >= 8 for sec, off in got), got


@pytest.mark.parametrize("arg,expect", [("abi=linux", "expected user|kernel"),
                                        ("record=elf", "expected ftpad|mcount|patchable")])
def test_bad_abi_and_record(tmp_path, plugin, arg, expect):
    p = run(["gcc", "-c", SRC, "-o", tmp_path / "x.o", f"-fplugin={PLUGIN}",
             f"-fplugin-arg-ftpad-{arg}"], check=False)
    assert p.returncode != 0 and expect in p.stderr, p.stderr


def test_arm64_without_call_ops_keeps_gcc_alignment(tmp_path, plugin):
    """Without the ops literal nothing needs 8-byte alignment, so -Os stays
    byte for byte what -fpatchable-function-entry=2 gives."""
    native_obj, plugin_obj = compile_pair(tmp_path, A64, ["-Os"],
                                          ["-fpatchable-function-entry=2"], {"ops": 0})
    assert_same_text(native_obj, plugin_obj)
    assert records(native_obj, "__patchable_function_entries")[0] == \
        records(plugin_obj, "__patchable_function_entries")[0]


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_arm64_before_adds_nops_ahead_of_the_literal(tmp_path, plugin, opt):
    """before=2 with CALL_OPS is -fpatchable-function-entry=6,4: two more
    NOPs ahead of the ops literal, recorded at the start of them all."""
    native_obj, plugin_obj = compile_pair(tmp_path, A64, [opt],
                                          ["-fpatchable-function-entry=6,4"], {"before": 2})
    assert_same_text(native_obj, plugin_obj)
    assert records(native_obj, "__patchable_function_entries")[0] == \
        records(plugin_obj, "__patchable_function_entries")[0]


def linked_addresses(obj, section, tmp_path, arch):
    """Addresses a record section holds once OBJ is linked (absolute)."""
    exe = tmp_path / f"{obj.stem}.elf"
    run([arch["cc"], "-nostdlib", "-static", "-Wl,-e,0", "-Wl,--no-gc-sections", obj, "-o", exe])
    with open(exe, "rb") as f:
        elf = ELFFile(f)
        data = b"".join(s.data() for s in elf.iter_sections() if s.name == section)
        syms = {s.name: s["st_value"]
                for s in elf.get_section_by_name(".symtab").iter_symbols()}
    return [int.from_bytes(data[i:i + 8], "little") for i in range(0, len(data), 8)], syms, exe


TRACED = ["sum_list", "clamp", "account", "fmt_hex", "report_bug", "setup_total"]


def symbol(syms, name):
    """A function's address; static ones may be clones (clamp.constprop.0)."""
    return next(v for k, v in syms.items() if k == name or k.startswith(name + "."))


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_kernel_abi_with_ftpad_records(tmp_path, plugin, arch):
    """record=ftpad in the kernel ABI: the kernel layout, recorded in
    __ftpad_sites (flag KERNEL), and nothing in __mcount_loc or
    __patchable_function_entries."""
    a = X86 if arch == "x86_64" else A64
    obj = tmp_path / "k.o"
    run([a["cc"], "-O2", *a["flags"], "-mbranch-protection=standard" if a is A64 else
         "-fcf-protection=branch", *plugin_flags(a["plugin"], abi="kernel", record="ftpad"),
         "-c", SRC, "-o", obj])
    _, syms, exe = linked_addresses(obj, "__ftpad_sites", tmp_path, a)
    with Image(exe) as image:
        assert not image.elf.get_section_by_name("__mcount_loc")
        assert not image.elf.get_section_by_name("__patchable_function_entries")
        sites = {s.name.split(".")[0]: s for s in image.sites()}
        assert sorted(sites) == sorted(TRACED)
        for name, site in sites.items():
            assert site.entry == symbol(syms, name) and site.flags & FLAG_KERNEL
            lead = image.read(site.entry, 4)
            landing = 4 if lead in (ENDBR64, BTI_C) else 0
            assert bool(landing) == bool(site.flags & (FLAG_ENDBR | FLAG_BTI)), name
            if arch == "x86_64":
                assert site.ops == 0 and site.site == site.entry + landing
                assert image.read(site.site, 5) == NOP5
            else:
                # Linux writes mov x9, x30 into the first NOP: the site is the second
                assert site.ops == site.entry - 8 and site.ops % 8 == 0
                assert site.site == site.entry + landing + 4
                assert image.read(site.entry + landing, 8) == A64_NOP * 2


@pytest.mark.parametrize("abi", ["user", "kernel"])
@pytest.mark.parametrize("record", ["mcount", "patchable"])
@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_every_record_kind_in_every_abi(tmp_path, plugin, abi, record, arch):
    """record= is independent of abi=: __mcount_loc holds each site,
    __patchable_function_entries the start of the area before the entry
    (or the first NOP behind the landing pad when there is none)."""
    a = X86 if arch == "x86_64" else A64
    obj = tmp_path / "k.o"
    args = dict(abi=abi, record=record)
    run([a["cc"], "-O2", *a["flags"], *plugin_flags(a["plugin"], **args), "-c", SRC, "-o", obj])
    section = "__mcount_loc" if record == "mcount" else "__patchable_function_entries"
    addresses, syms, exe = linked_addresses(obj, section, tmp_path, a)
    traced = ["sum_list", "clamp", "account", "fmt_hex", "report_bug", "setup_total"]
    assert len(addresses) == len(traced)
    with Image(exe) as image:
        has_ops = abi == "user" or arch == "aarch64"
        for name in traced:
            # static ones may be clones: clamp.constprop.0
            entry = next(v for k, v in syms.items() if k == name or k.startswith(name + "."))
            if record == "patchable" and has_ops:
                want = entry - 8                      # the ops slot starts the area
            else:
                lead = image.read(entry, 4)
                want = entry + (4 if lead in (bytes.fromhex("f30f1efa"),
                                              bytes.fromhex("5f2403d5")) else 0)
                if record == "mcount" and arch == "aarch64":
                    want += 4                         # the site is the second insn
            assert want in addresses, f"{name}: {want:#x} not in {section}"
