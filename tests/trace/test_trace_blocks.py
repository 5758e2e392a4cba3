# SPDX-License-Identifier: MIT
"""Version 2's events files (<ftpad_trace.h> "Version 2's events"): blocks of
varint columns in zstd frames.  Events go through the recorder's encoder
(runtime/record_encode.c) and back through the reader's decoder
(trace/blocks.c) by tests/src/trace/blocks_tool.c, exactly, whatever their
kind and values; a file cut short reads to its last whole block; a version 1
file still reads; a spoiled block is an error naming the file, never a
crash; and a real recording takes at most 6 bytes an event."""
import re

import pytest

from ftpadtest import BUILD, FTPAD_BIN, INCLUDE, ROOT, TEST_SRC, read_events_file, run
from test_trace_hostile import deep_prog, record  # noqa: F401 (fixture)
from test_trace_view import Scenario, ftpad, gen  # noqa: F401 (fixture)

MASK28 = (1 << 28) - 1
FUNCS = ["main", "a", "b", "c", "d"]  # sites 3f (entry), 3f + 1 (exit), 3f + 2 (tail-exit)


@pytest.fixture(scope="module")
def tool(tmp_path_factory):
    exe = tmp_path_factory.mktemp("blocks") / "blocks_tool"
    run(["gcc", "-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror", "-I", INCLUDE,
         "-I", ROOT / "runtime", "-I", ROOT / "trace", TEST_SRC / "trace" / "blocks_tool.c",
         ROOT / "runtime" / "record_encode.c", ROOT / "trace" / "blocks.c", "-lzstd", "-o", exe])
    return exe


def events_file(gen, path, events):
    """A version 1 trace directory whose one thread has EVENTS (time, kind
    number, site, sp); its events file's path."""
    s = Scenario(path).image("1.0", "/bin/x", FUNCS).thread(1, "x")
    for t, kind, site, sp in events:
        s.raw(f"ev {t} {kind} {site} {sp}")
    s.write(gen)
    return path / "1.0" / "1.events"


def dump(tool, path):
    p = run([tool, "dump", path])
    return [tuple(map(int, line.split())) for line in p.stdout.splitlines()], p.stderr


# Every kind, the largest site, sp wrapping both ways, time deltas of 0, 1,
# 2^63 and more, time going backwards, and 2^64 - 1.
EXTREMES = [(0, 0, 0, 0), (0, 15, MASK28, 0xffffffff), (1, 1, 1, 0), (1, 2, 2, 0xffffffff),
            (2**63 + 5, 3, MASK28, 1), (3, 4, 31, 0x80000000), (2**64 - 1, 5, 0, 0x7fffffff),
            (2**64 - 1, 6, 7, 0x80000001), (12, 7, MASK28 - 1, 5), (11, 8, 16, 4),
            *[(100 + k, k, MASK28 >> k, (k * 0x11111111) & 0xffffffff) for k in range(16)],
            (0, 9, 0, 0), (2**40, 14, 1 << 27, 2**31 - 1)]


@pytest.mark.parametrize("per_block", [1, 3, 4096])
@pytest.mark.parametrize("coding", ["zstd", "varint"])
def test_every_field_of_every_kind_round_trips(tool, gen, tmp_path, per_block, coding):
    v1 = events_file(gen, tmp_path / "t", EXTREMES)
    v2 = tmp_path / "v2.events"
    run([tool, "v2", v1, v2, per_block, *(["varint"] if coding == "varint" else [])])
    want = [(t, k << 28 | s, sp) for t, k, s, sp in EXTREMES]
    assert dump(tool, v1) == (want, "")
    assert dump(tool, v2) == (want, "")
    header, events, stray = read_events_file(v2.read_bytes())  # the tests' own reader agrees
    assert header[1] == 2 and events == want and stray == 0


