# SPDX-License-Identifier: MIT
"""The kbuild/ patch series, applied to a copy of the cached linux-6.12 tree
(tests/kbuild/kernel.py): arm64 at tinyconfig's -Os, where stock Linux turns
CALL_OPS off with GCC (GCC drops the function alignment there) and
kbuild/0003 turns it on with CONFIG_FTPAD.  The build also has kbuild/0006's
very early tracer (CONFIG_FTPAD_EARLY_TRACE, tested in test_kbuild_early.py),
which changes nothing here.  Built, booted under qemu-system-aarch64,
self-tests checked.  Cached like the other kernel
tests; the boot and the checks always run."""
import re
import subprocess

import pytest

import ftpadtest  # noqa: E402
import kernel  # noqa: E402
import vmlinux  # noqa: E402
from conftest import require_kernel_tools, require_tool  # noqa: E402

NOP = bytes.fromhex("1f2003d5")
ARCH = "arm64-Os"


@pytest.fixture(scope="module")
def patched_config():
    require_kernel_tools("patch", "aarch64-linux-gnu-gcc")
    if not ftpadtest.A64_PLUGIN.exists():
        pytest.fail(f"{ftpadtest.A64_PLUGIN} is missing: run `make` first")
    return kernel.build(ARCH, "patched", ftpadtest.A64_PLUGIN, patched=True,
                        config_only=True, early=True)


@pytest.fixture(scope="module")
def patched():
    require_kernel_tools("patch", "aarch64-linux-gnu-gcc")
    if not ftpadtest.A64_PLUGIN.exists():
        pytest.fail(f"{ftpadtest.A64_PLUGIN} is missing: run `make` first")
    return kernel.build(ARCH, "patched", ftpadtest.A64_PLUGIN, patched=True, early=True)


@pytest.fixture(scope="module")
def console(patched, tmp_path_factory):
    require_tool("qemu-system-aarch64")
    text, secs = kernel.boot(ARCH, patched, tmp_path_factory.mktemp("boot-arm64-Os"))
    print(f"boot: {secs:.0f} s")
    return text


def test_stock_turns_call_ops_off_at_Os(tmp_path):
    """Without the series, the same fragment cannot have CALL_OPS."""
    a = kernel.ARCHES[ARCH]
    p = subprocess.run([kernel.HERE / "config-kernel.sh", kernel.source_tree(),
                        tmp_path / "o", a["fragment"], *a["make"]],
                       capture_output=True, text=True)
    assert p.returncode != 0
    assert "CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS=y did not stick" in p.stderr, p.stderr


def test_patched_config(patched_config):
    """With the series and CONFIG_FTPAD, -Os keeps CALL_OPS (and the 8-byte
    function alignment it selects)."""
    patched = patched_config
    config = (patched / ".config").read_text()
    for want in ("CONFIG_FTPAD=y", "CONFIG_CC_OPTIMIZE_FOR_SIZE=y",
                 "CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS=y", "CONFIG_FUNCTION_ALIGNMENT=8",
                 kernel.EARLY_OPTION,
                 f'CONFIG_FTPAD_PLUGIN="{patched}/ftpad.so"'):
        assert want in config.splitlines(), want


def test_compile_line(patched):
    cmd = (patched / "fs" / ".read_write.o.cmd").read_text().splitlines()[0]
    assert " -Os " in cmd, cmd
    assert f"-fplugin={patched}/ftpad.so -fplugin-arg-ftpad-abi=kernel" in cmd, cmd
    assert "-fpatchable-function-entry" not in cmd and "-fplugin-arg-ftpad-ops=0" not in cmd


def test_every_ops_literal_aligned(patched):
    """Each record points at two NOPs (the ops literal), 8-aligned, right
    before the function, whose entry is two NOPs: the CALL_OPS layout."""
    v = vmlinux.load(patched / "vmlinux")
    locs = [a for a in v.mcount_loc() if a]
    assert len(locs) > 5000
    misaligned = [hex(a) for a in locs if a % 8]
    assert not misaligned, misaligned[:10]
    sites = v.sites(adjust=8)
    assert None not in sites
    for a in locs[::97]:
        name, off = v.function_at(a + 8)
        assert off == 0, (hex(a), name, off)
        assert v.read(a, 16) == NOP * 4, (hex(a), name)


def test_boot_selftests_and_function_tracer(patched, console):
    kernel.check_console(console)
    assert "Misaligned patch-site" not in console
    hits = re.search(r"E2E: vfs_read hits=(\d+) schedule hits=(\d+)", console)
    assert int(hits.group(1)) > 0 and int(hits.group(2)) > 0
    n = kernel.entries(console)
    assert n == sum(1 for a in vmlinux.load(patched / "vmlinux").mcount_loc() if a)
