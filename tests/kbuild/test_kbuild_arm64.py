# SPDX-License-Identifier: MIT
"""arm64: Debian's linux-source-6.12 (tinyconfig + function tracer at -O2,
tests/kbuild/arm64.config) cross-built with ftpad's kernel ABI in place of
`-fpatchable-function-entry=4,2` (DYNAMIC_FTRACE_WITH_CALL_OPS), with no
kernel patch (docs/kbuild.md), and booted under qemu-system-aarch64
(-M virt -cpu max, TCG).  Cached like the x86_64 test; the boot and the
checks always run."""
import re
import subprocess

import pytest

import ftpadtest  # noqa: E402
import kernel  # noqa: E402
import vmlinux  # noqa: E402
from conftest import require_kernel_tools, require_tool  # noqa: E402

NOP = bytes.fromhex("1f2003d5")


@pytest.fixture(scope="module")
def stock():
    require_kernel_tools("aarch64-linux-gnu-gcc")
    return kernel.stock_build("arm64")


@pytest.fixture(scope="module")
def ftpad():
    if not ftpadtest.A64_PLUGIN.exists():
        pytest.fail(f"{ftpadtest.A64_PLUGIN} is missing: run `make` first")
    return kernel.build("arm64", "ftpad", ftpadtest.A64_PLUGIN)


@pytest.fixture(scope="module")
def console(ftpad, tmp_path_factory):
    require_tool("qemu-system-aarch64")
    text, secs = kernel.boot("arm64", ftpad, tmp_path_factory.mktemp("boot-arm64"))
    print(f"boot: {secs:.0f} s")
    return text


def test_config_has_call_ops(ftpad):
    config = (ftpad / ".config").read_text()
    assert "CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS=y" in config
    assert "CONFIG_FUNCTION_ALIGNMENT=8" in config


def test_compile_line(ftpad):
    cmd = (ftpad / "fs" / ".read_write.o.cmd").read_text().splitlines()[0]
    assert f"-fplugin={ftpad}/ftpad.so -fplugin-arg-ftpad-abi=kernel" in cmd, cmd
    assert "-fpatchable-function-entry" not in cmd, cmd
    assert "-DCC_USING_PATCHABLE_FUNCTION_ENTRY" in cmd, cmd
    sections = subprocess.run(["readelf", "-SW", ftpad / "fs" / "read_write.o"],
                              capture_output=True, text=True, check=True).stdout
    assert "__patchable_function_entries" in sections


def test_vmlinux_same_sites_as_stock(stock, ftpad):
    """The same functions carry a site; each entry points at an 8-aligned ops
    literal (two NOPs) right before the function, which starts with two NOPs."""
    s, f = vmlinux.load(stock / "vmlinux"), vmlinux.load(ftpad / "vmlinux")
    ssites, fsites = s.sites(adjust=8), f.sites(adjust=8)
    assert None not in ssites and None not in fsites
    assert sum(ssites.values()) > 5000
    assert fsites == ssites
    for a in f.mcount_loc():
        if a:
            assert a % 8 == 0, hex(a)
    for name in ("vfs_read", "schedule", "do_sys_openat2"):
        fa = f.syms[name]
        assert fa - 8 in f.mcount_loc(), name
        assert f.read(fa - 8, 16) == NOP * 4, name
    assert f.elf.get_section_by_name(".text")["sh_size"] == \
        s.elf.get_section_by_name(".text")["sh_size"]


def test_boot_selftests_and_function_tracer(ftpad, console):
    kernel.check_console(console)
    hits = re.search(r"E2E: vfs_read hits=(\d+) schedule hits=(\d+)", console)
    assert int(hits.group(1)) > 0 and int(hits.group(2)) > 0


def test_boot_entries_equal_stock(stock, ftpad, console):
    n = kernel.entries(console)
    stock_n = sum(1 for a in vmlinux.load(stock / "vmlinux").mcount_loc() if a)
    assert n == stock_n, (n, stock_n)
