# SPDX-License-Identifier: MIT
"""A real program recorded: binutils' objdump, built with the GCC plugin and
exit=1, disassembles /bin/true under `ftpad record`; its output is the
system objdump's, and every function's entries and exits in the trace
equal those a -finstrument-functions build of the same objdump counts in
the same run (tests/src/objdump/cyg_count.c, preloaded).

Only objdump and the libraries it links are built (not ld, gas or the other
binutils), at -O1 -fno-inline, from one configured tree copied for the two
builds: what costs most is configure and bfd.  Two flags keep the two
builds making the same calls: -fno-inline, because -finstrument-functions
counts the calls of inlined copies too, where the plugin pads only the
function itself; -fno-ipa-pure-const, because a function GCC finds pure
(bfd.h's bfd_asymbol_value) has its repeated calls merged, unless it
calls __cyg_profile_func_enter, which makes it impure in one build only.
Functions the two builds still emit differently are handled by comparing
only those present as symbols in both."""
import shutil
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

from ftpadtest import FTPAD_BIN, PLUGIN, TEST_SRC, run
from test_binutils_build import CONFIGURE, unpack_source
from test_record import SUMMARY, Trace

SRC = TEST_SRC / "objdump"
# ctf and zstd are not needed to disassemble, and cost a configure each.
OBJDUMP_CONFIGURE = [*CONFIGURE, "--disable-libctf", "--with-system-zlib", "--without-zstd"]
OBJDUMP_LIBS = ["all-libiberty", "all-bfd", "all-opcodes", "all-libsframe"]
CFLAGS = "-O1 -fno-inline -fno-ipa-pure-const"
TARGET = "/bin/true"


def make_objdump(tree, cc, cflags, what):
    """objdump in TREE (a configured binutils tree), compiled with CC and
    CFLAGS; both go on make's command line, so one configure serves both
    builds."""
    log = tree / "build.log"
    with open(log, "a") as f:
        for cmd in (["make", "-j2", *OBJDUMP_LIBS], ["make", "-j2", "-C", "binutils", "objdump"]):
            p = subprocess.run([*cmd, f"CC={cc}", f"CFLAGS={cflags}"], cwd=tree, stdout=f,
                               stderr=subprocess.STDOUT)
            if p.returncode:
                pytest.fail(f"{' '.join(cmd)} failed for {what}:\n{log.read_text()[-4000:]}")
    return tree / "binutils" / "objdump"


def build_objdumps(out):
    """(the plugin's objdump, the -finstrument-functions objdump, the
    counter library), built in the empty folder OUT.  conftest.py's
    `objdumps` makes them once a run: test_attach_objdump.py attaches to the
    plugin's."""
    if not PLUGIN.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{PLUGIN} or {FTPAD_BIN} is missing: run `make` first")
    source = unpack_source()
    configured = out / "configured"
    configured.mkdir()
    with open(configured / "build.log", "w") as f:
        for cmd in ([source / "configure", *OBJDUMP_CONFIGURE, f"CFLAGS={CFLAGS}"],
                    ["make", "-j2", "configure-libiberty", "configure-bfd", "configure-opcodes",
                     "configure-libsframe", "configure-binutils"]):
            p = subprocess.run([str(c) for c in cmd], cwd=configured, stdout=f,
                               stderr=subprocess.STDOUT)
            if p.returncode:
                pytest.fail(f"{cmd[0]} failed:\n{(configured / 'build.log').read_text()[-4000:]}")
    # The copy keeps the timestamps, so make configures nothing again; the
    # Makefiles' absolute build paths (abs_builddir) are not used by these
    # targets.
    shutil.copytree(configured, out / "instrumented", symlinks=True)
    plugin = make_objdump(configured, f"gcc -fplugin={PLUGIN} -fplugin-arg-ftpad-exit=1",
                          CFLAGS, "the plugin")
    instrumented = make_objdump(out / "instrumented", "gcc",
                                f"{CFLAGS} -finstrument-functions", "-finstrument-functions")
    counter = out / "cyg_count.so"
    run(["gcc", "-O2", "-shared", "-fPIC", "-o", counter, SRC / "cyg_count.c"])
    return plugin, instrumented, counter


