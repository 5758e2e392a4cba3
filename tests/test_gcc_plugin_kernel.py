# SPDX-License-Identifier: MIT
"""abi=kernel: byte for byte what Linux 6.12's own compiler flags give.

x86_64: -pg -mfentry -mrecord-mcount -mnop-mcount (plus
-fpatchable-function-entry=16,16 for CALL_PADDING): ENDBR, the 5-byte NOP and
its __mcount_loc record.  arm64: -fpatchable-function-entry=4,2 (CALL_OPS)
or =2, recorded in __patchable_function_entries, but with one record section
per function and the ops literal 8-aligned where GCC loses the alignment."""
import pathlib

import pytest
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from ftpadtest import A64_PLUGIN, PLUGIN, Image, plugin_flags, run

SRC = pathlib.Path(__file__).parent / "src" / "kernel_like.c"
TEXT = (".text", ".text.unlikely", ".init.text")
X86 = dict(cc="gcc", objcopy="objcopy", plugin=PLUGIN,
           flags=["-fno-pie", "-mcmodel=kernel", "-mno-red-zone", "-ffreestanding",
                  "-falign-functions=16"])
A64 = dict(cc="aarch64-linux-gnu-gcc-12", objcopy="aarch64-linux-gnu-objcopy", plugin=A64_PLUGIN,
           flags=["-ffreestanding", "-mgeneral-regs-only", "-falign-functions=8"])


def compile_pair(tmp_path, arch, flags, native, plugin_args):
    common = [*arch["flags"], *flags, "-c", SRC]
    native_obj, plugin_obj = tmp_path / "native.o", tmp_path / "plugin.o"
    run([arch["cc"], *common, *native, "-o", native_obj])
    run([arch["cc"], *common, *plugin_flags(arch["plugin"], abi="kernel", **plugin_args),
         "-o", plugin_obj])
    return native_obj, plugin_obj


def section_bytes(arch, obj, name, tmp_path):
    out = tmp_path / f"{obj.stem}{name}.bin"
    run([arch["objcopy"], "-O", "binary", "-j", name, obj, out])
    return out.read_bytes()


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


def assert_same_text(arch, native, plugin, tmp_path):
    for name in TEXT:
        assert section_bytes(arch, native, name, tmp_path) == \
            section_bytes(arch, plugin, name, tmp_path), f"{name} differs"


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
    assert_same_text(X86, native_obj, plugin_obj, tmp_path)
    want, _ = records(native_obj, "__mcount_loc")
    got, _ = records(plugin_obj, "__mcount_loc")
    assert got == want and len(got) == 6  # every function but the notrace one
    # No ftpad records in the kernel ABI.
    assert records(plugin_obj, "__ftpad_sites") == ([], [])


def test_x86_64_kernel_has_no_ops_slot(tmp_path, plugin):
    p = run(["gcc", "-c", SRC, "-o", tmp_path / "x.o",
             *plugin_flags(abi="kernel", ops=1)], check=False)
    assert p.returncode != 0 and "kernel layout has no ops slot" in p.stderr, p.stderr


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("bp", [[], ["-mbranch-protection=standard"]], ids=["plain", "bti"])
@pytest.mark.parametrize("ops", [1, 0], ids=["call-ops", "no-ops"])
def test_arm64_matches_patchable_function_entry(tmp_path, plugin, opt, bp, ops):
    native = ["-fpatchable-function-entry=4,2" if ops else "-fpatchable-function-entry=2"]
    native_obj, plugin_obj = compile_pair(tmp_path, A64, [opt, *bp], native, {"ops": ops})
    assert_same_text(A64, native_obj, plugin_obj, tmp_path)
    want, native_sections = records(native_obj, "__patchable_function_entries")
    got, our_sections = records(plugin_obj, "__patchable_function_entries")
    assert got == want and len(got) == 6
    # One link-order section per function, where GCC 12 has one per file
    # (PR110729).
    assert len(our_sections) == len(got) > len(native_sections)
    assert all(f & SH_FLAGS.SHF_LINK_ORDER and align == 8 for f, align in our_sections)


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
    assert_same_text(A64, native_obj, plugin_obj, tmp_path)
    assert records(native_obj, "__patchable_function_entries")[0] == \
        records(plugin_obj, "__patchable_function_entries")[0]


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_arm64_before_adds_nops_ahead_of_the_literal(tmp_path, plugin, opt):
    """before=2 with CALL_OPS is -fpatchable-function-entry=6,4: two more
    NOPs ahead of the ops literal, recorded at the start of them all."""
    native_obj, plugin_obj = compile_pair(tmp_path, A64, [opt],
                                          ["-fpatchable-function-entry=6,4"], {"before": 2})
    assert_same_text(A64, native_obj, plugin_obj, tmp_path)
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
