# SPDX-License-Identifier: MIT
"""mips, at the object level: Debian's linux-source-6.12 cross-built for the
malta board (tinyconfig + function tracer, tests/kbuild/mips.config).  mips
has no -mrecord-mcount, so Kbuild runs scripts/recordmcount on every traced
object; in this build that is tests/kbuild/recordmcount-keep.sh, which keeps
each object as gcc wrote it and then runs Linux's own recordmcount, so the
build is the stock one (cached, tests/kbuild/kernel.py).

Every run then, uncached: recordmcount-ng processes a copy of every kept
object, and each result must carry the same sections, byte for byte, as
Linux's recordmcount made of the same object, and the same __mcount_loc
entries but for one deliberate difference (tests/kbuild/rmcompare.py,
docs/recordmcount-ng.md): Linux drops a call site that sits 4 bytes after the
last _mcount relocation of the previous section; recordmcount-ng keeps it.
A copy of the build folder with recordmcount-ng's objects in place is linked
again (nothing is recompiled): its text is the stock kernel's, byte for byte,
and its __mcount_loc table the stock one plus exactly those sites.  That
kernel boots under qemu-system-mips -M malta with every ftrace self-test
PASSED, the function tracer recording calls, and "ftrace: allocating N
entries" counting those sites too."""
import collections
import pathlib
import re
import subprocess

import pytest

import ftpadtest  # noqa: E402
import kernel  # noqa: E402
import rmcompare  # noqa: E402
import vmlinux  # noqa: E402
from conftest import require_kernel_tools, require_tool  # noqa: E402


@pytest.fixture(scope="module")
def stock():
    require_kernel_tools("mips-linux-gnu-gcc")
    return kernel.stock_build("mips")


@pytest.fixture(scope="module")
def ng_build(stock, tmp_path_factory):
    """A copy of the build folder whose traced objects are recordmcount-ng's
    output (from the kept objects), and how they compare with Linux's."""
    if not ftpadtest.RECORDMCOUNT.exists():
        pytest.fail(f"{ftpadtest.RECORDMCOUNT} is missing: run `make` first")
    dest = tmp_path_factory.mktemp("mips-ng") / "build"
    subprocess.run(["cp", "-a", stock, dest], check=True)
    result = rmcompare.compare_build(ftpadtest.RECORDMCOUNT, stock, dest)
    return dest, result


def test_config_uses_recordmcount(stock):
    config = (stock / ".config").read_text().splitlines()
    for want in ("CONFIG_MIPS_MALTA=y", "CONFIG_CPU_BIG_ENDIAN=y", "CONFIG_32BIT=y",
                 "CONFIG_FTRACE_MCOUNT_USE_RECORDMCOUNT=y", "CONFIG_DYNAMIC_FTRACE=y"):
        assert want in config, want
    cmd = (stock / "fs" / ".read_write.o.cmd").read_text().splitlines()[0]
    assert " -pg " in cmd and "-mrecord-mcount" not in cmd, cmd


def test_every_traced_object_went_through_recordmcount(stock):
    """The wrapper saw every object that has __mcount_loc, and what it kept is
    what gcc wrote: calls to _mcount, no table yet."""
    kept = set(rmcompare.kept_objects(stock))
    recorded = rmcompare.objects_with_mcount_loc(stock)
    assert len(recorded) > 300, len(recorded)
    assert not set(recorded) - kept, sorted(set(recorded) - kept)[:10]
    for rel in list(kept)[::25]:
        sections = subprocess.run(["mips-linux-gnu-readelf", "-SW", stock / "ftpad-premcount" / rel],
                                  capture_output=True, text=True, check=True).stdout
        assert "__mcount_loc" not in sections, rel


def test_same_records_as_linux_on_every_object(ng_build, record_property):
    _, r = ng_build
    extra = sorted(site for sites in r["extra"].values() for site in sites)
    print(f"mips: {r['objects']} objects, {r['entries']} __mcount_loc entries from Linux; "
          f"only recordmcount-ng records {extra}")
    record_property("mips objects, Linux's entries", (r["objects"], r["entries"]))
    record_property("mips sites only recordmcount-ng records", extra)
    assert not r["failures"], "recordmcount-ng failed:\n" + "\n".join(
        err[:1500] for _, err in r["failures"][:3])
    assert not r["differences"], r["differences"][:20]
    assert r["objects"] > 300 and r["entries"] > 5000, r


@pytest.fixture(scope="module")
def ng_kernel(ng_build):
    dest, r = ng_build
    if r["failures"] or r["differences"]:
        pytest.fail("recordmcount-ng's objects differ from Linux's; not linking them")
    log = kernel.relink("mips", dest)
    compiled = [ln for ln in log.splitlines() if re.match(r"\s+CC\s+\S+\.o$", ln)
                and "version" not in ln]
    assert not compiled, compiled[:10]
    return dest


def linked_objects(out):
    """The objects vmlinux.a holds (all linked in; lib.a's only if needed)."""
    listing = subprocess.run(["ar", "t", out / "vmlinux.a"], capture_output=True, text=True,
                             check=True).stdout
    return {pathlib.PurePath(ln).as_posix() for ln in listing.split()}


def sites(v):
    return collections.Counter(v.function_at(a) for a in v.mcount_loc() if a)


def test_ng_kernel_is_stock_plus_the_sites_linux_drops(stock, ng_build, ng_kernel):
    _, r = ng_build
    s, n = vmlinux.load(stock / "vmlinux"), vmlinux.load(ng_kernel / "vmlinux")
    stext, ntext = s.elf.get_section_by_name(".text"), n.elf.get_section_by_name(".text")
    assert stext["sh_addr"] == ntext["sh_addr"] and stext.data() == ntext.data()
    # (None, None): a weak function another object overrides keeps its code
    # and its entry, but no symbol (mips does not sort or clean the table at
    # build time); the same in both kernels.
    ssites, nsites = sites(s), sites(n)
    assert sum(ssites.values()) > 5000
    assert not ssites - nsites, ssites - nsites
    added = nsites - ssites
    linked = linked_objects(ng_kernel)
    must = collections.Counter(site[2] for rel, sites_ in r["extra"].items() if rel in linked
                               for site in sites_)
    may = {site[2] for sites_ in r["extra"].values() for site in sites_}
    assert not must - added, must - added
    assert set(added) <= may, set(added) - may


def test_ng_kernel_boots_with_selftests_passed(ng_kernel, tmp_path):
    require_tool("qemu-system-mips")
    text, secs = kernel.boot("mips", ng_kernel, tmp_path / "boot")
    print(f"boot: {secs:.0f} s")
    kernel.check_console(text)
    hits = re.search(r"E2E: vfs_read hits=(\d+) schedule hits=(\d+)", text)
    assert int(hits.group(1)) > 0 and int(hits.group(2)) > 0
    # The stock table plus the sites only recordmcount-ng records (checked
    # above); mips sorts at boot and has no zero entries.
    assert kernel.entries(text) == sum(sites(vmlinux.load(ng_kernel / "vmlinux")).values())