def symbol_keys(path):
    """{address: key} of every function symbol of PATH, and the first
    PT_LOAD's address.  A key is the name, with the source file's name for
    a static function: binutils has several static functions of one name."""
    keys = {}
    with open(path, "rb") as f:
        elf = ELFFile(f)
        load = min(s["p_vaddr"] for s in elf.iter_segments() if s["p_type"] == "PT_LOAD")
        source_file = ""
        for sym in elf.get_section_by_name(".symtab").iter_symbols():
            kind, bind = sym["st_info"]["type"], sym["st_info"]["bind"]
            if kind == "STT_FILE":
                source_file = sym.name
            elif kind == "STT_FUNC" and sym["st_shndx"] != "SHN_UNDEF":
                keys[sym["st_value"]] = (source_file if bind == "STB_LOCAL" else "", sym.name)
    return keys, load


def recorded_counts(trace, objdump):
    """{key: [entries, exits]} of every function of OBJDUMP with a site, and
    the events dropped.  The sites' addresses are the run's: the offset is
    main's."""
    [image] = trace.images.values()
    keys, _ = symbol_keys(objdump)
    by_name = {name: addr for addr, (_, name) in keys.items()}
    [main] = {entry for _, entry, _, name, _ in image.sites.values() if name == "main"}
    bias = main - by_name["main"]
    counts = {keys[entry - bias]: [0, 0] for _, entry, _, _, _ in image.sites.values()}
    for events in image.threads.values():
        for _, kind, site, _ in events:
            entry = image.sites[site][1]
            if kind == "entry":
                counts[keys[entry - bias]][0] += 1
            elif kind in ("exit", "tail-exit"):
                counts[keys[entry - bias]][1] += 1
    return counts, image.lost()


def instrumented_counts(path, objdump):
    """{key: [entries, exits]} of every function cyg_count.c saw."""
    keys, load = symbol_keys(objdump)
    lines = path.read_text().splitlines()
    assert "full" not in lines, "cyg_count.c's table is too small"
    counts = {}
    for line in lines:
        offset, entries, exits = line.split()
        counts[keys[int(offset, 16) + load]] = [int(entries), int(exits)]
    return counts


def test_objdump_counts_equal_instrument_functions(objdumps, tmp_path, record_property):
    plugin, instrumented, counter = objdumps
    expected = run(["objdump", "-d", TARGET]).stdout
    p = run([FTPAD_BIN, "record", "-o", tmp_path / "trace", "--", plugin, "-d", TARGET])
    assert p.stdout == expected
    m = SUMMARY.search(p.stderr)
    assert m and int(m.group(4)) == 0, p.stderr
    cyg = run([instrumented, "-d", TARGET],
              env={"LD_PRELOAD": str(counter), "CYG_COUNT_OUT": str(tmp_path / "cyg")})
    assert cyg.stdout == expected

    recorded, lost = recorded_counts(Trace(tmp_path / "trace"), plugin)
    assert lost == 0
    counted = instrumented_counts(tmp_path / "cyg", instrumented)
    # Functions both builds emitted: the plugin's have a site each; of the
    # other build's, those never called are not in its file, so its symbols
    # decide what exists.
    instrumented_keys = set(symbol_keys(instrumented)[0].values())
    both = sorted(set(recorded) & instrumented_keys)
    only_plugin = set(recorded) - instrumented_keys
    differ = {k: (recorded[k], counted.get(k, [0, 0])) for k in both
              if recorded[k] != counted.get(k, [0, 0])}
    called = [k for k in both if recorded[k][0]]
    calls = sum(recorded[k][0] for k in both)
    print(f"\nobjdump -d {TARGET}: {len(both)} functions in both builds, {len(called)} called,"
          f" {calls} calls; {len(only_plugin)} only in the plugin's build, "
          f"{len(instrumented_keys - set(recorded))} symbols only in the other")
    record_property("functions_compared", len(both))
    record_property("functions_called", len(called))
    assert differ == {}, differ
    # Each count the instrumented build saw is a function the plugin padded.
    assert set(counted) <= set(recorded)
    # Most of objdump is compared, and the run is not a trivial one.
    assert len(only_plugin) < len(both) // 100 and len(called) > 200 and calls > 100_000
