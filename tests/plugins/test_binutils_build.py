# SPDX-License-Identifier: MIT
"""A real code base: GNU binutils 2.40 from Debian's binutils-source, built
with the plugin at -O2 and at -Os.  No internal compiler error, every ops
slot aligned, one record per emitted function, and the objdump and readelf
it builds give the same output as Debian's on real binaries, also while
being traced.  The source is unpacked once per version into /var/cache;
the build depends on the plugin and is never cached."""
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import locked
from ftpadtest import FTPAD_BIN, PLUGIN, Image, run
from test_gcc_plugin_x86_64 import check_site

VERSION = "2.40"
TARBALL = pathlib.Path(f"/usr/src/binutils/binutils-{VERSION}.tar.xz")
CACHE = pathlib.Path(os.environ.get("FTPAD_CACHE", "/var/cache/ftpad")) / f"binutils-{VERSION}"
# The C runtime's own functions, linked in from crt*.o, which the plugin
# never compiled.
CRT = {"_start", "_init", "_fini", "deregister_tm_clones", "register_tm_clones",
       "__do_global_dtors_aux", "frame_dummy"}
CONFIGURE = ["--disable-gdb", "--disable-gdbserver", "--disable-sim", "--disable-gprofng",
             "--disable-nls", "--disable-werror", "--without-debuginfod", "--disable-plugins"]


def unpack_source():
    """The unpacked source tree, unpacked once per version."""
    src = CACHE / f"binutils-{VERSION}"
    done = CACHE / ".complete"
    if done.exists():
        return src
    if not TARBALL.exists():
        pytest.fail(f"{TARBALL} is missing: scripts/install-deps.sh installs binutils-source")
    CACHE.mkdir(parents=True, exist_ok=True)
    # Several test files unpack it, maybe at once (make check's two workers).
    with locked(CACHE / ".lock"):
        if not done.exists():
            shutil.rmtree(src, ignore_errors=True)
            subprocess.run(["tar", "xf", TARBALL, "-C", CACHE], check=True)
            done.touch()
    return src


@pytest.fixture(scope="module")
def source():
    return unpack_source()


def build_binutils(source, out, cc, cflags, plugin):
    """Configure and make binutils from source in out with CC=cc and
    CFLAGS=cflags; the build log's text.  A failure shows the log's end,
    naming plugin."""
    log = out / "build.log"
    with open(log, "w") as f:
        for cmd in ([source / "configure", *CONFIGURE, f"CC={cc}", f"CFLAGS={cflags}"],
                    ["make", f"-j{os.cpu_count()}", "all-binutils"]):
            p = subprocess.run([str(c) for c in cmd], cwd=out, stdout=f, stderr=subprocess.STDOUT)
            if p.returncode:
                tail = log.read_text()[-4000:]
                pytest.fail(f"{cmd[0]} failed with {plugin} at {cflags}:\n{tail}")
    return log.read_text()


@pytest.fixture(scope="module", params=["-O2", "-Os"])
def build(request, source, tmp_path_factory):
    out = tmp_path_factory.mktemp("binutils" + request.param)
    report = out / "report.jsonl"
    cc = f"gcc -fplugin={PLUGIN} -fplugin-arg-ftpad-report={report}"
    text = build_binutils(source, out, cc, request.param, "the plugin")
    assert "internal compiler error" not in text
    return out, report


@pytest.mark.parametrize("program", ["objdump", "readelf"])
def test_one_aligned_record_per_function(build, program):
    out, _ = build
    with Image(out / "binutils" / program) as image:
        sites = image.sites()
        entries = [s.entry for s in sites]
        assert len(entries) == len(set(entries)), "two records for one function"
        for site in sites:
            # bfd_flush, for one, starts with a loop that GCC aligns with NOPs.
            check_site(image, site, 0, 5, exact_after=False)
        functions = {(name, addr) for name, addr, _ in image.function_symbols()
                     if not name.endswith(".cold")}
        unrecorded = {name for name, addr in functions if addr not in set(entries)}
        assert unrecorded == CRT
        assert set(entries) <= {addr for _, addr in functions}


@pytest.mark.parametrize("program,args,target", [
    ("objdump", ["-d"], "/bin/true"),
    ("readelf", ["-aW"], "/bin/ls"),
])
def test_built_tools_match_debians(build, program, args, target):
    """Same binutils version as Debian's: the output must be identical."""
    out, _ = build
    ours = run([out / "binutils" / program, *args, target]).stdout
    assert ours == run([program, *args, target]).stdout


def check_readelf_traced(out, tmp_path):
    """`ftpad record` of the readelf built in OUT prints what the system's
    readelf prints, and its trace has the calls it counts."""
    trace = tmp_path / "trace.txt"
    readelf = out / "binutils" / "readelf"
    p = run([FTPAD_BIN, "record", "--text", "--filter", "process_*", "-o", trace, "--",
             readelf, "-hS", "/bin/ls"])
    assert p.stdout == run(["readelf", "-hS", "/bin/ls"]).stdout
    lines = trace.read_text().splitlines()
    # GCC splits some (process_file_header.part.0): names are as emitted.
    assert any(re.fullmatch(r"readelf-\d+ process_section_headers <-process_object\S*", l)
               for l in lines), lines
    m = re.fullmatch(r"ftpad: (\d+) sites found, (\d+) sites enabled, (\d+) calls seen",
                     lines[-1])
    assert m and int(m.group(2)) > 0 and int(m.group(3)) == len(lines) - 1


def test_built_readelf_traced(build, tmp_path, libftpad):
    check_readelf_traced(build[0], tmp_path)


def test_min_insns_10(build, record_property):
    """How many sites min-insns=10 removes, from the report's counts (the
    same rule the plugin applies; test_gcc_plugin_policy.py checks that the
    prediction matches a real build with the threshold)."""
    _, report = build
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    # configure's test programs went through the plugin too: not binutils
    rows = [r for r in rows if not r["source"].endswith(("conftest.c", "conftest.cpp"))]
    padded = [r for r in rows if r["decision"] == "pad"]
    removed = [r for r in padded if r["reason"] == "default" and r["insns"] < 10
               and not r["loop"]]
    record_property("padded", len(padded))
    record_property("removed_by_min_insns_10", len(removed))
    print(f"\nbinutils: {len(padded)} padded functions, min-insns=10 removes {len(removed)}"
          f" ({100 * len(removed) / len(padded):.1f}%), configure's test programs not counted")
    assert 0 < len(removed) < len(padded)
