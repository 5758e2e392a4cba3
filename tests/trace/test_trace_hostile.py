# SPDX-License-Identifier: MIT
"""The trace viewers on trace directories that are not what a recorder
writes: a FIFO or a symbolic link where a file should be, a site id no
file of that size can hold, and a recursion 100,000 calls deep for
`ftpad flame`.  Each viewer must say which file is wrong and exit 1, never
block nor eat the machine's memory, and flame must stay linear in the
depth.  Every run has a time limit (a hang guard, not a speed test) and an
address-space limit, so that the old behaviour fails fast and clearly.

The traces are real: tests/src/trace/deep.c built with the GCC plugin and
recorded with `ftpad record`."""
import os
import re
import resource
import shutil
import subprocess

import pytest

from ftpadtest import FTPAD_BIN, TEST_SRC, plugin_flags, run

DEEP_SOURCE = TEST_SRC / "trace" / "deep.c"
HANG_GUARD = 60  # seconds: generous, a blocked open() is what it catches
VIEWER_MEMORY = 512 << 20  # RLIMIT_AS of each viewer run
FLAME_MEMORY = 400 << 20
DEEP = 100_000

# Every viewer that reads a whole trace, as ftpad arguments before DIR.
VIEWERS = [["replay"], ["report"], ["dump", "--chrome", "-o", "-"], ["flame", "-o", "-"]]


def limited(memory):
    def preexec():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    return preexec


def viewer(args, memory=VIEWER_MEMORY):
    """ftpad ARGS under the hang guard and an address-space limit."""
    try:
        return subprocess.run([str(FTPAD_BIN), *map(str, args)], capture_output=True,
                              text=True, errors="replace", timeout=HANG_GUARD,
                              preexec_fn=limited(memory))
    except subprocess.TimeoutExpired:
        pytest.fail(f"ftpad {' '.join(map(str, args))} still running after {HANG_GUARD} s")


@pytest.fixture(scope="module")
def deep_prog(plugin, tmp_path_factory):
    if not FTPAD_BIN.exists():
        pytest.fail(f"{FTPAD_BIN} is missing: run `make` first")
    exe = tmp_path_factory.mktemp("deep") / "deep"
    run(["gcc", "-O1", "-g0", *plugin_flags(plugin, exit=1), DEEP_SOURCE, "-o", exe])
    return exe


def record(prog, out, depth):
    run([FTPAD_BIN, "record", "--force", "-o", out, "--", prog, depth])
    return out


@pytest.fixture(scope="module")
def small_trace(deep_prog, tmp_path_factory):
    """A recorded trace of main > deep x 6 > leaf: info, one image, one thread."""
    return record(deep_prog, tmp_path_factory.mktemp("small") / "trace", 5)


@pytest.fixture
def trace(small_trace, tmp_path):
    """A copy of the small trace to spoil, and its image directory."""
    d = tmp_path / "trace"
    shutil.copytree(small_trace, d)
    (image,) = [p for p in d.iterdir() if p.is_dir()]
    return d, image


def refused_by_every_viewer(d, bad, reason, viewers=VIEWERS):
    for args in viewers:
        p = viewer([*args, d])
        assert p.returncode == 1, (args, p.returncode, p.stderr[-2000:])
        assert f"ftpad: error: {bad}: {reason}" in p.stderr, (args, p.stderr[-2000:])


def test_the_small_trace_reads(trace):
    d, _ = trace
    for args in VIEWERS:
        assert viewer([*args, d]).returncode == 0, args


@pytest.mark.parametrize("where", ["IMAGE/99.events", "info", "IMAGE/image"])
def test_a_fifo_is_refused_not_waited_on(trace, where):
    d, image = trace
    fifo = d / where.replace("IMAGE", image.name)
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    refused_by_every_viewer(d, fifo, "a FIFO: a trace holds regular files only",
                            VIEWERS + [["live", "--iterations", "1"]])


def test_a_directory_as_an_events_file_is_refused(trace):
    d, image = trace
    (image / "99.events").mkdir()
    refused_by_every_viewer(d, image / "99.events", "a directory: a trace holds regular files only")


def test_a_sites_symlink_to_dev_zero_is_not_followed(trace):
    d, image = trace
    (image / "sites").unlink()
    (image / "sites").symlink_to("/dev/zero")
    refused_by_every_viewer(d, image / "sites", "a symbolic link: a trace holds regular files only")


def test_a_site_id_beyond_the_file_size_costs_nothing(trace):
    # 26 bytes naming the largest id an event can carry: a table of 2^28
    # entries (2 GiB) if ids were believed.
    d, image = trace
    line = "268435455\tentry\t0x1\t-\tf\tm\n"
    (image / "sites").write_text(line)
    refused_by_every_viewer(d, f"{image / 'sites'}:1",
                            f"site id 268435455, more than a {len(line)}-byte sites file can list")


# --- flame on a deep recursion

FRAME = re.compile(r'<g class="frame" data-name="([^"]*)" data-s="(\d+)" data-t="(\d+)" '
                   r'data-d="(\d+)"><title>[^<]*</title><rect x="([\d.]+)" y="[\d.]+" '
                   r'width="([\d.]+)"')


def frames(svg):
    return [(m[1], int(m[2]), int(m[3]), int(m[4]), float(m[5]), float(m[6]))
            for m in FRAME.finditer(svg)]


@pytest.fixture(scope="module")
def deep_trace(deep_prog, tmp_path_factory):
    return record(deep_prog, tmp_path_factory.mktemp("deeptrace") / "trace", DEEP)


def test_flame_of_a_recursion_100000_deep_is_linear(deep_trace, tmp_path):
    # Through folded text this is O(depth^2): 25 GB of stacks for 100,000.
    svg = tmp_path / "deep.svg"
    p = viewer(["flame", "--min-width", "0", deep_trace, "-o", svg], memory=FLAME_MEMORY)
    assert p.returncode == 0, p.stderr[-2000:]
    got = frames(svg.read_text())
    names = [f[0] for f in got]
    assert names[:2] == ["all", "main"] and names[-1] == "leaf"
    assert names.count("deep") == DEEP + 1 and len(got) == DEEP + 4
    total = got[0][2]
    scale = (1200 - 20) / total
    for depth, (name, start, t, d, x, width) in enumerate(got):
        # parents before children, one frame a level, each inside its parent
        assert d == depth, (name, d, depth)
        assert width == pytest.approx(t * scale, abs=0.006)
        assert x == pytest.approx(10 + start * scale, abs=0.006)
        if depth:
            parent = got[depth - 1]
            assert parent[1] <= start and start + t <= parent[1] + parent[2], (depth, name)
    assert got[-1][3] == DEEP + 3  # the leaf, below all, main and the deep calls


def test_flame_of_a_trace_is_the_flame_of_its_folded_stacks(deep_prog, tmp_path):
    trace = record(deep_prog, tmp_path / "trace", 300)
    folded = tmp_path / "t.folded"
    run([FTPAD_BIN, "dump", "--folded", trace, "-o", folded])
    args = ["--title", "deep", "--width", "900", "--min-width", "0", "-o", "-"]
    from_folded = run([FTPAD_BIN, "flame", *args, "--folded", folded]).stdout
    assert run([FTPAD_BIN, "flame", *args, trace]).stdout == from_folded
    assert 'data-name="leaf"' in from_folded
