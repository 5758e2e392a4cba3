# SPDX-License-Identifier: MIT
"""`ftpad attach` end to end, on x86_64 natively: tests/src/attach/server.c,
a server-like program built with the GCC plugin (exit sites on) and not
linked with libftpad, whose threads block in accept(), read(), nanosleep()
and futexes while others run hot loops over padded functions.

- Attach, trace, detach, attach again: the program's own checks (every
  system call's result, the sleeps' length, the ping-pong sequence) hold
  throughout, every kind of thread keeps making progress, its text is
  byte for byte as before (read through /proc/PID/mem), and it exits 0.
- Exactness: with the hot threads parked, attach filtered to the counted
  functions, let them run, park them again, detach: the trace holds
  exactly the calls the program counted in between, and nothing else.
  With --graph, every entry has its exit.
The trace is read with tests/trace/test_record.py's reader of docs/format.md."""
import collections
import os
import random
import signal
import socket
import subprocess
import time

import pytest

from attachtest import (Attach, assert_text_unchanged, attach_program, libftpad_maps,
                        read_ranges, text_snapshot, thread_states)
from ftpadtest import FTPAD_BIN, TEST_SRC
from test_record import Trace

SERVER = TEST_SRC / "attach" / "server.c"
COUNTED = ("work_add", "work_nest", "work_tail", "work_leaf", "spare_fn")
PROGRESS = ("accepts", "reads", "sleeps", "trips")


@pytest.fixture(scope="module")
def server_exe(tmp_path_factory):
    return attach_program(tmp_path_factory, SERVER, "server")


def fields(line):
    """'word k=v k=v' -> (word, {k: int(v)})."""
    word, *rest = line.split()
    return word, {k: int(v) for k, v in (f.split("=") for f in rest)}


