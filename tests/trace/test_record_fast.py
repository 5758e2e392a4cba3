# SPDX-License-Identifier: MIT
"""x86_64's fast recording path (trampoline_x86_64.S "Fast recording"):
when the recorder is the only ops on a site and no option needs C per event,
entry and exit events are written by the trampoline itself.  The image's
fast_events= counts them, so these tests see which path ran without timing
anything: the fast path writes (nearly) every event of a plain `ftpad
record`, none under --depth or --time-filter, and a program whose calls use
every argument and return register (tests/src/record_fast/regs.c: integer,
SSE, varargs, x87 long double, two-register returns, an indirect tail call)
prints the same recorded as unrecorded, built by both plugins with exit
sites.  Signal handlers that land anywhere in the path (a 50 us timer over a
tight loop, tests/src/record_fast/signals.c) lose no event uncounted."""
import collections
import os
import platform
import re

import pytest

from ftpadtest import DEFAULT_COMPILERS, FTPAD_BIN, TEST_SRC, run
from test_record import Trace

SRC = TEST_SRC / "record_fast"
CALLS = 20000  # of each function: several chunks of 4096 events
FUNCTIONS = ["ints", "dbls", "vsum", "ldiv3", "cld", "two", "dtwo", "tail", "target"]

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64",
                                reason="the fast path is x86_64's")


@pytest.fixture(scope="module", params=DEFAULT_COMPILERS,
                ids=[c.name for c in DEFAULT_COMPILERS])
def regs(request, tmp_path_factory):
    c = request.param
    if not c.plugin.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{c.plugin} or {FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp(f"record-fast-{c.name}")
    for name in ("regs", "signals"):
        run([*c.driver(), "-O2", "-g0", *c.flags(exit=1), "-o", out / name, SRC / f"{name}.c"])
    return out / "regs"


# Room for every event of a run (360,002 of them, 88 chunks), so that a
# writer thread kept off the CPU by a loaded host cannot make the loop
# drop events: what these tests count must not depend on the scheduler.
POOL = {"FTPAD_RECORD_CHUNKS": "128"}


def record(prog, tmp_path, *opts):
    """Records PROG CALLS; checks its output against an unrecorded run and
    returns the trace's one image."""
    trace = tmp_path / "trace"
    p = run([FTPAD_BIN, "record", *opts, "-o", trace, "--", prog, CALLS], check=False,
            env={**os.environ, **POOL})
    plain = run([prog, CALLS])
    assert p.returncode == 0, p.stderr
    assert p.stdout == plain.stdout, "a register changed under the recorder"
    (image,) = Trace(trace).images.values()
    return image


def stat(image, key):
    return int(image.kv[key][-1])


def test_registers_survive_and_the_fast_path_writes(regs, tmp_path):
    image = record(regs, tmp_path)
    events = stat(image, "events")
    assert stat(image, "dropped") == 0
    # Every call's entry and exit, main's too, and nothing else.
    assert events == image.events() == 2 * CALLS * len(FUNCTIONS) + 2
    # Only a thread's first event and the first after each full chunk go
    # through C (no thread or chunk yet): a handful.
    chunks = events // 4095 + 1
    assert events - chunks - 1 <= stat(image, "fast_events") <= events
    # Entries and exits pair up, and tail's exit is a tail exit.
    (evs,) = image.threads.values()
    kinds = collections.Counter((image.sites[s][3], k) for _, k, s, _ in evs)
    for f in FUNCTIONS:
        assert kinds[(f, "entry")] == CALLS, f
        assert kinds[(f, "tail-exit" if f == "tail" else "exit")] == CALLS, f


@pytest.mark.parametrize("opts", [("--depth", "3"), ("--time-filter", "1us")],
                         ids=["depth", "time-filter"])
def test_options_with_c_per_event_take_the_generic_path(regs, tmp_path, opts):
    image = record(regs, tmp_path, *opts)
    assert stat(image, "events") > 0
    assert stat(image, "fast_events") == 0


@pytest.mark.parametrize("pool", [{}, {"FTPAD_RECORD_CHUNK": "1048576", "FTPAD_RECORD_CHUNKS": "16"}],
                         ids=["default-pool", "big-chunks"])
def test_signal_handlers_anywhere_lose_no_event_uncounted(regs, tmp_path, pool, monkeypatch):
    """Every event the program made is written or counted as dropped,
    wherever the handler came: inside the fast path (its events go before
    or after the interrupted one's, never into its slot), inside the C
    path (which the default pool, outrun by the loop, takes often: no free
    chunk; the handler's events are dropped, counted), or between two
    events.  With 16 MiB chunks, first touched under the fast path (page
    faults, where pending signals are delivered), the C path runs a few
    times only, so nothing usually drops, and then what was written nests
    and its times never go back."""
    for k, v in pool.items():
        monkeypatch.setenv(k, v)
    trace = tmp_path / "trace"
    p = run([FTPAD_BIN, "record", "-o", trace, "--", regs.parent / "signals", 3 * CALLS * 50])
    own = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", p.stdout)}
    assert own["handled"] > 10, "the timer hardly fired: nothing was tested"
    (image,) = Trace(trace).images.values()
    events, dropped = stat(image, "events"), stat(image, "dropped")
    assert stat(image, "fast_events") > 0 and events == image.events()
    # main, work, on_alarm, in_handler twice: an entry and an exit each;
    # and the handler's SIGNAL and SIGRETURN marks.
    assert events + dropped == 2 + 2 * own["work"] + 8 * own["handled"]
    if dropped:
        return  # a dropped mark leaves its handler's calls outside
    # in_handler and on_alarm only inside a handler's marks, work outside.
    (evs,) = image.threads.values()
    assert all(a[0] <= b[0] for a, b in zip(evs, evs[1:]))
    inside = 0
    for _, kind, site, _ in evs:
        inside += {"signal": 1, "sigreturn": -1}.get(kind, 0)
        if kind in ("entry", "exit", "tail-exit") and image.sites[site][3] != "main":
            assert inside == (image.sites[site][3] in ("in_handler", "on_alarm"))
