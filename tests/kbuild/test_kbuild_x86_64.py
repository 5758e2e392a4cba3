# SPDX-License-Identifier: MIT
"""x86_64: Debian's linux-source-6.12 (tinyconfig + function tracer, see
tests/kbuild/x86_64.config) built with ftpad's kernel ABI in place of
`-pg -mfentry -mrecord-mcount`, with no kernel patch (docs/kbuild.md), then
booted under QEMU TCG with a busybox initramfs.

The builds are cached under /var/cache/ftpad/kbuild, keyed by the source
version, the fragment and the plugin's hash (tests/kbuild/kernel.py); the
boot and every check below run each time."""
import re
import subprocess

import pytest

import kernel  # noqa: E402
import vmlinux  # noqa: E402
from conftest import require_kernel_tools, require_tool  # noqa: E402

ENDBR64 = bytes.fromhex("f30f1efa")
NOP5 = bytes.fromhex("0f1f440000")

@pytest.fixture(scope="module")
def stock():
    require_kernel_tools()
    return kernel.stock_build("x86_64")


@pytest.fixture(scope="module")
def ftpad(plugin):
    # report=True: tests/kbuild/test_kbuild_policy.py reads the plugin's report of
    # this build (and shares the cached folder).
    return kernel.build("x86_64", "ftpad", plugin, report=True)


@pytest.fixture(scope="module")
def console(ftpad, tmp_path_factory):
    require_tool("qemu-system-x86_64")
    text, secs = kernel.boot("x86_64", ftpad, tmp_path_factory.mktemp("boot-x86_64"))
    print(f"boot: {secs:.0f} s")
    return text


def test_compile_line_replaces_pg_with_plugin(ftpad):
    """Kbuild's command line still says -pg (so every `CFLAGS_REMOVE_x.o = -pg`
    works), the specs file turns it into the plugin for cc1, and
    CC_USING_NOP_MCOUNT tells ftrace the sites are NOPs already."""
    cmd = (ftpad / "fs" / ".read_write.o.cmd").read_text().splitlines()[0]
    assert " -pg " in cmd and f"-specs={ftpad}/ftpad-kernel.specs" in cmd, cmd
    assert "-DCC_USING_NOP_MCOUNT" in cmd and "-DCC_USING_FENTRY" in cmd, cmd
    assert "-mfentry" not in cmd and "-mrecord-mcount" not in cmd, cmd
    specs = (ftpad / "ftpad-kernel.specs").read_text()
    assert (f"%{{pg:-fplugin={ftpad}/ftpad.so -fplugin-arg-ftpad-abi=kernel "
            f"-fplugin-arg-ftpad-report={ftpad}/{kernel.REPORT}}}") in specs
    # What the driver really runs for that object: the plugin, and no -p.
    p = subprocess.run(["gcc", f"-specs={ftpad}/ftpad-kernel.specs", "-pg", "-###",
                        "-c", "-x", "c", "/dev/null"], capture_output=True, text=True)
    cc1 = [ln for ln in p.stderr.splitlines() if "cc1" in ln][0]
    assert f'"-fplugin={ftpad}/ftpad.so"' in cc1 and '"-p"' not in cc1, cc1


def readelf_sections(obj):
    return subprocess.run(["readelf", "-SW", obj], capture_output=True, text=True,
                          check=True).stdout


def test_objects(stock, ftpad):
    """A traced object gets __mcount_loc; one that removes -pg gets none, as in
    the stock build."""
    for tree in (stock, ftpad):
        assert "__mcount_loc" in readelf_sections(tree / "fs" / "read_write.o")
        # arch/x86/kernel/Makefile: CFLAGS_REMOVE_ftrace.o = -pg
        assert "__mcount_loc" not in readelf_sections(tree / "arch/x86/kernel/ftrace.o")
        # kernel/trace/Makefile: ccflags-remove-y += $(CC_FLAGS_FTRACE)
        assert "__mcount_loc" not in readelf_sections(tree / "kernel/trace/ftrace.o")


def test_vmlinux_same_sites_as_stock(stock, ftpad):
    """The same functions carry a site, at the same offset; stock has
    `call __fentry__` there, ftpad the 5-byte NOP."""
    s, f = vmlinux.load(stock / "vmlinux"), vmlinux.load(ftpad / "vmlinux")
    ssites, fsites = s.sites(), f.sites()
    assert None not in ssites and None not in fsites
    assert sum(ssites.values()) > 5000
    assert fsites == ssites
    assert len(f.mcount_loc()) == len(s.mcount_loc())
    for name in ("vfs_read", "schedule", "do_sys_openat2"):
        sa, fa = s.syms[name], f.syms[name]
        # at the entry, or behind an endbr64
        so = 4 if s.read(sa, 4) == ENDBR64 else 0
        fo = 4 if f.read(fa, 4) == ENDBR64 else 0
        assert so == fo, name
        assert s.read(sa + so, 1) == b"\xe8", name
        assert f.read(fa + fo, 5) == NOP5, name
        assert sa + so in s.mcount_loc() and fa + fo in f.mcount_loc()


def test_every_object_same_code_but_the_nops(stock, ftpad):
    """Object by object, the records are as many, and the executable sections
    are the stock ones once each stock `call __fentry__` is replaced by the
    5-byte NOP -- or shorter.  Not byte for byte everywhere: with -pg GCC
    counts every function as a caller (of __fentry__), so at -Os it keeps a
    stack frame or alignment push in some small leaves that need none; ftpad,
    which calls nothing, leaves those out.  kernel/trace/ftrace.o differs
    because its code reads CC_USING_NOP_MCOUNT (ftrace_need_init_nop())."""
    differ, total, sites = [], 0, 0
    for path in sorted(ftpad.rglob("*.o")):
        rel = path.relative_to(ftpad)
        # Not compiled from kernel C: the host tools, the linked vmlinux.o
        # and the boot images that wrap it.
        if rel.parts[0] in ("tools", "scripts") or rel.parts[:3] == ("arch", "x86", "boot") \
                or path.name.startswith(("vmlinux", ".tmp_vmlinux", ".vmlinux")):
            continue
        total += 1
        a, na = vmlinux.object_text(stock / rel, nop=NOP5)
        b, nb = vmlinux.object_text(path)
        sites += nb
        assert na == nb, rel
        assert a.keys() == b.keys(), rel
        if a != b:
            differ.append(str(rel))
            assert all(len(b[k]) <= len(a[k]) for k in a), rel
    print(f"{total} objects, {sites} records, {len(differ)} not byte for byte: {differ}")
    assert total > 500 and sites > 5000
    assert "kernel/trace/ftrace.o" in differ
    assert len(differ) < total // 10, differ


def test_boot_selftests_and_function_tracer(ftpad, console):
    kernel.check_console(console)
    hits = re.search(r"E2E: vfs_read hits=(\d+) schedule hits=(\d+)", console)
    assert int(hits.group(1)) > 0 and int(hits.group(2)) > 0


def test_boot_entries_equal_stock(stock, ftpad, console):
    """"ftrace: allocating N entries": N is the non-zero entries of the table,
    the same as the stock kernel's."""
    n = kernel.entries(console)
    stock_n = sum(1 for a in vmlinux.load(stock / "vmlinux").mcount_loc() if a)
    assert n == stock_n, (n, stock_n)