def loop_events(n):
    """A program's events: a loop calling a few functions, 30-90 ticks apart."""
    out, t = [], 1000
    for i in range(n // 2):
        f = i % 5
        t += 30 + (i * 7919) % 60
        out.append((t, 0, 3 * f, 0x7ffe1000 - 64 * (i % 3)))
        t += 40 + (i * 104729) % 50
        out.append((t, 1, 3 * f + 1, 0x7ffe1000 - 64 * (i % 3)))
    return out


def v2_trace(tool, gen, path, events, per_block=4096):
    """A trace directory like gen's, its events file made version 2."""
    f = events_file(gen, path, events)
    run([tool, "v2", f, f.with_suffix(".v2"), per_block])
    f.with_suffix(".v2").replace(f)
    return path, f


def test_a_file_cut_in_a_block_reads_to_the_last_whole_block(tool, gen, tmp_path):
    d, f = v2_trace(tool, gen, tmp_path / "c", loop_events(3000), per_block=1000)
    whole = f.read_bytes()
    _, _, stray = read_events_file(whole)
    assert stray == 0
    # The third block's start: the file's end less that block.
    blocks = [m.start() for m in re.finditer(b"FBLK", whole)]
    assert len(blocks) == 3
    for cut in (blocks[2] + 3, blocks[2] + 40, blocks[2] + 41, len(whole) - 1):
        f.write_bytes(whole[:cut])
        events, err = dump(tool, f)
        assert events == [(t, k << 28 | s, sp) for t, k, s, sp in loop_events(3000)[:2000]]
        assert err == f"cut {cut - blocks[2]}\n"
        p = ftpad("report", d)
        assert f"{f}: cut short: read to its last whole block (2000 events), " \
               f"{cut - blocks[2]} stray bytes ignored" in p.stderr


def test_a_version_1_file_reads_as_its_version_2_copy(tool, gen, tmp_path):
    events = loop_events(200)
    v1 = events_file(gen, tmp_path / "v1", events).parent.parent
    v2, _ = v2_trace(tool, gen, tmp_path / "v2", events)
    for args in (["replay"], ["report"], ["dump", "--folded"]):
        a, b = ftpad(*args, v1), ftpad(*args, v2)
        assert (a.stdout.replace(str(v1), ""), a.stderr) == (b.stdout.replace(str(v2), ""),
                                                             b.stderr)
        assert a.stdout and not a.stderr


def spoil(data, how, block):
    """DATA's first block spoiled HOW; block: its offset."""
    b = bytearray(data)
    field = {"magic": 0, "coding": 4, "size": 8, "events": 12, "raw_size": 16,
             "time_size": 20, "what_size": 24}
    if how == "frame":  # zstd garbage in the middle of the frame
        mid = block + 40 + int.from_bytes(data[block + 8:block + 12], "little") // 2
        b[mid:mid + 8] = b"\xde\xad\xbe\xef" * 2
    elif how == "size":
        b[block + 8:block + 12] = (0xfffffff0).to_bytes(4, "little")
    else:
        old = int.from_bytes(b[block + field[how]:block + field[how] + 4], "little")
        b[block + field[how]:block + field[how] + 4] = (old + 1).to_bytes(4, "little")
    return bytes(b)


@pytest.mark.parametrize("how,message", [
    ("magic", "block at byte 64: no block here (no FBLK magic)"),
    ("coding", "block at byte 64: unknown coding 2"),
    ("events", "block at byte 64: "),
    ("raw_size", "block at byte 64: "),
    ("time_size", "block at byte 64: "),
    ("what_size", "block at byte 64: "),
    ("frame", "block at byte 64: zstd: "),
    ("size", "block at byte "),
])
def test_a_spoiled_block_is_an_error_naming_the_file(tool, gen, tmp_path, how, message):
    d, f = v2_trace(tool, gen, tmp_path / "s", loop_events(400), per_block=100)
    f.write_bytes(spoil(f.read_bytes(), how, 64))
    for args in (["report"], ["replay"]):
        p = ftpad(*args, d, check=False)
        assert p.returncode == 1, (how, p.stderr)
        assert f"ftpad: error: {f}: {message}" in p.stderr, p.stderr


def test_a_recording_takes_at_most_6_bytes_an_event(deep_prog, tmp_path):  # noqa: F811
    """deep.c 20,000 calls deep, twice over (entries and exits): the sizes of
    the blocks depend on the clock's deltas, but this far under 6 bytes an
    event they keep under it whatever the timing."""
    out = record(deep_prog, tmp_path / "trace", 20000)
    (f,) = out.glob("*/*.events")
    _, events, stray = read_events_file(f.read_bytes())
    assert len(events) > 40000 and stray == 0
    assert f.stat().st_size / len(events) <= 6, f.stat().st_size / len(events)
