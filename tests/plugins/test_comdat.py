# SPDX-License-Identifier: MIT
"""C++ COMDAT functions defined in two translation units: with either
compiler's plugin, every linker keeps exactly one record per surviving
function.  GCC 12's own
-fpatchable-function-entry puts a whole file's records in one section linked
to its first function (PR110729), so bfd silently drops them and gold and lld
refuse to link; the last test shows that this is still so, which is why the
plugin emits its own per-function sections."""

import pytest

from ftpadtest import Image, TEST_SRC, run

SRC = TEST_SRC
SOURCES = [SRC / "comdat_a.cc", SRC / "comdat_b.cc"]
LINKERS = ["bfd", "gold", "lld"]
GC = {"nogc": [], "gc": ["-ffunction-sections", "-Wl,--gc-sections"]}
# aarch64 programs are linked statically and run under qemu-aarch64.
ARCHES = {
    "x86_64": dict(cxx=["g++"], link=[], runner=[]),
    "aarch64": dict(cxx=["aarch64-linux-gnu-g++-12"], link=["-static"],
                    runner=["qemu-aarch64"]),
}


def use_linker(arch, linker, driver="g++"):
    # The cross gcc looks for ld.lld only under its own prefix.
    cross_gcc = arch == "aarch64" and "clang" not in driver
    extra = ["-B/usr/bin/"] if cross_gcc and linker == "lld" else []
    return [f"-fuse-ld={linker}", *extra]


def surviving_functions(image):
    mine = {"main", "_Z6from_ai", "_Z6from_bi", "_Z13shared_inlinei",
            "_Z12shared_twiceIiET_S0_", "_Z8unused_bi"}
    return {name for name in image.functions() if name in mine}


@pytest.mark.parametrize("gc", GC)
@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("arch", ARCHES)
def test_one_record_per_surviving_function(tmp_path, compiler, arch, linker, gc):
    a = ARCHES[arch]
    exe = tmp_path / "prog"
    driver = compiler.driver(arch, cxx=True)
    run([*driver, "-O2", *GC[gc], *use_linker(arch, linker, driver[0]), *a["link"],
         *compiler.flags(arch), *SOURCES, "-o", exe])
    with Image(exe) as image:
        names = [s.name for s in image.sites()]
        assert len(names) == len(set(names)), f"duplicate records: {sorted(names)}"
        funcs = image.functions()
        assert set(names) == surviving_functions(image)
        for site in image.sites():
            assert funcs[site.name][0] == site.entry
        # --gc-sections removes the unused function and its record with it.
        assert ("_Z8unused_bi" in names) == (gc == "nogc")
    assert run([*a["runner"], exe]).stdout.strip() == "13"


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("arch", ARCHES)
def test_gcc_native_records_are_lost(tmp_path, arch, linker):
    """The control: GCC 12's own records for the same program."""
    exe = tmp_path / "prog"
    p = run([*ARCHES[arch]["cxx"], "-O2", "-fpatchable-function-entry=5", *use_linker(arch, linker),
             *ARCHES[arch]["link"], *SOURCES, "-o", exe], check=False)
    if linker == "bfd":
        assert p.returncode == 0, p.stderr
        with Image(exe) as image:
            sec = image.elf.get_section_by_name("__patchable_function_entries")
            records = sec.data_size // 8 if sec else 0
            assert records < len(surviving_functions(image)), \
                "GCC's own records survived: PR110729 fixed? then say so in docs/design.md"
    else:
        assert p.returncode != 0, "gold/lld linked GCC's PR110729 records"
        assert "discarded section" in p.stderr
