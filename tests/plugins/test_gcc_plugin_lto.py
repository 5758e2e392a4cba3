# SPDX-License-Identifier: MIT
"""-flto: the pads come from lto1 at link time, so the plugin must be on the
link line too, and a link without it must fail instead of silently building
a program with no pads."""

import pytest

from ftpadtest import A64_PLUGIN, Image, PLUGIN, TEST_SRC, plugin_flags, run

SRC = TEST_SRC
SOURCES = [SRC / "comdat_a.cc", SRC / "comdat_b.cc"]
FUNCTIONS = {"main", "_Z6from_ai", "_Z6from_bi", "_Z13shared_inlinei",
             "_Z12shared_twiceIiET_S0_", "_Z8unused_bi"}
GUARD = "__ftpad_plugin_missing_from_lto_link_line"
# lld cannot run GCC's LTO plugin, so only bfd and gold link GCC LTO objects.
LINKERS = ["bfd", "gold"]
# GCC's drivers, with the plugin each needs; static on aarch64, since
# qemu-aarch64 has no sysroot.
ARCHES = {
    "x86_64": dict(cxx=["g++"], plugin=PLUGIN, runner=[]),
    "aarch64": dict(cxx=["aarch64-linux-gnu-g++-12", "-static"], plugin=A64_PLUGIN,
                    runner=["qemu-aarch64"]),
}


def lto_objects(tmp_path, *extra, arch="x86_64"):
    a = ARCHES[arch]
    objs = []
    for src in SOURCES:
        obj = tmp_path / (src.stem + ".o")
        run([*a["cxx"], "-O2", "-flto", *extra, *plugin_flags(a["plugin"]), "-c", src, "-o", obj])
        objs.append(obj)
    return objs


@pytest.mark.parametrize("partition", ["one", "max"])
@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("arch", ARCHES)
def test_lto_with_plugin_at_link(tmp_path, plugin, arch, linker, partition):
    a = ARCHES[arch]
    exe = tmp_path / "prog"
    run([*a["cxx"], "-O2", "-flto", f"-flto-partition={partition}", f"-fuse-ld={linker}",
         *plugin_flags(a["plugin"]), *lto_objects(tmp_path, arch=arch), "-o", exe])
    assert run([*a["runner"], exe]).stdout.strip() == "13"
    with Image(exe) as image:
        funcs = image.functions()
        sites = image.sites()
        names = [s.name for s in sites]
        assert len(names) == len(set(names))
        # LTO inlines and drops what it likes; whatever it emitted is padded.
        emitted = {n for n in funcs if n in FUNCTIONS or n.split(".")[0] in FUNCTIONS}
        assert set(names) == emitted and "main" in names
        for site in sites:
            assert funcs[site.name][0] == site.entry and site.ops + 8 == site.entry


@pytest.mark.parametrize("linker", LINKERS)
@pytest.mark.parametrize("arch", ARCHES)
def test_lto_without_plugin_at_link_fails(tmp_path, plugin, arch, linker):
    p = run([*ARCHES[arch]["cxx"], "-O2", "-flto", f"-fuse-ld={linker}",
             *lto_objects(tmp_path, arch=arch), "-o", tmp_path / "prog"], check=False)
    assert p.returncode != 0 and GUARD in p.stderr, p.stderr
    assert not (tmp_path / "prog").exists()


def test_fat_lto_objects_linked_without_lto_keep_their_pads(tmp_path, plugin):
    """Fat objects carry real code compiled with the plugin; a non-LTO link
    (-fno-lto) uses it, pads included, and the guard is satisfied there.
    (-fno-use-linker-plugin is no way out: collect2 then runs LTO itself.)"""
    exe = tmp_path / "prog"
    run(["g++", "-O2", "-fno-lto", *lto_objects(tmp_path, "-ffat-lto-objects"), "-o", exe])
    assert run([exe]).stdout.strip() == "13"
    with Image(exe) as image:
        assert {s.name for s in image.sites()} >= {"main", "_Z6from_ai", "_Z6from_bi"}


def test_fat_lto_objects_in_an_lto_link_need_the_plugin(tmp_path, plugin):
    """GCC's linker plugin runs LTO on fat objects even without -flto on the
    link line, which would drop their pads: that must fail too."""
    objs = lto_objects(tmp_path, "-ffat-lto-objects")
    p = run(["g++", "-O2", *objs, "-o", tmp_path / "prog"], check=False)
    assert p.returncode != 0 and GUARD in p.stderr, p.stderr
    exe = tmp_path / "prog"
    run(["g++", "-O2", *plugin_flags(), *objs, "-o", exe])
    with Image(exe) as image:
        assert "main" in {s.name for s in image.sites()}
