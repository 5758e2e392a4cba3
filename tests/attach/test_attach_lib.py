# SPDX-License-Identifier: MIT
"""libftpad's side of `ftpad attach` (runtime/attach.c,
runtime/record_session.c's sessions): the test plays the tool.  It
listens on an abstract Unix socket and has tests/src/attach/prog.c call
ftpad_attach_start() with a request,
on the thread that runs the program's own commands; the program is linked
with libftpad, or dlopens libftpad.so.1 at the attach as the tool's loader
stub does.  The program's workers call work_a() and work_b() only when the
test says "run N", so the calls made while a session is on are known
exactly and compared with the trace, read by `ftpad report` and by
test_record's reader of the trace directory.  The program's text is read
through /proc/PID/mem before, during and after each session."""
import os
import re
import signal
import socket
import subprocess
import uuid

import pytest

from ftpadtest import FTPAD_BIN, INCLUDE, LIBFTPAD_SO, PLUGIN, TEST_SRC, run
from test_record import Trace, read_kv

SRC = TEST_SRC / "attach"
WORKERS = 3
STARTED = re.compile(r"^started sites=(\d+) enabled=(\d+)\n$")
STOPPED = re.compile(r"^stopped events=(\d+) dropped=(\d+) bytes=(\d+)\n$")


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    if not PLUGIN.exists() or not LIBFTPAD_SO.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{PLUGIN}, {LIBFTPAD_SO} or {FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp("attach")
    flags = ["gcc", "-O2", f"-fplugin={PLUGIN}", "-fplugin-arg-ftpad-exit=1"]
    run([*flags, "-DLINKED", f"-I{INCLUDE}", "-o", out / "linked", SRC / "prog.c",
         f"-L{LIBFTPAD_SO.parent}", f"-Wl,-rpath,{LIBFTPAD_SO.parent}", "-lftpad", "-lpthread"])
    run([*flags, "-o", out / "dlopened", SRC / "prog.c", "-ldl", "-lpthread"])
    return out


class Prog:
    """The running program and its command lines."""

    def __init__(self, path, env=()):
        self.p = subprocess.Popen(
            [path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "FTPAD_LIB_PATH": str(LIBFTPAD_SO.parent / "libftpad.so.1"),
                 **dict(env)})
        first = self.p.stdout.readline()
        assert first.startswith("ready "), first
        self.pid = int(first.split()[1])

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        answer = self.p.stdout.readline()
        assert answer, f"the program died ({self.p.wait()}) after {line!r}"
        return answer.strip()

    def run(self, n):
        """Each worker calls work_a() and work_b() n times: the totals."""
        a, b = map(int, re.fullmatch(r"ran a=(\d+) b=(\d+)", self.cmd(f"run {n}")).groups())
        return a, b

    def attach(self, request):
        return int(re.fullmatch(r"ret (-?\d+)", self.cmd("attach " + request.hex())).group(1))

    def threads(self):
        """The names of the program's threads."""
        task, names = f"/proc/{self.pid}/task", []
        for t in os.listdir(task):
            try:
                names.append(open(f"{task}/{t}/comm").read().strip())
            except FileNotFoundError:  # it ended meanwhile
                pass
        return sorted(names)

    def text(self, pid=None):
        """The bytes of the program's executable mappings, from /proc/PID/mem."""
        pid = pid or self.pid
        exe = os.readlink(f"/proc/{pid}/exe")
        out = []
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
            for line in maps:
                fields = line.split()
                if fields[1].startswith("r-x") and fields[-1] == exe:
                    lo, hi = (int(x, 16) for x in fields[0].split("-"))
                    mem.seek(lo)
                    out.append(mem.read(hi - lo))
        assert out
        return b"".join(out)

    def exit(self):
        bye = self.cmd("exit")
        assert self.p.wait() == 0 and bye.startswith("bye"), bye
        return bye

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


@pytest.fixture
def prog_of(progs):
    started = []

    def start(name, env=()):
        started.append(Prog(progs / name, env))
        return started[-1]
    yield start
    for p in started:
        p.kill()


class Tool:
    """The tool's end: an abstract stream socket, one session at a time."""

    def __init__(self, trace_dir):
        self.name = f"ftpad-test-{uuid.uuid4().hex}"
        self.dir = trace_dir
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind("\0" + self.name)
        self.server.listen(1)
        self.server.settimeout(120)  # a hang guard, not a measure
        self.conn = None

    def request(self, **settings):
        settings = {"FTPAD_ATTACH_SOCKET": self.name, "FTPAD_RECORD": str(self.dir),
                    "FTPAD_RECORD_EXITS": "1", **settings}
        return b"".join(f"{k}={v}\0".encode() for k, v in settings.items() if v is not None) \
            + b"\0"

    def accept(self):
        self.conn, _ = self.server.accept()
        self.conn.settimeout(120)
        self.lines = self.conn.makefile("r")
        return self.lines.readline()

    def stop(self, how="stop"):
        if how == "stop":
            self.conn.sendall(b"stop\n")
        else:  # end of file: the tool exited
            self.conn.shutdown(socket.SHUT_WR)
        line = self.lines.readline()
        assert self.lines.readline() == "", "the thread closes the socket after 'stopped'"
        self.conn.close()
        return line


def start_session(prog, tmp_path, name="trace", **settings):
    """An attach as the tool makes it: 0, and the started line's numbers."""
    trace_dir = tmp_path / name
    trace_dir.mkdir()
    tool = Tool(trace_dir)
    assert prog.attach(tool.request(**settings)) == 0
    m = STARTED.match(tool.accept())
    assert m, m
    return tool, tuple(map(int, m.groups()))


def report_calls(trace_dir):
    """{function: calls} as `ftpad report` reads the trace."""
    out = run([FTPAD_BIN, "report", trace_dir]).stdout
    return {m.group(2): int(m.group(1))
            for m in re.finditer(r"^\s*(?:\S+ \S+\s+){4}(\d+)\s+(\S+)$", out, re.M)}


def the_image(trace_dir, pid):
    trace = Trace(trace_dir)
    assert list(trace.images) == [f"{pid}.0"]
    return trace.images[f"{pid}.0"]


@pytest.mark.parametrize("name", ["linked", "dlopened"])
def test_session_records_exactly_the_calls_made_while_attached(prog_of, tmp_path, name):
    prog = prog_of(name)
    before_text = prog.text()
    mask = prog.cmd("mask")
    threads = prog.threads()
    a0, _ = prog.run(10)
    tool, (sites, enabled) = start_session(prog, tmp_path)
    # work_a, work_b and on_usr1, an entry and an exit site each; the
    # entries of the three enabled (and their exits with them).
    assert (sites, enabled) == (6, 3)
    assert "ftpad-attach" in prog.threads() and "ftpad-writer" in prog.threads()
    assert prog.text() != before_text, "the sites are patched during the session"
    a1, b1 = prog.run(100)
    stopped = STOPPED.match(tool.stop())
    events, dropped, nbytes = map(int, stopped.groups())
    a2, _ = prog.run(10)
    assert (a1 - a0, a2 - a1) == (100 * WORKERS, 10 * WORKERS)
    # The text is back, byte for byte; the runtime's threads are gone.
    assert prog.text() == before_text
    for _ in range(1000):
        if prog.threads() == threads:
            break
        os.sched_yield()
    assert prog.threads() == threads
    assert prog.cmd("mask") == mask
    # Exactly the calls made between start and stop, with their exits.
    assert report_calls(tool.dir) == {"work_a": 300, "work_b": 300}
    image = the_image(tool.dir, prog.pid)
    assert image.calls() == {"work_a": 300, "work_b": 300}
    assert len(image.threads) == WORKERS
    kinds = [k for evs in image.threads.values() for _, k, _, _ in evs]
    assert kinds.count("entry") == kinds.count("exit") == 600
    assert (events, dropped) == (image.events(), 0) == (1200, 0)
    assert nbytes == sum(f.stat().st_size for f in (tool.dir / f"{prog.pid}.0").glob("*.events"))
    # The image ends as at exit.
    kv = image.kv
    assert (kv["events"], kv["dropped"], kv["bytes"]) == ([str(events)], ["0"], [str(nbytes)])
    assert kv["pid"] == [str(prog.pid)]
    assert prog.exit() == "bye a=360 b=360"


def test_a_second_session_writes_a_new_complete_trace(prog_of, tmp_path):
    """Sessions one after another, each with its own settings: a filter, a
    --time-filter of a second and --depth (which take back every one of
    these short calls), then none again."""
    prog = prog_of("linked")
    before_text = prog.text()
    both = {"work_a": 1, "work_b": 1}
    sessions = [(7, {}, both), (20, {"FTPAD_RECORD_FILTER": "work_b"}, {"work_b": 1}),
                (5, {"FTPAD_RECORD_TIME_FILTER": "1000000000", "FTPAD_RECORD_DEPTH": "2"}, {}),
                (3, {}, both)]
    for i, (n, settings, per_call) in enumerate(sessions):
        tool, _ = start_session(prog, tmp_path, f"trace{i}", **settings)
        prog.run(n)
        assert STOPPED.match(tool.stop())
        prog.run(1)
        assert prog.text() == before_text
        expect = {f: n * WORKERS for f in per_call}
        assert the_image(tool.dir, prog.pid).calls() == expect, settings
        if expect:
            assert report_calls(tool.dir) == expect
    prog.exit()


def test_end_of_file_stops_the_session(prog_of, tmp_path):
    prog = prog_of("dlopened")
    before_text = prog.text()
    tool, _ = start_session(prog, tmp_path)
    prog.run(5)
    stopped = STOPPED.match(tool.stop(how="eof"))
    assert stopped and int(stopped.group(1)) == 2 * 2 * 5 * WORKERS
    prog.run(5)
    assert prog.text() == before_text
    assert report_calls(tool.dir) == {"work_a": 15, "work_b": 15}
    # A session after it starts.
    tool, _ = start_session(prog, tmp_path, "again")
    tool.stop()
    prog.exit()


def changed_addresses(prog, before_text):
    """The addresses where the program's text differs from before_text."""
    base = text_base(prog.pid)
    return {base + i for i, (x, y) in enumerate(zip(before_text, prog.text())) if x != y}


def test_exits_0_records_entries_only_and_leaves_exit_sites_alone(prog_of, tmp_path):
    prog = prog_of("linked")
    before_text = prog.text()
    tool, _ = start_session(prog, tmp_path, FTPAD_RECORD_EXITS="0")
    entries_only = changed_addresses(prog, before_text)
    prog.run(50)
    tool.stop()
    image = the_image(tool.dir, prog.pid)
    assert image.calls() == {"work_a": 150, "work_b": 150}
    assert {k for evs in image.threads.values() for _, k, _, _ in evs} == {"entry"}
    # Only the entry sites changed (the ops slot before the entry, the
    # site behind ENDBR at most): the exit sites keep their NOPs, where a
    # session with exits changes them too.
    entries = [e for kind, e, _, _, _ in image.sites.values() if kind == "entry"]
    near_entry = {a for a in entries_only if any(-8 <= a - e < 9 for e in entries)}
    assert entries_only and near_entry == entries_only
    assert prog.text() == before_text
    tool, _ = start_session(prog, tmp_path, "with-exits", FTPAD_RECORD_EXITS="1")
    with_exits = changed_addresses(prog, before_text)
    tool.stop()
    assert with_exits > entries_only
    assert not any(any(-8 <= a - e < 9 for e in entries) for a in with_exits - entries_only)
    prog.exit()


def text_base(pid):
    """The address of the first executable mapping of pid's program: where
    Prog.text()'s bytes begin (a PIE has one)."""
    exe = os.readlink(f"/proc/{pid}/exe")
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if fields[1].startswith("r-x") and fields[-1] == exe:
                return int(fields[0].split("-")[0], 16)
    raise AssertionError("no text mapping")


def test_busy_during_a_session_and_under_ftpad_record(prog_of, tmp_path, progs):
    prog = prog_of("linked")
    # The second call comes before the first's thread has even connected.
    (tmp_path / "trace").mkdir()
    tool = Tool(tmp_path / "trace")
    assert prog.cmd("attach2 " + tool.request().hex()) == "ret 0 -16"  # -EBUSY
    assert STARTED.match(tool.accept())
    other = Tool(tmp_path)
    assert prog.attach(other.request()) == -16
    prog.run(2)
    tool.stop()
    assert report_calls(tool.dir) == {"work_a": 6, "work_b": 6}
    prog.exit()
    # A process that `ftpad record` started records already.
    out = tmp_path / "recorded"
    p = subprocess.Popen([FTPAD_BIN, "record", "-o", out, "--", progs / "linked"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().startswith("ready")
        req = Tool(tmp_path).request(FTPAD_RECORD=str(tmp_path / "x"))
        p.stdin.write(f"attach {req.hex()}\nexit\n")
        p.stdin.flush()
        assert p.stdout.readline() == "ret -16\n"
    finally:
        p.communicate()


MALFORMED = {
    "no socket": b"FTPAD_RECORD=/tmp/x\0\0",
    "no trace directory": b"FTPAD_ATTACH_SOCKET=s\0\0",
    "relative directory": b"FTPAD_ATTACH_SOCKET=s\0FTPAD_RECORD=trace\0\0",
    "no =": b"FTPAD_ATTACH_SOCKET=s\0FTPAD_RECORD=/tmp/x\0FTPAD_RECORD_FILTER\0\0",
    "unknown name": b"FTPAD_ATTACH_SOCKET=s\0FTPAD_RECORD=/tmp/x\0FTPAD_RECORD_FILTR=a\0\0",
    "twice": b"FTPAD_ATTACH_SOCKET=s\0FTPAD_RECORD=/tmp/x\0FTPAD_RECORD=/tmp/y\0\0",
    "exits 2": b"FTPAD_ATTACH_SOCKET=s\0FTPAD_RECORD=/tmp/x\0FTPAD_RECORD_EXITS=2\0\0",
    "socket name too long": b"FTPAD_ATTACH_SOCKET=" + b"s" * 108 + b"\0FTPAD_RECORD=/x\0\0",
    "empty": b"\0",
}


def test_malformed_requests_are_refused_and_nothing_starts(prog_of, tmp_path):
    prog = prog_of("dlopened")
    threads = prog.threads()
    for why, request in MALFORMED.items():
        assert prog.attach(request) == -22, why  # -EINVAL
    assert prog.threads() == threads
    # After them a good one works.
    tool, _ = start_session(prog, tmp_path)
    prog.run(1)
    tool.stop()
    assert report_calls(tool.dir) == {"work_a": 3, "work_b": 3}
    prog.exit()


def test_a_start_that_fails_says_why_on_the_socket(prog_of, tmp_path):
    prog = prog_of("linked")
    before_text = prog.text()
    tool = Tool(tmp_path / "missing")  # not made: the recorder cannot write there
    assert prog.attach(tool.request()) == 0
    line = tool.accept()
    assert re.match(r"^error 2 .*missing.*\n$", line), line
    assert tool.lines.readline() == ""
    tool = Tool(tmp_path)
    assert prog.attach(tool.request(FTPAD_RECORD_SIZE="lots")) == 0
    line = tool.accept()
    assert re.match(r"^error 22 .*FTPAD_RECORD_SIZE='lots'.*\n$", line), line
    assert prog.text() == before_text
    # Nothing stays claimed.
    tool, _ = start_session(prog, tmp_path, "trace")
    tool.stop()
    prog.exit()


def test_signals_and_threads_of_the_program_are_undisturbed(prog_of, tmp_path):
    prog = prog_of("linked")
    mask = prog.cmd("mask")
    tool, _ = start_session(prog, tmp_path)
    for i in range(1, 6):  # one at a time: pending ones would merge
        os.kill(prog.pid, signal.SIGUSR1)
        for _ in range(100000):
            if prog.cmd("mask").endswith(f"usr1={i}"):
                break
    prog.run(3)
    # The control thread and the writer take none of the program's signals.
    for t in os.listdir(f"/proc/{prog.pid}/task"):
        status = open(f"/proc/{prog.pid}/task/{t}/status").read()
        if re.search(r"^Name:\s+ftpad-", status, re.M):
            blocked = int(re.search(r"^SigBlk:\s+(\w+)", status, re.M).group(1), 16)
            assert blocked >> (signal.SIGUSR1 - 1) & 1 and blocked >> (signal.SIGTERM - 1) & 1
    tool.stop()
    m = re.fullmatch(r"mask (\w+) usr1=(\d+)", prog.cmd("mask"))
    assert f"mask {m.group(1)} usr1=0" == mask and m.group(2) == "5"
    calls = the_image(tool.dir, prog.pid).calls()
    assert calls["work_a"] == calls["work_b"] == 9 and calls.get("on_usr1", 0) <= 5
    prog.exit()


def test_a_forked_child_leaves_the_session(prog_of, tmp_path):
    prog = prog_of("linked")
    before_text = prog.text()
    tool, _ = start_session(prog, tmp_path)
    (tmp_path / "child").mkdir()
    child_tool = Tool(tmp_path / "child")
    # The parent's line and the child's, in either order.
    lines = sorted([prog.cmd(f"fork 40 {child_tool.request().hex()}"),
                    prog.p.stdout.readline().strip()])
    child = int(re.fullmatch(r"forked (\d+)", lines[1]).group(1))
    assert lines[0] == f"child {child} a=40"
    try:
        # The child's sites are NOPs again, in its own copy of the text,
        # while the parent's stay patched.
        assert prog.text(child) == before_text
        assert prog.text() != before_text
        # The child is in no session: it can be attached to itself.
        os.kill(child, signal.SIGUSR2)
        assert prog.p.stdout.readline() == "child ret 0\n"
        assert STARTED.match(child_tool.accept())
        assert STOPPED.match(child_tool.stop()).group(1) == "0"
        assert prog.text(child) == before_text
        prog.run(4)
        tool.stop()
        # Its 40 calls are nowhere in the trace, and it wrote no image;
        # the tool saw end of file though the child lives (it closed its
        # copy of the socket).
        assert report_calls(tool.dir) == {"work_a": 12, "work_b": 12}
        assert sorted(p.name for p in tool.dir.iterdir() if p.is_dir()) == [f"{prog.pid}.0"]
        assert prog.text() == before_text
    finally:
        os.kill(child, signal.SIGTERM)
    prog.exit()


def test_the_process_exit_ends_the_trace(prog_of, tmp_path):
    prog = prog_of("dlopened")
    tool, _ = start_session(prog, tmp_path)
    prog.run(6)
    prog.exit()
    assert tool.lines.readline() == "", "the socket closes with the process"
    image = the_image(tool.dir, prog.pid)
    assert image.calls() == {"work_a": 18, "work_b": 18}
    assert image.kv["events"] == ["72"]
    assert read_kv(tool.dir / "info")["format"] == ["2"]
