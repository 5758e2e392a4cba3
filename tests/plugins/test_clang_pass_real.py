# SPDX-License-Identifier: MIT
"""Real code bases built by clang with ftpad-clang.so: GNU binutils 2.40 (C,
the one the GCC plugin's tests build) at -O2 and -Os, and googletest with
googlemock (C++, templates, COMDAT, thunks) at -O2.  No crash, every ops
slot aligned, one record per emitted function, the tools work and can be
traced; and how close min-insns' estimate comes to the real instruction
counts (`-s` prints it; docs/clang-pass.md quotes it).  The binutils
source is unpacked once per version into /var/cache (test_binutils_build);
the builds depend on the plugin and are never cached."""
import collections
import json
import pathlib
import statistics

import capstone
import pytest

from ftpadtest import ENDBR64, Image, run
from test_binutils_build import CRT, build_binutils, check_readelf_traced
from test_binutils_build import source  # noqa: F401 (a fixture)
from test_clang_pass import CLANG_PLUGIN, check_site, clang_plugin  # noqa: F401


@pytest.fixture(scope="module", params=["-O2", "-Os"])
def clang_binutils(request, source, tmp_path_factory):  # noqa: F811
    if not CLANG_PLUGIN.exists():
        pytest.fail(f"{CLANG_PLUGIN} is missing: run `make` (needs libclang-14-dev)")
    out = tmp_path_factory.mktemp("clang-binutils" + request.param)
    report = out / "report.jsonl"
    cc = f"clang-14 -fplugin={CLANG_PLUGIN} -fplugin-arg-ftpad-clang-report={report}"
    text = build_binutils(source, out, cc, request.param, "the clang plugin")
    assert "PLEASE submit a bug report" not in text
    return out, report, request.param


@pytest.mark.parametrize("program", ["objdump", "readelf"])
def test_one_aligned_record_per_function(clang_binutils, program):
    out, report, _ = clang_binutils
    with Image(out / "binutils" / program) as image:
        sites = image.sites()
        entries = [s.entry for s in sites]
        assert len(entries) == len(set(entries)), "two records for one function"
        for site in sites:
            # NOPs of its own may follow the pad: an aligned loop at the start.
            check_site("x86_64", image, site, 0, 5, exact_after=False)
        functions = {(name, addr) for name, addr, _ in image.function_symbols()}
        unrecorded = {name for name, addr in functions if addr not in set(entries)}
        assert unrecorded == CRT
        assert set(entries) <= {addr for _, addr in functions}
    decisions = {json.loads(line)["decision"] for line in report.read_text().splitlines()}
    assert decisions == {"pad"}


@pytest.mark.parametrize("program,args,target", [
    ("objdump", ["-d"], "/bin/true"),
    ("readelf", ["-aW"], "/bin/ls"),
])
def test_built_tools_match_debians(clang_binutils, program, args, target):
    """Same binutils version as Debian's: the output must be identical."""
    out, _, _ = clang_binutils
    ours = run([out / "binutils" / program, *args, target]).stdout
    assert ours == run([program, *args, target]).stdout


def test_built_readelf_traced(clang_binutils, tmp_path, libftpad):
    check_readelf_traced(clang_binutils[0], tmp_path)


def real_instructions(binaries):
    """{name: machine instructions} of every padded function of BINARIES
    whose name is unique there: all its instructions but ENDBR and the
    site, as the GCC plugin counts them (before ENDBR and the pad)."""
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    counts = collections.defaultdict(set)
    seen = collections.Counter()
    for binary in binaries:
        with Image(binary) as image:
            padded = {s.entry for s in image.sites()}
            for name, addr, size in image.function_symbols():
                seen[name, binary] += 1
                if addr in padded and size:
                    code = image.read(addr, size)
                    n = sum(1 for _ in md.disasm(code, addr)) - 1  # the site
                    counts[name].add(n - code.startswith(ENDBR64))
    shared = {name for (name, _), c in seen.items() if c > 1}  # statics of several files
    return {name: next(iter(n)) for name, n in counts.items() if len(n) == 1 and name not in shared}


def estimate_accuracy(report, binaries):
    """How min-insns' estimate (the report's insns) compares with the real
    count, over loop-free functions (a loop always gets a pad)."""
    rows = collections.defaultdict(list)
    for r in map(json.loads, report.read_text().splitlines()):
        rows[r["function"]].append(r)
    real = real_instructions(binaries)
    pairs = [(r[0]["insns"], real[name]) for name, r in rows.items()
             if len(r) == 1 and not r[0]["loop"] and real.get(name)]
    n = len(pairs)
    return {
        "functions": n,
        "median_ratio": statistics.median(e / r for e, r in pairs),
        "within_30pct": sum(abs(e - r) <= 0.3 * r for e, r in pairs) / n,
        "within_2x": sum(r / 2 <= e <= 2 * r for e, r in pairs) / n,
        **{f"same_decision_{t}": sum((e < t) == (r < t) for e, r in pairs) / n
           for t in (5, 10, 20)},
    }


def test_min_insns_estimate(clang_binutils, record_property):
    """The numbers docs/clang-pass.md quotes.  Deterministic: the same
    compiler on the same source gives the same counts."""
    out, report, opt = clang_binutils
    acc = estimate_accuracy(report, [out / "binutils" / p for p in ("objdump", "readelf")])
    for key, value in acc.items():
        record_property(key, value)
    print(f"\nbinutils {opt}: " + ", ".join(
        f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in acc.items()))
    assert acc["functions"] > 1000
    assert 0.7 < acc["median_ratio"] < 1.3
    assert acc["same_decision_10"] > 0.85


# googletest and googlemock (Debian package googletest), about 20 000 lines
# of C++ with templates, COMDAT, constructors and thunks.
GTEST = pathlib.Path("/usr/src/googletest")
GTEST_CRT = {"_init", "_fini", "deregister_tm_clones", "register_tm_clones",
             "__do_global_dtors_aux", "frame_dummy"}


def test_googletest(tmp_path, clang_plugin):  # noqa: F811
    lib = tmp_path / "libgtest.so"
    run(["clang++-14", "-O2", "-fPIC", "-shared", "-fcf-protection", f"-fplugin={CLANG_PLUGIN}",
         f"-I{GTEST}/googletest/include", f"-I{GTEST}/googletest",
         f"-I{GTEST}/googlemock/include", f"-I{GTEST}/googlemock",
         GTEST / "googletest/src/gtest-all.cc", GTEST / "googlemock/src/gmock-all.cc",
         "-o", lib, "-lpthread"])
    with Image(lib) as image:
        sites = image.sites()
        entries = {s.entry for s in sites}
        assert len(entries) == len(sites), "two records for one function"
        for site in sites:
            check_site("x86_64", image, site, 0, 5, exact_after=False)
        emitted = {addr for name, addr, _ in image.function_symbols() if name not in GTEST_CRT}
        assert entries == emitted
        assert len(sites) > 500