class Server:
    def __init__(self, exe, tmp_path, spin):
        self.sock = str(tmp_path / "server.sock")
        self.err = tmp_path / "server.err"  # its failures, one line each
        with open(self.err, "w") as err:
            self.p = subprocess.Popen([exe, self.sock, str(spin)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        word, kv = fields(self.p.stdout.readline())
        assert word == "ready" and kv["pid"] == self.p.pid
        self.pid = self.p.pid
        self.pongs = 0

    def command(self, cmd):
        self.p.stdin.write(cmd + "\n")
        line = self.p.stdout.readline()
        assert line, f"server ended at {cmd!r}: {self.err.read_text()}"
        return fields(line)

    def status(self):
        word, kv = self.command("status")
        assert word == "status" and kv["errors"] == 0, (kv, self.err.read_text())
        return kv

    def pause(self):
        word, kv = self.command("pause")
        assert word == "paused"
        return kv

    def resume(self):
        assert self.command("resume")[0] == "resumed"

    def ping(self):
        """A client: one line in, "pong N" back, N the next number."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(60)
            s.connect(self.sock)
            s.sendall(b"ping\n")
            reply = b""
            while not reply.endswith(b"\n"):
                chunk = s.recv(64)
                assert chunk, f"the server closed without a reply ({reply!r})"
                reply += chunk
        self.pongs += 1
        assert reply == f"pong {self.pongs}\n".encode()

    def progress_after(self, before):
        """Wait until every kind of thread has made progress since BEFORE
        (a status); a thread that never comes back (a lost wakeup, a call
        that failed for good) fails after a minute.  Checks every status
        for errors on the way."""
        self.ping()
        deadline = time.monotonic() + 60
        while True:
            now = self.status()
            stuck = [k for k in PROGRESS if now[k] <= before[k]]
            if not stuck:
                return now
            assert time.monotonic() < deadline, f"no progress in {stuck}: {before} -> {now}"
            time.sleep(0.05)

    def quit(self):
        """End it: every thread joined, exit status 0, no check failed."""
        out, _ = self.p.communicate("quit\n", timeout=120)
        lines = out.splitlines()
        assert self.p.returncode == 0 and lines[-1].startswith("final errors=0 "), (
            out, self.err.read_text())
        return fields(lines[-2])[1]

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.communicate()


@pytest.fixture
def server(server_exe, tmp_path, request):
    spin = getattr(request, "param", 200)
    s = Server(server_exe, tmp_path, spin)
    yield s
    s.kill()


def assert_running(pid):
    """No thread of PID is left stopped (by a signal or a tracer)."""
    states = thread_states(pid)
    assert not [t for t, s in states.items() if s in "tT"], states
    with open(f"/proc/{pid}/status") as f:
        assert "TracerPid:\t0\n" in f.read()


def summary(out, trace):
    """(events, dropped) of the trace in OUT, whose summary in info is this
    session's: its events and bytes are those of its files."""
    info = {k: int(trace.info[k][-1]) for k in ("events", "dropped", "bytes")}
    files = sorted(out.glob("*/*.events"))
    assert info["bytes"] == sum(f.stat().st_size for f in files), info
    assert info["events"] == sum(i.events() for i in trace.images.values()), info
    return info["events"], info["dropped"]


def test_attach_detach_attach_again(server, tmp_path):
    before_text = text_snapshot(server.pid)
    status = server.progress_after(server.status())
    for round in range(3):
        out = tmp_path / f"trace{round}"
        # The first time with the hot threads parked: every thread is then
        # blocked in a system call, and the loader stub runs on one of them.
        if round == 0:
            server.pause()
        attach = Attach(server.pid, out).wait_started()
        if round == 0:
            server.resume()
        # While attached: clients are served, every thread goes on.  The
        # status to pass is one taken now: the last round's was passed
        # already by what the threads did between the two attaches.
        status = server.progress_after(server.status())
        attach.finish()
        assert_running(server.pid)
        status = server.progress_after(status)
        trace = Trace(out)
        events, dropped = summary(out, trace)
        assert events > 0
        [image] = trace.images.values()
        calls = image.calls()
        # No filter: the hot loops and the sleeping threads' functions.
        for name in ("work_add", "work_nest", "spare_fn", "sleep_ns", "now_ns"):
            assert calls[name] > 0, (name, calls)
        assert calls["fail"] == 0
        # The text is back as it was; libftpad stays, loaded once.
        assert_text_unchanged(server.pid, before_text)
        assert len(libftpad_maps(server.pid)) == 1
    counts = server.quit()
    assert all(counts[name] > 0 for name in COUNTED)


def pairs_up(image):
    """Per thread, every exit or tail exit closes the innermost open call
    of its own function, and no call is left open: the hot threads were
    parked outside the counted functions at both ends."""
    for tid, events in image.threads.items():
        stack = []
        for _, kind, site, _ in events:
            name = image.sites[site][3]
            if kind == "entry":
                stack.append(name)
            elif kind in ("exit", "tail-exit"):
                assert stack and stack[-1] == name, (tid, name, stack)
                stack.pop()
            else:
                raise AssertionError(f"thread {tid}: unexpected {kind} event")
        assert not stack, (tid, stack)


@pytest.mark.parametrize("server", [2000], indirect=True)
@pytest.mark.parametrize("filters,chosen", [
    (["-F", "work_*"], {"work_add", "work_nest", "work_tail", "work_leaf"}),
    (["-F", "work_*", "-F", "spare_fn", "-N", "work_add"],
     {"work_nest", "work_tail", "work_leaf", "spare_fn"}),
], ids=["work", "work-spare-not-add"])
@pytest.mark.parametrize("graph", [False, True], ids=["entries", "graph"])
def test_trace_holds_exactly_the_counted_calls(server, tmp_path, filters, chosen, graph):
    before_text = text_snapshot(server.pid)
    start = server.pause()
    out = tmp_path / "trace"
    attach = Attach(server.pid, out, *filters, *(["--graph"] if graph else []))
    attach.wait_started()
    server.resume()
    server.progress_after(server.status())
    end = server.pause()
    attach.finish()
    server.resume()
    trace = Trace(out)
    events, dropped = summary(out, trace)
    assert dropped == 0
    [image] = trace.images.values()
    calls = image.calls()
    delta = {name: end[name] - start[name] for name in COUNTED}
    assert all(delta[name] > 0 for name in COUNTED), delta
    assert calls == {name: delta[name] for name in chosen}
    # Only the hot threads ran chosen functions.
    assert len([t for t, evs in image.threads.items() if evs]) == 3
    kinds = collections.Counter(k for evs in image.threads.values() for _, k, _, _ in evs)
    if graph:
        pairs_up(image)
        assert kinds["exit"] + kinds["tail-exit"] == kinds["entry"] == sum(calls.values())
    else:
        assert set(kinds) == {"entry"}
    assert events == sum(kinds.values())
    assert_text_unchanged(server.pid, before_text)
    server.progress_after(server.status())
    server.quit()


def runtime_threads(pid):
    """libftpad's threads in PID: a session's control thread, its writer."""
    names = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                names.add(f.read().strip())
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just ended
    return names & {"ftpad-attach", "ftpad-writer"}


def trace_bytes(out):
    """The bytes of every file of OUT and of its temporary (out.tmp-PID)."""
    return sum(f.stat().st_size for d in out.parent.glob(out.name + "*")
               for f in d.rglob("*") if f.is_file())


def session_over(server, before_text, out):
    """Wait (a minute at most) until the process has ended its session by
    itself: its control thread and writer gone, every site a NOP again.
    Then its trace cannot grow any more; it must not, and the process
    still serves and runs every kind of thread."""
    deadline = time.monotonic() + 60
    while runtime_threads(server.pid) or read_ranges(server.pid, list(before_text)) != before_text:
        assert time.monotonic() < deadline, (
            f"the session did not end: {runtime_threads(server.pid)} running, "
            f"{trace_bytes(out)} bytes of trace")
        time.sleep(0.01)
    size = trace_bytes(out)
    server.progress_after(server.status())
    assert trace_bytes(out) == size, "the trace grew after its session ended"
    assert_text_unchanged(server.pid, before_text)
    assert_running(server.pid)


def pending_sigint():
    """A SIGINT pending, blocked, as the tool starts: Ctrl-C pressed as it
    was being started."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    os.kill(os.getpid(), signal.SIGINT)


def test_sigint_before_the_start_leaves_the_process_alone(server, tmp_path):
    """A Ctrl-C that came while the tool was starting: nothing is done,
    libftpad is not even loaded, and no trace is left, in any name."""
    before_text = text_snapshot(server.pid)
    out = tmp_path / "trace"
    p = subprocess.run([str(FTPAD_BIN), "attach", str(server.pid), "--size", "64", "-o",
                        str(out)], preexec_fn=pending_sigint, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1 and "interrupted before attaching" in p.stderr, p.stderr
    assert not libftpad_maps(server.pid)
    assert not list(tmp_path.glob("trace*"))
    session_over(server, before_text, out)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_tool_gone_at_any_point_ends_the_session(server, tmp_path, sig):
    """Every function chosen (no -F), the hot threads running: the tool
    interrupted (Ctrl-C) or killed at many points around its start, from
    the moment it said "attached" on, and before.  Each time the process
    ends its session by itself (sites off, writer gone) within the bound,
    its trace stops growing, and it runs on.  Ctrl-C'ed, the tool leaves a
    finished trace or none, never its temporary directory.  --size bounds
    what a session that did not end would write."""
    before_text = text_snapshot(server.pid)
    rng = random.Random(16)
    # After "attached": at once, then later; before it: at random.
    points = [("after", d) for d in (0, 0, 0.001, 0.005, 0.02, 0.1)] + \
             [("before", rng.uniform(0, 0.05)) for _ in range(6)]
    for n, (when, delay) in enumerate(points):
        out = tmp_path / f"trace{n}"
        attach = Attach(server.pid, out, "--size", "64")
        if when == "after":
            attach.wait_started()
        time.sleep(delay)
        attach.p.send_signal(sig)
        rest, _ = attach.p.communicate(timeout=120)
        attach.output += rest
        if sig == signal.SIGINT and attach.p.returncode == -signal.SIGINT:
            # Came before the tool blocked it, its first step (on a loaded
            # machine, 50 ms can end before exec does): it died of it
            # having done nothing.
            assert attach.output == "" and not out.exists(), attach.output
        elif sig == signal.SIGINT:
            assert attach.p.returncode in (0, 1), attach.output
            assert not list(tmp_path.glob(f"trace{n}.tmp-*")), attach.output
            if attach.p.returncode == 0:
                Trace(out)  # a finished trace
        session_over(server, before_text, out)
    server.quit()
