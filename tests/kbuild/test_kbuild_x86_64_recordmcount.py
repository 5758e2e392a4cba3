# SPDX-License-Identifier: MIT
"""x86_64 with recordmcount forced: Debian's linux-source-6.12 (the same
tinyconfig + function tracer as tests/kbuild/test_kbuild_x86_64.py) built with
`make CONFIG_FTRACE_MCOUNT_USE_CC= CONFIG_FTRACE_MCOUNT_USE_RECORDMCOUNT=y`,
so gcc compiles with -pg -mfentry but no -mrecord-mcount, and Kbuild runs
scripts/recordmcount on every traced object, as on an architecture without
-mrecord-mcount (docs/kbuild.md).  scripts/recordmcount is
tests/kbuild/recordmcount-keep.sh: it keeps each object as gcc wrote it and
runs Linux's own recordmcount, so the build folder holds the reference's
output (cached, tests/kbuild/kernel.py).

It has to be a build of its own: without -mrecord-mcount the assembler
drops the symbols of sections nothing else refers to, and that is where
Linux's recordmcount fails.  It cannot build this kernel: it stops at
kernel/exit.o, where the weak abort() is alone in .text.unlikely ("Cannot
find symbol for section"; the wrapper logs it, leaves the object as gcc
wrote it, and the build goes on).  recordmcount-ng adds the section symbol,
as objtool does.

Every run, uncached: recordmcount-ng processes a copy of every kept object.
Where Linux's succeeded, the result must carry the same __mcount_loc entries
and the same sections, byte for byte; where it failed, the entries its rule
predicts.  Either way each object's entries must be the ones gcc's
-mrecord-mcount wrote into the same object of the stock build, and the
linked table is the stock one but for the objects Linux failed on."""
import collections
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

import ftpadtest  # noqa: E402
import kernel  # noqa: E402
import rmcompare  # noqa: E402
import vmlinux  # noqa: E402
from conftest import require_kernel_tools  # noqa: E402


@pytest.fixture(scope="module")
def forced():
    require_kernel_tools()
    return kernel.rmc_build("x86_64")


@pytest.fixture(scope="module")
def stock():
    return kernel.stock_build("x86_64")


@pytest.fixture(scope="module")
def compared(forced, tmp_path_factory):
    if not ftpadtest.RECORDMCOUNT.exists():
        pytest.fail(f"{ftpadtest.RECORDMCOUNT} is missing: run `make` first")
    dest = tmp_path_factory.mktemp("x86_64-ng")
    return dest, rmcompare.compare_build(ftpadtest.RECORDMCOUNT, forced, dest)


def test_kbuild_ran_recordmcount(forced):
    """-pg -mfentry without -mrecord-mcount on the compile line; Kbuild's
    recordmcount (the wrapper) saw every object that has __mcount_loc, and
    what it kept has calls to __fentry__ and no table yet."""
    cmd = (forced / "fs" / ".read_write.o.cmd").read_text().splitlines()[0]
    assert " -pg -mfentry " in cmd and "-mrecord-mcount" not in cmd, cmd
    assert (forced / "scripts" / "recordmcount.ref").exists()
    kept = set(rmcompare.kept_objects(forced))
    recorded = rmcompare.objects_with_mcount_loc(forced)
    assert len(recorded) > 400, len(recorded)
    assert set(recorded) <= kept, sorted(set(recorded) - kept)[:10]
    for rel in sorted(kept)[::25]:
        sections = subprocess.run(["readelf", "-SW", forced / rmcompare.KEEP / rel],
                                  capture_output=True, text=True, check=True).stdout
        assert "__mcount_loc" not in sections, rel


def test_linux_recordmcount_fails_where_ng_does_not(compared, record_property):
    _, r = compared
    failed = r["linux_failed"]
    print(f"Linux's recordmcount failed on {len(failed)} objects: {failed}")
    record_property("x86_64 objects Linux's recordmcount fails on", sorted(failed))
    assert "kernel/exit.o" in failed, failed
    for rel, why in failed.items():
        assert "Cannot find symbol for section" in why, (rel, why)
    assert not r["failures"], r["failures"][:3]


def test_same_records_as_linux_on_every_object(compared, record_property):
    _, r = compared
    print(f"x86_64: {r['objects']} objects, {r['entries']} __mcount_loc entries from Linux")
    record_property("x86_64 objects, Linux's entries", (r["objects"], r["entries"]))
    assert not r["failures"], "recordmcount-ng failed:\n" + "\n".join(
        err[:1500] for _, err in r["failures"][:3])
    assert not r["differences"], r["differences"][:20]
    assert not r["extra"], r["extra"]
    assert r["objects"] > 400 and r["entries"] > 5000, r


def entries(path):
    with open(path, "rb") as f:
        return sorted(rmcompare.mcount_entries(ELFFile(f)))


def test_same_records_as_gcc_on_every_object(compared, stock):
    """Object by object, recordmcount-ng's entries are the ones gcc's
    -mrecord-mcount wrote into the stock build's object (the code is the
    same: -mrecord-mcount only adds the table)."""
    dest, r = compared
    rels = [p.relative_to(dest) for p in dest.rglob("*.o")]
    assert len(rels) == r["objects"]
    differ = [str(rel) for rel in rels if entries(dest / rel) != entries(stock / rel)]
    assert not differ, differ[:20]
    assert entries(dest / "kernel" / "exit.o")


def lost_sites(stock, failed):
    """The sites of the objects Linux's recordmcount failed on, as gcc
    recorded them in the stock build: ((function, offset) counters of the
    strong functions, and of the weak ones, which another object may
    override in vmlinux)."""
    strong, weak = collections.Counter(), collections.Counter()
    for rel in failed:
        with open(stock / rel, "rb") as fobj:
            elf = ELFFile(fobj)
            binding = {s.name: s["st_info"]["bind"] for s in elf.get_section_by_name(".symtab")
                       .iter_symbols() if s["st_info"]["type"] == "STT_FUNC"}
            for sec, off in rmcompare.mcount_entries(elf):
                site = rmcompare.function_at(elf, sec, off)
                (weak if binding.get(site[0]) == "STB_WEAK" else strong)[site] += 1
    return strong, weak


def test_table_is_the_stock_table_but_where_linux_failed(forced, stock, compared):
    """Linked, Linux's recordmcount's table lists the sites -mrecord-mcount
    lists in the stock build, the same functions at the same offsets, except
    those of the objects it failed on (a weak one among those may be
    overridden, and so have no site in either kernel)."""
    _, r = compared
    f, s = vmlinux.load(forced / "vmlinux"), vmlinux.load(stock / "vmlinux")
    fsites = collections.Counter(f.function_at(a) for a in f.mcount_loc() if a)
    ssites = collections.Counter(s.function_at(a) for a in s.mcount_loc() if a)
    assert (None, None) not in fsites and sum(fsites.values()) > 5000
    strong, weak = lost_sites(stock, r["linux_failed"])
    assert sum(strong.values()) > 0
    assert not fsites - ssites, fsites - ssites
    missing = ssites - fsites
    assert not strong - missing, strong - missing
    assert not missing - (strong + weak), missing - (strong + weak)
