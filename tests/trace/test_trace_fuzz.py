# SPDX-License-Identifier: MIT
"""A mutation fuzzer of the trace reader and its viewers, in make check.

Two real traces (tests/src/trace/deep.c built with the GCC plugin, recorded
with `ftpad record`: one zstd-coded block of events, and one of a deeper
recursion written in blocks of 16 events) are spoiled a few hundred ways
with a fixed seed: bytes of their events (block headers, zstd frames),
sites, info and image files flipped, overwritten, cut off, repeated, and
numbers in their text made huge.  Each spoiled copy goes
through replay, report, dump --chrome and flame, built here from the same
sources with AddressSanitizer and UndefinedBehaviorSanitizer.  Every run
must end by itself (a hang guard), not by a signal nor a sanitizer report,
with status 0, or 1 after an error that names the file at fault."""
import concurrent.futures
import os
import random
import re
import shutil
import subprocess

import pytest

from ftpadtest import BUILD, FTPAD_BIN, INCLUDE, ROOT, run
from test_trace_hostile import deep_prog, small_trace  # noqa: F401 (fixtures)

SEED = 20240611
MUTATIONS = 100  # per trace
HANG_GUARD = 60  # seconds, per run: generous, as a stuck viewer is what it catches
VIEWERS = [["replay"], ["report"], ["dump", "--chrome", "-o", "-"], ["flame", "-o", "-"]]
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
ENV = {**os.environ, "ASAN_OPTIONS": "halt_on_error=1:detect_leaks=0:abort_on_error=0",
       "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


@pytest.fixture(scope="module")
def ftpad_san(tmp_path_factory):
    """The ftpad command (viewers and all) with the sanitizers."""
    script = BUILD / "trace" / "flame_script.c"  # trace/flame.js, made by the build
    if not script.exists():
        pytest.fail(f"{script} is missing: run `make` first")
    exe = tmp_path_factory.mktemp("san") / "ftpad"
    cli = ROOT / "cli"  # cli/CMakeLists.txt's FTPAD_CLI_SOURCES, without attach
    run(["gcc", "-std=gnu11", "-O1", "-g", *SAN, '-DFTPAD_VERSION="fuzz"',
         '-DFTPAD_INSTALL_LIBDIR="lib"', f"-I{ROOT / 'trace'}", f"-I{INCLUDE}", f"-I{cli}",
         cli / "ftpad.c", cli / "record.c", cli / "snapshot.c",
         cli / "tracedir.c",
         *sorted((ROOT / "trace").glob("*.c")), script, "-lsupc++", "-lzstd", "-o", exe])
    return exe


def huge_number(data, rng):
    """A decimal or hex number of the text made one that overflows."""
    numbers = list(re.finditer(rb"[0-9a-fx]+", data))
    if not numbers:
        return data
    m = rng.choice(numbers)
    big = rng.choice([b"18446744073709551615", b"99999999999999999999999", b"4294967295",
                      b"268435455", b"-1", b"0xffffffffffffffff", b"0"])
    return data[:m.start()] + big + data[m.end():]


def mutate(data, rng):
    """DATA spoiled one way, the way chosen by RNG."""
    how = rng.randrange(7)
    if not data:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    i = rng.randrange(len(data))
    if how == 0:  # flip a few bits
        b = bytearray(data)
        for _ in range(rng.randrange(1, 5)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        return bytes(b)
    if how == 1:  # overwrite a run with random or extreme bytes
        fill = rng.choice([b"\xff", b"\x00", b"\x7f", b"\x80", None])
        n = rng.randrange(1, 9)
        new = fill * n if fill else bytes(rng.randrange(256) for _ in range(n))
        return data[:i] + new + data[i + n:]
    if how == 2:  # cut short
        return data[:i]
    if how == 3:  # repeat a piece (whole events, lines)
        n = rng.randrange(1, 65)
        return data[:i + n] + data[i:i + n] * rng.randrange(1, 4) + data[i + n:]
    if how == 4:  # drop a piece
        return data[:i] + data[i + rng.randrange(1, 33):]
    if how == 5:
        return huge_number(data, rng)
    return data[:i] + rng.choice([b"\t", b"\n", b"=", b";", b"\xc3", b"\0"]) + data[i:]


def spoiled_copies(small_trace, out, rng):
    """(directory, what was spoiled) for each mutation, made in OUT."""
    (image,) = [p.name for p in small_trace.iterdir() if p.is_dir()]
    files = ["info", f"{image}/sites", f"{image}/image",
             *(f"{image}/{p.name}" for p in (small_trace / image).glob("*.events"))]
    # the events twice as often: the walk reads the most of them
    files += [f for f in files if f.endswith(".events")]
    for n in range(MUTATIONS):
        d = out / f"m{n}"
        shutil.copytree(small_trace, d)
        name = rng.choice(files)
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            path = d / name
            path.write_bytes(mutate(path.read_bytes(), rng))
        yield d, name


def check(ftpad, d, what, args):
    cmd = [str(ftpad), *args, str(d)]
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=HANG_GUARD, env=ENV)
    except subprocess.TimeoutExpired:
        return f"{' '.join(cmd)} ({what} spoiled): still running after {HANG_GUARD} s"
    err = p.stderr.decode(errors="replace")
    said = f"{' '.join(cmd)} ({what} spoiled) exited {p.returncode}:\n{err[-3000:]}"
    if p.returncode < 0 or "Sanitizer" in err or "runtime error" in err:
        return said
    if p.returncode == 1 and not re.search(rf"^ftpad: error: {re.escape(str(d))}\S*: ", err, re.M):
        return said  # an error that does not name the file at fault
    if p.returncode not in (0, 1):
        return said
    return None


@pytest.fixture(scope="module")
def blocks_trace(deep_prog, tmp_path_factory):  # noqa: F811
    """main > deep x 41 > leaf, written in blocks of 16 events (chunks of 17
    events, the last slot kept for a LOST count): six blocks."""
    out = tmp_path_factory.mktemp("blocks") / "trace"
    run([FTPAD_BIN, "record", "--force", "-o", out, "--", deep_prog, 40],
        env={**os.environ, "FTPAD_RECORD_CHUNK": "17"})
    return out


def test_spoiled_traces_give_errors_not_crashes_nor_hangs(ftpad_san, small_trace, blocks_trace,
                                                          tmp_path):
    runs = []
    for n, trace in enumerate((small_trace, blocks_trace)):
        for args in VIEWERS:  # the unspoiled trace reads cleanly
            assert check(ftpad_san, trace, "nothing", args) is None
        rng = random.Random(SEED + n)
        runs += [(d, what, args) for d, what in spoiled_copies(trace, tmp_path / f"t{n}", rng)
                 for args in VIEWERS]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        problems = [r for r in pool.map(lambda a: check(ftpad_san, *a), runs) if r]
    assert not problems, f"{len(problems)} of {len(runs)} runs:\n" + "\n".join(problems[:5])
