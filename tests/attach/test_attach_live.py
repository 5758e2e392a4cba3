# SPDX-License-Identifier: MIT
"""`ftpad live` following an `ftpad attach` while it records a running
process (tests/src/attach/victim.c, its hot loop): the trace is at its
name from the start, marked as being recorded by the attach, live shows
its events during the session and stops once the detach has finished it,
with the summary's count.  Each wait is on a condition, with a generous
limit."""
import pytest

from attachtest import Attach, ReadyProcess, attach_program
from ftpadtest import TEST_SRC
from test_live import Live, summary_events
from test_record import read_kv


@pytest.fixture(scope="module")
def victim_exe(tmp_path_factory):
    return attach_program(tmp_path_factory, TEST_SRC / "attach" / "victim.c", "victim")


@pytest.fixture
def victim(victim_exe):
    v = ReadyProcess([victim_exe])
    yield v
    v.kill()


def test_live_follows_an_attach(victim, tmp_path):
    out = tmp_path / "trace"
    live = Live(out)
    attach = Attach(victim.pid, out, "--graph")
    try:
        attach.wait_started()
        live.wait_events_while_recording()
        info = read_kv(out / "info")
        assert info["state"] == ["recording"] and info["attach"] == [str(victim.pid)], info
        output = attach.finish()
    finally:
        attach.kill()
    assert live.finish() == 0, live.err
    assert live.screens[-1][0] and sum(s[0] for s in live.screens) == 1, live.screens[-3:]
    assert live.events(live.screens[-1]) == summary_events(output)
    assert "clock_sync" not in live.err, live.err
    assert read_kv(out / "info")["state"][-1] == "finished"
    victim.finish()
