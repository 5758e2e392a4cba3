# SPDX-License-Identifier: MIT
"""Exact call trees, end to end: programs of tests/src/trees built with the
GCC plugin and with the clang plugin, both with exit sites (exit=1),
recorded with `ftpad record` and shown by `ftpad replay`.  Each thread's
tree, durations stripped, is compared line by line with the tree the
program makes: functions, nesting, kinds (tail calls as siblings, signal
marks) and the unwound and entry-only marks of docs/format.md "How a
reader builds the call tree".  One aarch64 program under qemu-aarch64."""
import os
import re
import struct

import pytest

from conftest import require_default_compiler
from ftpadtest import A64_PLUGIN, BUILD, DEFAULT_COMPILERS, FTPAD_BIN, TEST_SRC, run

SRC = TEST_SRC / "trees"
A64_LIB = BUILD / "runtime" / "aarch64" / "libftpad.a"
THREAD = re.compile(r"^# thread (\d+) \((.*)\) of (\S+) (.*)$")
FROM = re.compile(r"(exec|forked) from \d+\.\d+")
LINE = re.compile(r"^[ 0-9.a-z]* \[ *(\d+)\] \| (.*)$")


@pytest.fixture(scope="module", params=DEFAULT_COMPILERS, ids=lambda c: c.name)
def built(request, tmp_path_factory):
    """trees (trees.c with plain.c built without exits), lib.so and except,
    compiled once per compiler."""
    c = request.param
    require_default_compiler(c)
    if not FTPAD_BIN.exists():
        pytest.fail(f"{FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp(f"trees-{c.name}")
    cc = [*c.driver(), "-O2", "-g0"]
    run([*cc, *c.flags(exit=0), "-c", "-o", out / "plain.o", SRC / "plain.c"])
    run([*cc, *c.flags(exit=1), "-o", out / "trees", SRC / "trees.c", out / "plain.o",
         "-lpthread", "-ldl"])
    run([*cc, *c.flags(exit=1), "-shared", "-fPIC", "-o", out / "lib.so", SRC / "lib.c"])
    run([*c.driver(cxx=True), "-O2", "-g0", *c.flags(exit=1), "-o", out / "except",
         SRC / "except.cc"])
    return out


def record(prog, tmp_path, *args, opts=(), env=None):
    """Records PROG ARGS; returns the process and the trace directory."""
    trace = tmp_path / "trace"
    p = run([FTPAD_BIN, "record", "--force", *opts, "-o", trace, "--", prog, *args],
            check=False, cwd=tmp_path, env={**os.environ, **(env or {})})
    assert p.returncode == 0, p.stderr
    return p, trace


def trees(trace):
    """`ftpad replay TRACE` without durations: a list of threads in replay's
    order, each (image's exe name, [lines]), the last line its counts; the
    thread ids are left out, since they change from run to run."""
    p = run([FTPAD_BIN, "replay", trace])
    threads = []
    for line in p.stdout.splitlines():
        m = THREAD.match(line)
        if m:
            threads.append((FROM.sub(r"\1 from", os.path.basename(m[4])), []))
            continue
        m = LINE.match(line)
        if m:
            threads[-1][1].append(m[2])
        elif line.startswith("# ") and threads and not line.startswith("# DURATION"):
            threads[-1][1].append(line)
    return threads


def tree_of(built, tmp_path, *args, prog="trees", **kw):
    return trees(record(built / prog, tmp_path, *args, **kw)[1])


CTOR = ["trees_ctor();"]
REC = ["main() {", "  rec() {", "    rec() {", "      rec() {", "        leaf();",
       "      } /* rec */", "    } /* rec */", "  } /* rec */", "} /* main */"]
MID = ["mid() {", "  leaf();", "} /* mid */"]


def indent(lines, n=1):
    return ["  " * n + line for line in lines]


# mode: the expected [(image, tree lines)] of each thread, in replay's order.
TREES = {
    "rec": [("trees", [*CTOR, *REC, "# 12 events"])],
    # Each thread's own tree; main creates and joins them, untraced libc.
    "threads": [("trees", [*CTOR, "main();", "# 4 events"]),
                *[("trees", ["worker() {", *indent(MID), "} /* worker */", "# 6 events"])] * 2],
    # The child's image starts inside main (entered before the fork, in the
    # parent's image); exit() inside child_side leaves it open: unwound.
    "fork": [("trees", [*CTOR, "main() {", "  leaf();", "} /* main */", "# 6 events"]),
             ("trees, forked from", ["child_side() {", *indent(MID), "} /* child_side, unwound */",
                                     "# 5 events, 1 frame unwound"])],
    # exec inside main: main is left for good; the new program continues.
    "exec": [("trees", [*CTOR, "main() {", *indent(MID), "} /* main, unwound */",
                        "# 7 events, 1 frame unwound"]),
             ("trees, exec from", [*CTOR, *REC, "# 12 events"])],
    "signal": [("trees", [*CTOR, "main() {", "  raiser() {", "    [signal SIGUSR1] {",
                          "      on_usr1() {", "        leaf();", "      } /* on_usr1 */",
                          "    } /* [signal SIGUSR1] */", "    leaf();", "  } /* raiser */",
                          "} /* main */", "# 14 events"])],
    "longjmp": [("trees", [*CTOR, "main() {", "  jl_a() {", "    jl_b() {", "      jl_c() {",
                           "        leaf();", "        jl_d(); /* unwound */",
                           "      } /* jl_c, unwound */", "    } /* jl_b, unwound */",
                           "  } /* jl_a, unwound */", "  leaf();", "} /* main */",
                           "# 12 events, 4 frames unwound"])],
    # A tail call's target is its caller's sibling, direct or through a pointer.
    "tail": [("trees", [*CTOR, "main() {", "  tail_direct();", "  tail_target();",
                        "  tail_indirect();", "  tail_target();", "} /* main */",
                        "# 12 events"])],
    # No event says the thread switched contexts, so the tree follows the
    # stack pointers: co_fn's stack lies in run_context's frame, above
    # whatever run_context calls next, so co_fn stays open while the main
    # context runs and mid() (called by run_context between the two
    # switches) shows inside it; co_fn's return (through uc_link) closes it.
    "context": [("trees", [*CTOR, "main() {", "  run_context() {", "    co_fn() {",
                           "      leaf();", *indent(MID, 3), "      leaf();",
                           "    } /* co_fn */", "    leaf();", "  } /* run_context */",
                           "} /* main */", "# 18 events"])],
    # plain_fn's object has no exit sites: a call of no duration, so its
    # callee shows as its sibling (docs/format.md).
    "noexit": [("trees", [*CTOR, "main() {", "  plain_fn(); /* entry only */", "  leaf();",
                          "  leaf();", "} /* main */", "# 9 events"])],
}


@pytest.mark.parametrize("mode", sorted(TREES))
def test_tree(built, tmp_path, mode):
    assert tree_of(built, tmp_path, mode) == TREES[mode]


def test_dlopen_library_calls(built, tmp_path):
    lib = ["    lib_fn() {", "      lib_leaf();", "    } /* lib_fn */"]
    assert tree_of(built, tmp_path, "dlopen", built / "lib.so") == [
        ("trees", [*CTOR, "main() {", "  run_dlopen() {", *lib, *lib, "    leaf();",
                   "  } /* run_dlopen */", "} /* main */", "# 16 events"])]


def test_exceptions_caught_and_rethrown(built, tmp_path):
    """ex_c's throw leaves ex_c and ex_b, caught in ex_a; the second leaves
    ex_c and re_b, caught in re_a, which calls leaf() and rethrows: re_a is
    left too, and main catches it."""
    assert tree_of(built, tmp_path, prog="except") == [("except", [
        "main() {", "  ex_a() {", "    ex_b() {", "      ex_c(); /* unwound */",
        "    } /* ex_b, unwound */", "    leaf();", "  } /* ex_a */", "  re_a() {",
        "    re_b() {", "      ex_c(); /* unwound */", "    } /* re_b, unwound */",
        "    leaf();", "  } /* re_a, unwound */", "  leaf();", "} /* main */",
        "# 15 events, 5 frames unwound"])]


@pytest.mark.parametrize("opts", [
    [],
    ["--early"],
], ids=["late", "early"])
def test_constructors(built, tmp_path, opts):
    """The constructor calls mid() before main: libftpad's constructor runs
    first, so it is recorded either way; --early must give the same tree."""
    ctor = ["trees_ctor() {", *indent(MID), "} /* trees_ctor */"]
    assert tree_of(built, tmp_path, "rec", opts=opts, env={"TREES_CTOR": "1"}) == [
        ("trees", [*ctor, *REC, "# 16 events"])]


def test_deep_recursion(built, tmp_path):
    """100,000 frames of deep(): counted by `ftpad report` (replay's tree of
    them is 10 GB of indentation), every one closed by its exit; the tree's
    depth from 3,000 frames, shown by replay."""
    _, trace = record(built / "trees", tmp_path, "deep", "100000")
    report = run([FTPAD_BIN, "report", "-s", "name", trace]).stdout.splitlines()
    calls = {line.split()[-1]: int(line.split()[-2]) for line in report if " us " in line
             or " ms " in line}
    assert calls == {"main": 1, "deep": 100000, "trees_ctor": 1}
    assert report[-1] == "# 200004 events"
    (tmp_path / "small").mkdir()
    [(_, lines)] = tree_of(built, tmp_path / "small", "deep", "3000")
    assert lines[-1] == "# 6004 events"
    depth = [(len(line) - len(line.lstrip())) // 2 for line in lines if "deep" in line]
    assert max(depth) == 3000 and lines.count("  " * 3000 + "deep();") == 1
    assert len(depth) == 2 * 2999 + 1


@pytest.mark.parametrize("opts,env", [
    (["--size", "1"], {}),
    ([], {"FTPAD_RECORD_CHUNK": "64", "FTPAD_RECORD_CHUNKS": "2"}),
], ids=["size", "tiny-chunks"])
def test_overflow_dropped_count_is_exact(built, tmp_path, opts, env):
    p, trace = record(built / "trees", tmp_path, "count", "100000", opts=opts, env=env)
    calls = int(re.search(r"calls=(\d+)", p.stdout)[1])
    assert calls == 200000  # mid and leaf, each 100,000 times
    m = re.search(r"(\d+) events, (\d+) dropped", p.stderr)
    recorded, dropped = int(m[1]), int(m[2])
    # Entries and exits of each call, and trees_ctor's and main's.
    assert dropped > 0 and recorded + dropped == calls * 2 + 4
    # replay counts the events as the summary does (a LOST record is not
    # one), and shows the drops they carry; those after the last chunk (or
    # the --size cap) are only in the summary.
    [(_, lines)] = trees(trace)
    m = re.match(r"# (\d+) events(?:, (\d+) LOST)?", lines[-1])
    assert int(m[1]) == recorded and int(m[2] or 0) <= dropped, lines[-1]


def test_noreturn_function_is_not_entry_only(built, tmp_path):
    """A function built with exit=1 that never returns has no exit site;
    its entry record says so (FTPAD_SITE_NO_RETURN), so it is not taken for
    one built without exits: its callees nest inside it."""
    [_, (_, child)] = tree_of(built, tmp_path, "fork-noreturn")
    assert child[0] == "child_noreturn() {"


def test_aarch64_under_qemu(tmp_path):
    """The longjmp tree from the aarch64 GCC plugin with exit=1, statically
    linked with libftpad.a, run under qemu-aarch64, read here on x86_64."""
    if not A64_PLUGIN.exists() or not A64_LIB.exists():
        pytest.fail(f"{A64_PLUGIN} or {A64_LIB} is missing: run `make` first")
    cc = ["aarch64-linux-gnu-gcc-12", "-O2", "-g0", f"-fplugin={A64_PLUGIN}"]
    run([*cc, "-fplugin-arg-ftpad-exit=0", "-c", "-o", tmp_path / "plain.o", SRC / "plain.c"])
    run([*cc, "-fplugin-arg-ftpad-exit=1", "-static", "-o", tmp_path / "trees", SRC / "trees.c",
         tmp_path / "plain.o", "-Wl,--undefined=ftpad_register_ops", A64_LIB, "-lpthread"])
    for mode in ("longjmp", "tail"):
        # What `ftpad record` writes first; the recorder appends the rest.
        trace = tmp_path / mode
        trace.mkdir()
        (trace / "info").write_text(f"format=1\ncommand=trees {mode}\n")
        p = run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", tmp_path / "trees", mode],
                check=False, env={**os.environ, "FTPAD_RECORD": str(trace)})
        assert p.returncode == 0, p.stderr
        assert trees(trace) == TREES[mode]


def test_signal_mark_is_the_first_name(tmp_path):
    """A trace whose first name to show is a signal mark (no sites at all):
    replay crashed, reading t->syms before interning the mark moved it."""
    image = tmp_path / "7.0"
    image.mkdir()
    (tmp_path / "info").write_text("format=1\narch=x86_64\nclock=tsc\n"
                                   "clock_sync=1000 2000\nclock_sync=2000 3000\n")
    (image / "image").write_text("pid=7\nexe=/bin/prog\n")
    (image / "sites").write_text("")
    header = struct.pack("<8sHHHHII16s24x", b"FTPADTRC", 1, 64, 16, 1, 7, 7, b"prog")
    events = struct.pack("<QIIQII", 1100, 0x4000000a, 0x1000, 1200, 0x5000000a, 0x1000)
    (image / "7.events").write_bytes(header + events)
    assert trees(tmp_path)[0][1] == ["[signal SIGUSR1] {}", "# 2 events"]
