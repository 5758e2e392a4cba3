# SPDX-License-Identifier: MIT
"""`ftpad record --depth N` and `--time-filter DUR` (runtime/record_buffer.c): a
program built with the GCC plugin and exit=1 (tests/src/record/filters.c)
whose calls have known depths and known durations (slow ones spin for 30 ms,
the others return at once), recorded and read back event by event.  The
assertions are on which calls are kept, never on times."""
import os

import pytest

from ftpadtest import FTPAD_BIN, PLUGIN, run
from test_record import A64_LIB, A64_PLUGIN, SRC, Trace

# main's events, unfiltered: (kind, function, depth), main at depth 1.
# Entries-only functions (noexit_leaf, from an object built without exit=1)
# have no exit; the longjmp from jump_deep2 leaves jumper, jump_deep1 and
# jump_deep2 unwound.
E, X = "entry", "exit"


def call(name, depth):
    return [(E, name, depth), (X, name, depth)]


ALL = ([(E, "main", 1)] + call("short_leaf", 2) + call("slow_leaf", 2)
       + [(E, "short_parent", 2)] + call("short_leaf", 3) + [(X, "short_parent", 2)]
       + [(E, "outer", 2), (E, "middle", 3), (E, "inner", 4), (E, "deepest", 5),
          (E, "noexit_leaf", 6), (X, "deepest", 5), (X, "inner", 4), (X, "middle", 3),
          (X, "outer", 2), (E, "noexit_leaf", 2),
          (E, "jumper", 2), (E, "jump_deep1", 3), (E, "jump_deep2", 4),
          (E, "after_jump", 2)] + call("after_child", 3) + [(X, "after_jump", 2)]
       + call("last_leaf", 2) + [(X, "main", 1)])
SHORT = {"short_leaf", "short_parent", "after_child", "last_leaf"}


def kept(depth=None, short=False):
    """ALL as (kind, function), filtered: noexit_leaf is kept by both."""
    return [(k, n) for k, n, d in ALL
            if n == "noexit_leaf" or ((depth is None or d <= depth) and not (short and n in SHORT))]


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    if not PLUGIN.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{PLUGIN} or {FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp("filters")
    cc = ["gcc", "-O2", "-fno-optimize-sibling-calls", f"-fplugin={PLUGIN}"]
    run([*cc, "-fplugin-arg-ftpad-exit=1", "-c", "-o", out / "f.o", SRC / "filters.c"])
    run([*cc, "-c", "-o", out / "n.o", SRC / "filters_noexit.c"])
    run(["gcc", "-o", out / "filters", out / "f.o", out / "n.o"])
    return out / "filters"


def recorded(prog, tmp_path, *opts):
    """main's thread's events as (kind, function), and the summary line."""
    out = tmp_path / "trace"
    p = run([FTPAD_BIN, "record", *opts, "-o", out, "--", prog], cwd=tmp_path)
    assert p.stdout == "done\n" and "0 dropped" in p.stderr, p.stderr
    [image] = Trace(out).images.values()
    [events] = image.threads.values()
    return [(k, image.sites[s][3]) for _, k, s, _ in events]


def test_unfiltered_is_the_whole_tree(prog, tmp_path):
    assert recorded(prog, tmp_path) == kept()


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5])
def test_depth_keeps_frames_up_to_n(prog, tmp_path, depth):
    # noexit_leaf has entries only: kept at any depth.  after_jump comes
    # after a longjmp out of depth 4: the sp rule brings the count back to
    # 1, so it is kept from --depth 2 on.
    assert recorded(prog, tmp_path, "--depth", str(depth)) == kept(depth=depth)


def test_time_filter_drops_short_childless_calls(prog, tmp_path):
    # Short calls with no recorded call inside go, nested ones too
    # (short_parent once its short_leaf is gone); slow ones stay, and so do
    # their callers, short deepest (it holds noexit_leaf's entry), the
    # unwound jumpers (no exit came to take them back) and noexit_leaf.
    assert recorded(prog, tmp_path, "--time-filter", "5ms") == kept(short=True)


def test_both_filters_together(prog, tmp_path):
    got = recorded(prog, tmp_path, "--depth", "3", "--time-filter", "5000us")
    assert got == kept(depth=3, short=True)


@pytest.mark.parametrize("args,message", [
    (["--depth", "0", "true"], "record: --depth takes a depth from 1 to 1048576, not '0'"),
    (["--depth", "3x", "true"], "record: --depth takes a depth from 1 to 1048576, not '3x'"),
    (["--time-filter", "10", "true"], None),
    (["--time-filter", "1h", "true"], "record: --time-filter takes a duration such as"),
    (["--time-filter", "0us", "true"], "record: --time-filter takes a duration such as"),
    (["--time-filter", "us", "true"], "record: --time-filter takes a duration such as"),
])
def test_bad_filter_arguments(args, message, tmp_path):
    p = run([FTPAD_BIN, "record", *args], check=False, cwd=tmp_path)
    if message is None:  # a bare number is nanoseconds
        assert p.returncode == 0, p.stderr
        return
    assert p.returncode == 2 and p.stderr.startswith(f"ftpad: error: {message}"), p.stderr
    assert list(tmp_path.iterdir()) == []


def test_depth_on_aarch64_under_qemu(tmp_path):
    """The same program, statically linked with the aarch64 libftpad.a and
    run under qemu with FTPAD_RECORD_DEPTH (what `ftpad record --depth`
    sets): the sp rule with aarch64's stack pointers.  (--time-filter is
    not checked here: qemu's first run of each block of code is slow.)"""
    if not A64_PLUGIN.exists() or not A64_LIB.exists():
        pytest.fail(f"{A64_PLUGIN} or {A64_LIB} is missing: run `make` first")
    cc = ["aarch64-linux-gnu-gcc-12", "-O2", "-fno-optimize-sibling-calls",
          f"-fplugin={A64_PLUGIN}"]
    run([*cc, "-fplugin-arg-ftpad-exit=1", "-c", "-o", tmp_path / "f.o", SRC / "filters.c"])
    run([*cc, "-c", "-o", tmp_path / "n.o", SRC / "filters_noexit.c"])
    exe = tmp_path / "filters"
    run(["aarch64-linux-gnu-gcc-12", "-static", "-o", exe, tmp_path / "f.o", tmp_path / "n.o",
         "-Wl,--undefined=ftpad_register_ops", A64_LIB, "-lpthread"])
    for depth in (2, 3):
        out = tmp_path / f"trace{depth}"
        out.mkdir()
        p = run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", exe],
                env={**os.environ, "FTPAD_RECORD": str(out), "FTPAD_RECORD_DEPTH": str(depth)})
        assert p.stdout == "done\n"
        [image] = Trace(out, arch=2).images.values()
        [events] = image.threads.values()
        assert [(k, image.sites[s][3]) for _, k, s, _ in events] == kept(depth=depth)
