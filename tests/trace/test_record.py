# SPDX-License-Identifier: MIT
"""`ftpad record` and libftpad's recorder (runtime/record_*.c): programs built
with the GCC plugin, recorded into a trace directory, read back here with a
small reader of docs/format.md "The trace directory" (ftpadtest.read_events_file, not the
C viewers), and compared with the counts the programs keep themselves.
Mostly entries only (tests/trace/test_trace_trees.py checks exits).  x86_64
natively (LD_PRELOAD through `ftpad record`); aarch64 under qemu-aarch64,
linked statically with libftpad.a, and dynamically with libftpad.so
preloaded for its hooks (signals, _exit)."""
import collections
import os
import pathlib
import re
import signal
import subprocess

import pytest

from ftpadtest import BUILD, FTPAD_BIN, PLUGIN, TEST_SRC, read_events_file, run

SRC = TEST_SRC / "record"
A64_PLUGIN = BUILD / "gcc-plugin" / "aarch64" / "ftpad.so"
A64_LIB = BUILD / "runtime" / "aarch64" / "libftpad.a"

KINDS = {0: "entry", 1: "exit", 2: "tail-exit", 3: "lost", 4: "signal", 5: "sigreturn",
         6: "unwind"}
SUMMARY = re.compile(r"^ftpad: (\d+) sites, (\d+) enabled, (\d+) events, (\d+) dropped, "
                     r"(\d+) bytes in (.*)$", re.M)


def read_kv(path):
    """key=value lines; a key written twice keeps every value, in order."""
    kv = collections.defaultdict(list)
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        kv[key].append(value)
    return kv


class Image:
    """One <pid>.<n> directory: its image keys, sites and threads' events."""

    def __init__(self, path, arch):
        self.name = path.name
        self.kv = read_kv(path / "image")
        self.sites = {}
        lines = (path / "sites").read_text().splitlines()
        for line in lines:
            sid, kind, entry, flags, name, module = line.split("\t")
            self.sites[int(sid)] = (kind, int(entry, 16), flags, name, module)
        assert len(self.sites) == len(lines), "site ids are never reused"
        self.threads = {}  # by tid: the events of every file of that tid
        self.files = {}    # by name: <tid>.events, <tid>.<k>.events for a reused tid
        self.stray = {}    # by name: the bytes after the last whole block
        for f in sorted(path.glob("*.events")):
            header, events, stray = read_events_file(f.read_bytes())
            magic, version, hsize, esize, harch, pid, tid, comm = header
            assert (magic, version, hsize, esize, harch) == (b"FTPADTRC", 2, 64, 16, arch)
            assert re.fullmatch(rf"{tid}(\.\d+)?\.events", f.name), f.name
            assert str(pid) == self.kv["pid"][0]
            # A process killed while its writer wrote (exit_group, SIGKILL)
            # may leave a block cut short: read to the last whole one.
            self.stray[f.name] = stray
            self.files[f.name] = [(t, KINDS[w >> 28], w & 0xfffffff, sp) for t, w, sp in events]
            self.threads.setdefault(tid, []).extend(self.files[f.name])

    def calls(self, tid=None):
        """Entries per function name, of one thread or all."""
        c = collections.Counter()
        for t, events in self.threads.items():
            if tid in (None, t):
                c.update(self.sites[s][3] for _, k, s, _ in events if k == "entry")
        return c

    def lost(self):
        return sum(sp for evs in self.threads.values() for _, k, _, sp in evs if k == "lost")

    def events(self):
        return sum(1 for evs in self.threads.values() for e in evs if e[1] != "lost")


class Trace:
    def __init__(self, path, arch=1):
        self.info = read_kv(path / "info")
        # <pid>.<n> only: a --ring trace holds its snapshots beside them
        self.images = {p.name: Image(p, arch) for p in path.iterdir()
                       if p.is_dir() and re.fullmatch(r"\d+\.\d+", p.name)}


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    if not PLUGIN.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{PLUGIN} or {FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp("record")
    run(["gcc", "-O2", f"-fplugin={PLUGIN}", "-o", out / "prog", SRC / "prog.c", "-lpthread",
         "-ldl"])
    run(["gcc", "-O2", "-shared", "-fPIC", f"-fplugin={PLUGIN}", "-o", out / "lib.so",
         SRC / "lib.c"])
    return out


def record(prog, tmp_path, *args, opts=(), check_status=None):
    out = tmp_path / "trace"
    p = run([FTPAD_BIN, "record", *opts, "-o", out, "--", prog / "prog", *args], check=False,
            cwd=tmp_path)
    plain = run([prog / "prog", *args], check=False, cwd=tmp_path)
    # Output and exit status unchanged.
    assert (p.stdout, p.returncode) == (plain.stdout, plain.returncode)
    m = SUMMARY.search(p.stderr)
    assert m, p.stderr
    return p, Trace(out), tuple(map(int, m.groups()[:5]))


def counts(stdout):
    """The program's own counts, one dict per report line."""
    return [{k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
            for line in stdout.splitlines()]


def test_entries_equal_the_programs_counts(prog, tmp_path):
    p, trace, summary = record(prog, tmp_path, "count", "1000")
    assert p.returncode == 7
    [image] = trace.images.values()
    [tid] = image.threads
    assert image.name == f"{tid}.0" and image.kv["exe"] == [str(prog / "prog")]
    own = counts(p.stdout)[0]
    calls = image.calls()
    assert (calls["leaf"], calls["mid"], calls["main"]) == (own["leaf"], own["mid"], 1)
    # Time goes forward; sp: a callee's entry is below its caller's.
    events = image.threads[tid]
    assert all(a[0] <= b[0] for a, b in zip(events, events[1:]))
    names = [image.sites[s][3] for _, _, s, _ in events]
    i = names.index("mid")
    assert names[i + 1] == "leaf" and events[i + 1][3] < events[i][3]
    assert names[0] == "before_main" and names[1] == "main"
    assert {s[0] for s in image.sites.values()} == {"entry"}
    assert {s[2] for s in image.sites.values()} == {"noexit"}


def test_summary_matches_the_files(prog, tmp_path):
    p, trace, (sites, enabled, events, dropped, nbytes) = record(prog, tmp_path, "count", "300")
    [image] = trace.images.values()
    assert sites == len(image.sites) and enabled == sites
    assert events == image.events() == 603 and dropped == 0  # 300 * 2, before_main, main, report
    assert not any(image.stray.values()), image.stray  # whole blocks only
    files = sorted((tmp_path / "trace" / image.name).glob("*.events"))
    assert nbytes == sum(f.stat().st_size for f in files)
    info = trace.info
    assert info["format"] == ["2"] and info["arch"] == ["x86_64"] and info["clock"] == ["tsc"]
    assert info["exit"] == ["7"] and info["events"] == [str(events)]
    sync = [tuple(map(int, v.split())) for v in info["clock_sync"]]
    assert len(sync) >= 2 and sync == sorted(sync)
    assert info["command"] == [f"'{prog / 'prog'}' 'count' '300'"]
    assert not list(tmp_path.glob("trace.*")), "temporary directories left behind"


def test_threads_have_their_own_files(prog, tmp_path):
    p, trace, _ = record(prog, tmp_path, "threads")
    [image] = trace.images.values()
    per_thread = sorted(image.calls(t)["leaf"] for t in image.threads)
    assert per_thread == [0, 10, 110, 210]  # main, then the three threads


def test_fork_child_has_its_own_image(prog, tmp_path):
    p, trace, _ = record(prog, tmp_path, "fork")
    child_own, parent_own = counts(p.stdout)
    assert len(trace.images) == 2
    parent = next(i for i in trace.images.values() if "forked_from" not in i.kv)
    child = next(i for i in trace.images.values() if "forked_from" in i.kv)
    assert child.kv["forked_from"] == [parent.name]
    assert child.kv["ppid"] == parent.kv["pid"]
    # Neither writes the other's events; the child's sites are its parent's.
    assert parent.calls() == {"before_main": 1, "main": 1, "mid": 3, "leaf": 3, "report": 1}
    assert child.calls() == {"mid": 5, "leaf": 5, "report": 1}
    assert (parent_own["mid"], child_own["mid"]) == (3, 5)
    assert child.sites == parent.sites


def test_exec_continues_into_the_next_image(prog, tmp_path):
    p, trace, (sites, enabled, events, dropped, nbytes) = record(prog, tmp_path, "exec")
    before, after = counts(p.stdout)
    pid = p.stdout and sorted(trace.images)[0].split(".")[0]
    assert sorted(trace.images) == [f"{pid}.0", f"{pid}.1"]
    first, second = trace.images[f"{pid}.0"], trace.images[f"{pid}.1"]
    assert second.kv["exec_from"] == [first.name] and "exec_from" not in first.kv
    assert first.calls()["mid"] == before["mid"] == 2
    assert second.calls()["mid"] == after["mid"] == 4
    assert second.kv["argv"] == [f"{prog / 'prog'} count 4"]
    # The image that exec'ed ended with its totals, and the summary counts
    # both images' events.
    for image in (first, second):
        assert image.kv["events"] == [str(image.events())]
    assert events == first.events() + second.events() and dropped == 0
    assert (sites, enabled) == (int(first.kv["sites"][0]), int(first.kv["enabled"][0]))


def test_failed_exec_goes_on_in_the_same_image(prog, tmp_path):
    """An exec that fails: the image wrote its totals before it, goes on,
    and appends later ones at exit, which are the ones that count."""
    p, trace, (_, _, events, dropped, _) = record(prog, tmp_path, "execfail")
    [image] = trace.images.values()
    assert counts(p.stdout)[0]["mid"] == image.calls()["mid"] == 4
    assert len(image.kv["events"]) == 2 and image.kv["events"][-1] == str(image.events())
    assert events == image.events() and dropped == 0


@pytest.mark.parametrize("how,status", [("_exit", 5), ("_Exit", 6)])
def test_exit_without_destructors_keeps_every_event(prog, tmp_path, how, status):
    """_exit and _Exit skip the destructors that end the trace at exit():
    libftpad.so ends it first, so the last buffers are written."""
    p, trace, (_, _, events, dropped, _) = record(prog, tmp_path, how, "50")
    assert p.returncode == status
    [image] = trace.images.values()
    own = counts(p.stdout)[0]
    calls = image.calls()
    assert (calls["mid"], calls["leaf"]) == (own["mid"], own["leaf"]) == (50, 50)
    assert events == image.events() and dropped == 0
    assert image.kv["events"] == [str(events)]


def test_vfork_child_exit_leaves_the_parent_recording(prog, tmp_path):
    """A vfork child shares its parent's memory, buffers included: its
    _exit must not end the parent's trace."""
    p, trace, (_, _, events, dropped, _) = record(prog, tmp_path, "vfork")
    assert p.returncode == 0
    [image] = trace.images.values()
    assert counts(p.stdout)[0]["mid"] == image.calls()["mid"] == 5
    assert image.calls()["report"] == 1
    assert events == image.events() and dropped == 0


def test_deep_recursion(prog, tmp_path):
    p, trace, (_, _, events, dropped, _) = record(prog, tmp_path, "deep", "100000")
    assert counts(p.stdout)[0]["deep"] == 100000
    [image] = trace.images.values()
    [evs] = image.threads.values()
    deep = [sp for _, k, s, sp in evs if k == "entry" and image.sites[s][3] == "deep"]
    assert len(deep) == 100000 and dropped == 0
    # Each frame below the one before: the sp differences are all negative.
    assert all(((b - a) & 0xffffffff) >= 0x80000000 for a, b in zip(deep, deep[1:]))


def test_signal_handlers_are_bracketed(prog, tmp_path):
    p, trace, _ = record(prog, tmp_path, "signal")
    assert counts(p.stdout) == [{"usr1_ok": 1, "query_ok": 1}, {"leaf": 4, "mid": 1}]
    [image] = trace.images.values()
    [events] = image.threads.values()
    seen = [(k, image.sites[s][3] if k == "entry" else s) for _, k, s, _ in events]
    assert seen == [("entry", "before_main"), ("entry", "main"),
                    ("signal", 10), ("entry", "on_usr1"), *[("entry", "leaf")] * 3,
                    ("sigreturn", 10),
                    ("signal", 12), ("entry", "on_usr2"), ("entry", "mid"), ("entry", "leaf"),
                    ("sigreturn", 12), ("entry", "report")]
    # The handler's frames nest below the SIGNAL mark, which is below main.
    sp = {i: e[3] for i, e in enumerate(events)}
    assert sp[2] - sp[1] > 0x80000000 or sp[2] < sp[1]
    assert all(sp[i] < sp[2] for i in (3, 4, 5, 6))


def test_dlopened_library_sites_are_appended(prog, tmp_path):
    p, trace, _ = record(prog, tmp_path, "dlopen", str(prog / "lib.so"))
    [image] = trace.images.values()
    ids = {s[3]: i for i, s in image.sites.items()}
    assert image.sites[ids["lib_fn"]][4] == str(prog / "lib.so")
    assert ids["lib_fn"] > max(i for n, i in ids.items() if n != "lib_fn")
    assert sorted(image.sites) == list(range(len(image.sites)))
    assert image.calls()["lib_fn"] == 6


@pytest.mark.parametrize("opts,env", [
    (["--size", "1"], {}),
    ([], {"FTPAD_RECORD_CHUNK": "64", "FTPAD_RECORD_CHUNKS": "2"}),
], ids=["size", "tiny-chunks"])
def test_overflow_counts_every_dropped_event(prog, tmp_path, opts, env, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    p, trace, (_, _, events, dropped, nbytes) = record(prog, tmp_path, "count", "100000",
                                                        opts=opts)
    own = counts(p.stdout)[0]
    [image] = trace.images.values()
    made = own["leaf"] + own["mid"] + 3  # and before_main, main, report
    assert dropped > 0 and events == image.events()
    assert events + dropped == made
    # Every dropped event is in a LOST event, those after the thread's last
    # chunk too (in the one LOST event that ends its file) ...
    assert image.lost() == dropped
    if opts:
        assert nbytes <= (1 << 20) + (64 + 16) * len(image.threads)
    # ... and the viewers count them all.
    said = run([FTPAD_BIN, "replay", tmp_path / "trace"]).stdout
    assert sum(int(n) for n in re.findall(r"^# .* (\d+) LOST", said, re.M)) == dropped


def test_size_caps_every_process_of_the_trace_together(prog, tmp_path):
    """--size is the trace's: three children recording at once and their
    parent after them share one budget (DIR/.budget), so the images' events
    together stay within it, and every event made is written or counted as
    dropped."""
    p, trace, _ = record(prog, tmp_path, "forks", "3", "40000", opts=["--size", "1"])
    assert p.returncode == 0 and len(trace.images) == 4
    own = counts(p.stdout)
    assert len(own) == 4 and all(c["mid"] == 40000 for c in own)
    made = sum(c["leaf"] + c["mid"] for c in own) + 3  # before_main, main, report
    made += 3  # each child's report
    files = [f for f in (tmp_path / "trace").rglob("*.events")]
    # 40,000 mid() and leaf() calls are 1.2 MiB of events in each process,
    # 4.9 MiB in all: the cap of 1 MiB holds for all four together (and a
    # 64-byte header and a final LOST event per file).
    assert sum(f.stat().st_size for f in files) <= (1 << 20) + (64 + 16) * len(files)
    events = sum(image.events() for image in trace.images.values())
    dropped = sum(image.lost() for image in trace.images.values())
    assert dropped > 0 and events + dropped == made


def assert_whole(image, summary):
    """A trace cut by a signal is still whole: the image has its totals,
    which the summary line repeats, and every event is one the program
    made (a known site, times in order).  summary: ftpad record's stderr."""
    m = SUMMARY.search(summary)
    assert m, summary
    events, dropped = int(m.group(3)), int(m.group(4))
    assert image.kv["events"] == [str(image.events())] == [str(events)]
    assert image.kv["dropped"] == [str(dropped)] and image.lost() == dropped
    for evs in image.threads.values():
        assert all(s in image.sites for _, k, s, _ in evs if k in ("entry", "exit"))
        times = [t for t, k, _, _ in evs if k != "lost"]
        assert times == sorted(times)


@pytest.mark.parametrize("how,sig", [("segv", signal.SIGSEGV), ("abort", signal.SIGABRT)])
def test_a_crash_keeps_its_events(prog, tmp_path, how, sig):
    """A program that crashes ends its trace first (record_session.c
    end_by_signal()), and then dies of the same signal: every call up to
    the crash is in the trace, with the image's totals."""
    out = tmp_path / "trace"
    p = run([FTPAD_BIN, "record", "-o", out, "--", prog / "prog", "crash", how, "500"],
            check=False, cwd=tmp_path)
    plain = run([prog / "prog", "crash", how, "500"], check=False, cwd=tmp_path)
    assert plain.returncode == -sig and p.returncode == 128 + sig
    assert p.stdout == plain.stdout
    [image] = Trace(out).images.values()
    calls = image.calls()
    assert (calls["mid"], calls["leaf"], calls["report"], calls["crash"]) == (500, 500, 1, 1)
    assert_whole(image, p.stderr)


def as_a_terminal_starts_it():
    """SIGINT and SIGQUIT at their default actions, as a shell leaves them
    for a job in the foreground of a terminal.  A test run started in the
    background inherits them ignored (POSIX: a non-interactive shell's `&`),
    and ftpad record rightly hands PROG the actions it got: PROG would then
    spin through the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def spin_and_signal(prog, tmp_path, sig, to):
    """`ftpad record -- prog spin` in a session of its own, sent sig once
    the program runs: to the program ("prog"), to ftpad ("ftpad"), or to
    the whole process group, as a terminal's Ctrl-C is ("group")."""
    out = tmp_path / "trace"
    p = subprocess.Popen([str(FTPAD_BIN), "record", "-o", str(out), "--", str(prog / "prog"),
                          "spin"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=as_a_terminal_starts_it)
    try:
        assert p.stdout.readline() == "ready\n"
        if to == "group":
            os.killpg(p.pid, sig)
        elif to == "ftpad":
            os.kill(p.pid, sig)
        else:
            [child] = pathlib.Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
            os.kill(int(child), sig)
        _, err = p.communicate(timeout=60)
    finally:
        # Whatever failed, no spinning program is left behind.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    return p.returncode, err, out


@pytest.mark.parametrize("sig,to", [(signal.SIGINT, "group"), (signal.SIGTERM, "ftpad"),
                                    (signal.SIGTERM, "prog"), (signal.SIGHUP, "ftpad"),
                                    (signal.SIGPIPE, "prog")],
                         ids=["ctrl-c", "term-ftpad", "term-prog", "hup-ftpad", "pipe-prog"])
def test_a_signal_that_ends_the_program_keeps_its_events(prog, tmp_path, sig, to):
    """A program ended by a signal keeps its trace: ftpad record ignores
    Ctrl-C (the program gets it from the terminal), passes SIGTERM and
    SIGHUP on, and installs the trace once the program is gone; the
    program ends its trace, then dies of the signal, and ftpad record
    exits as it did."""
    status, err, out = spin_and_signal(prog, tmp_path, sig, to)
    assert status == 128 + sig, err
    assert "warning" not in err
    [image] = Trace(out).images.values()
    assert image.calls()["mid"] > 0
    assert_whole(image, err)


def test_sigkill_is_said(prog, tmp_path):
    """SIGKILL cannot be caught: what the program still held is lost, and
    ftpad record says so; the trace is installed all the same, with a
    second clock point so that its times convert."""
    status, err, out = spin_and_signal(prog, tmp_path, signal.SIGKILL, "prog")
    assert status == 128 + signal.SIGKILL
    # Not read with Trace: the kill may have come as the writer began an
    # events file, before its header (the viewers warn and skip it).
    [image] = [d for d in out.iterdir() if d.is_dir()]
    assert f"process image {image.name} ended without its totals" in err
    assert "events" not in read_kv(image / "image")
    assert len(read_kv(out / "info")["clock_sync"]) >= 2
    said = run([FTPAD_BIN, "replay", out])
    assert "clock_sync point" not in said.stderr


def test_the_default_action_still_reads_as_default(prog, tmp_path):
    """The handler that stands for SIG_DFL while recording is not seen: a
    query says SIG_DFL, before and after the program sets it, and a
    signal so set still ends the trace first."""
    out = tmp_path / "trace"
    p = run([FTPAD_BIN, "record", "-o", out, "--", prog / "prog", "dflquery"], check=False,
            cwd=tmp_path)
    plain = run([prog / "prog", "dflquery"], check=False, cwd=tmp_path)
    assert p.stdout == plain.stdout == "term_default=1 int_default=1\nleaf=3 mid=3\n"
    assert plain.returncode == -signal.SIGINT and p.returncode == 128 + signal.SIGINT
    [image] = Trace(out).images.values()
    assert image.calls()["mid"] == 3
    assert_whole(image, p.stderr)


@pytest.mark.parametrize("args,message", [
    (["-F"], "record: option '-F' needs an argument"),
    (["-F", "", "true"], "record: option '-F' takes one glob"),
    (["-N", "a,b", "true"], "record: option '-N' takes one glob"),
    (["--size", "0", "true"], "record: --size takes a number of MB >= 1, not '0'"),
    (["--size", "3x", "true"], "record: --size takes a number of MB >= 1, not '3x'"),
    (["-o", "", "true"], "record: option '-o' needs a directory name"),
    (["--bogus", "true"], "record: unknown option '--bogus'"),
    (["--"], "record: missing PROG"),
])
def test_bad_arguments(args, message, tmp_path):
    p = run([FTPAD_BIN, "record", *args], check=False, cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.startswith(f"ftpad: error: {message}"), p.stderr
    assert list(tmp_path.iterdir()) == []


def test_existing_directory_needs_force(prog, tmp_path):
    (tmp_path / "trace").mkdir()
    (tmp_path / "trace" / "old").write_text("x")
    p = run([FTPAD_BIN, "record", "-o", tmp_path / "trace", "--", prog / "prog"], check=False)
    assert p.returncode == 1 and "exists; remove it or use --force" in p.stderr
    assert (tmp_path / "trace" / "old").exists()
    (tmp_path / "trace" / "old").unlink()
    (tmp_path / "trace").rmdir()
    record(prog, tmp_path, "count", "3")
    p, trace, _ = record(prog, tmp_path, "count", "3", opts=["--force"])
    assert len(trace.images) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace"]


def test_libftpads_own_trap_handler_is_not_wrapped(tmp_path):
    """The SIGTRAP handler of the int3 protocol, set while the recorder
    runs, is libftpad's own: not wrapped as a program's handler, whose
    calls get SIGNAL events, so an attach trace shows no [signal SIGTRAP]
    frames from the patching."""
    if os.uname().machine != "x86_64":
        pytest.skip("the int3 protocol's SIGTRAP is x86_64's")
    exe = tmp_path / "trap_action"
    run(["gcc", "-O2", f"-fplugin={PLUGIN}", "-fplugin-arg-ftpad-exit=1", "-o", exe,
         SRC / "trap_action.c"])
    for opts in ([], ["--early"]):
        p = run([FTPAD_BIN, "record", *opts, "--force", "-o", tmp_path / "t", "--", exe])
        assert p.stdout == "same\n", (opts, p.stderr)


def test_a_program_without_pads_is_said(prog, tmp_path):
    """A program built without the plugin: recorded (its status kept), with
    a warning that nothing could be traced; none for one with pads."""
    p = run([FTPAD_BIN, "record", "-o", tmp_path / "t", "--", "sh", "-c", "exit 3"],
            check=False)
    assert p.returncode == 3
    assert "ftpad: warning: 'sh' has no ftpad pads (0 sites): nothing could be traced" \
        in p.stderr, p.stderr
    p, _, _ = record(prog, tmp_path, "count", "3")
    assert "no ftpad pads" not in p.stderr


@pytest.mark.parametrize("what", ["folder", "no-format", "extra-file", "file"])
def test_force_replaces_only_a_trace(prog, tmp_path, what):
    """--force leaves a user's own directory (or file) as it is: only a
    trace, an info starting with format= and <pid>.<n> directories, goes."""
    target = tmp_path / "trace"
    if what == "file":
        target.write_text("mine\n")
    else:
        target.mkdir()
        (target / "info").write_text("notes\n" if what == "no-format" else "format=1\n")
        (target / "1.0").mkdir()
        if what in ("folder", "extra-file"):
            (target / "thesis.tex").write_text("mine\n")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    p = run([FTPAD_BIN, "record", "--force", "-o", target, "--", "sh", "-c", "echo ran"],
            check=False)
    assert p.returncode == 1 and "is not an ftpad trace" in p.stderr, p.stderr
    assert "ran" not in p.stdout
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("where", [".", "..", "here"])
def test_output_holding_the_cwd_is_refused(prog, tmp_path, where):
    """-o naming the working directory or a parent of it is refused before
    the program runs, with or without --force."""
    cwd = tmp_path / "here"
    cwd.mkdir()
    (cwd / "mine").write_text("x")
    out = str(cwd) if where == "here" else where
    for opts in ([], ["--force"]):
        p = run([FTPAD_BIN, "record", *opts, "-o", out, "--", "sh", "-c", "echo ran"],
                check=False, cwd=cwd)
        assert p.returncode == 1 and "is the current directory or holds it" in p.stderr
        assert "ran" not in p.stdout
    assert sorted(p.name for p in cwd.iterdir()) == ["mine"]


@pytest.mark.parametrize("early", [False, True], ids=["late", "early"])
def test_early_and_late_start_record_the_same(prog, tmp_path, monkeypatch, early):
    monkeypatch.setenv("PROG_CTOR", "9")
    p, trace, (_, _, events, dropped, _) = record(prog, tmp_path, "count", "5",
                                                  opts=["--early"] if early else [])
    [image] = trace.images.values()
    [tid] = image.threads
    names = [image.sites[s][3] for _, k, s, _ in image.threads[tid] if k == "entry"]
    # libftpad.so's constructor runs before the program's: with --early
    # the recorder takes over from early tracing right before main instead.
    ctor = ["before_main"] + ["mid", "leaf"] * 9
    assert names == ctor + ["main"] + ["mid", "leaf"] * 5 + ["report"]
    assert counts(p.stdout)[0] == {"leaf": 14, "mid": 14} and dropped == 0
    times = [t for t, *_ in image.threads[tid]]
    assert times == sorted(times)


def test_filter_and_notrace(prog, tmp_path):
    p, trace, (sites, enabled, *_) = record(prog, tmp_path, "count", "10",
                                            opts=["-F", "*", "-N", "leaf"])
    [image] = trace.images.values()
    assert image.calls() == {"before_main": 1, "main": 1, "mid": 10, "report": 1} and enabled == sites - 1


@pytest.mark.parametrize("glob, chosen", [
    ("mid", {"mid"}),        # a glob without special characters: the name itself,
    ("mi", set()),           # ... not the names it begins
    ("m?d", {"mid"}),
    ("[m]id", {"mid"}),      # special at once: no literal head
    ("*id", {"mid"}),
    ("mid*", {"mid"}),
    ("m\\id", {"mid"}),      # an escaped plain character ends the literal head
    ("lea[f]", {"leaf"}),
], ids=["literal", "not-a-prefix", "question", "bracket-first", "star-first", "star-last",
        "escape", "bracket-last"])
def test_filter_globs_match_as_fnmatch(prog, tmp_path, glob, chosen):
    """-F GLOB matches a name as fnmatch() does (filter.c compares the
    glob's literal head first)."""
    p, trace, _ = record(prog, tmp_path, "count", "3", opts=["-F", glob])
    [image] = trace.images.values()
    assert set(image.calls()) == chosen


def test_aarch64_under_qemu(tmp_path):
    if not A64_PLUGIN.exists() or not A64_LIB.exists():
        pytest.fail(f"{A64_PLUGIN} or {A64_LIB} is missing: run `make` first")
    exe = tmp_path / "prog"
    run(["aarch64-linux-gnu-gcc-12", "-O2", f"-fplugin={A64_PLUGIN}", "-static", "-o", exe,
         SRC / "prog.c", "-Wl,--undefined=ftpad_register_ops", A64_LIB, "-lpthread"])
    out = tmp_path / "trace"
    out.mkdir()
    p = run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", exe, "count", "500"], check=False,
            env={**os.environ, "FTPAD_RECORD": str(out)})
    assert p.returncode == 7
    own = counts(p.stdout)[0]
    trace = Trace(out, arch=2)
    assert trace.info["arch"] == ["aarch64"] and trace.info["clock"] == ["cntvct"]
    [image] = trace.images.values()
    calls = image.calls()
    assert (calls["leaf"], calls["mid"]) == (own["leaf"], own["mid"]) == (500, 500)
    # Started with FTPAD_RECORD alone, the library writes info's format line
    # itself, so the viewers read the directory like one `ftpad record` made.
    assert trace.info["format"] == ["2"]
    report = run([FTPAD_BIN, "report", out]).stdout
    assert re.search(rf"\s{own['leaf']}\s+leaf \(entry only\)$", report, re.M), report


A64_SO = BUILD / "runtime" / "aarch64" / "libftpad.so"
QEMU = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]


@pytest.fixture(scope="module")
def a64_prog(tmp_path_factory):
    """prog.c for aarch64 with exit sites, linked dynamically, so that
    libftpad.so preloaded under qemu-aarch64 interposes its hooks (under
    GLIBC_2.17, aarch64's version of them)."""
    if not A64_PLUGIN.exists() or not A64_SO.exists():
        pytest.fail(f"{A64_PLUGIN} or {A64_SO} is missing: run `make` first")
    exe = tmp_path_factory.mktemp("record-a64") / "prog"
    run(["aarch64-linux-gnu-gcc-12", "-O2", f"-fplugin={A64_PLUGIN}",
         "-fplugin-arg-ftpad-exit=1", "-o", exe, SRC / "prog.c", "-lpthread", "-ldl"])
    return exe


def record_a64(exe, tmp_path, *args):
    """EXE recorded under qemu-aarch64 with FTPAD_RECORD alone (qemu-user
    cannot run `ftpad record`'s exec of an aarch64 program): the run and
    its trace.  Output and status as without libftpad."""
    out = tmp_path / "trace"
    out.mkdir()
    p = run([*QEMU, "-E", f"LD_PRELOAD={A64_SO}", "-E", f"FTPAD_RECORD={out}", exe, *args],
            check=False, cwd=tmp_path)
    plain = run([*QEMU, exe, *args], check=False, cwd=tmp_path)
    assert (p.stdout, p.returncode) == (plain.stdout, plain.returncode)
    [image] = Trace(out, arch=2).images.values()
    return p, image


def test_aarch64_signal_handlers_are_bracketed(a64_prog, tmp_path):
    """sighooks.c on aarch64: each handler's calls between its SIGNAL and
    SIGRETURN marks, whose sp is below the interrupted frame's and above
    the handler's (on_usr1 and on_usr2 end in tail calls here); and a
    query of sigaction still gets the program's own handler (usr1_ok,
    query_ok)."""
    p, image = record_a64(a64_prog, tmp_path, "signal")
    assert counts(p.stdout) == [{"usr1_ok": 1, "query_ok": 1}, {"leaf": 4, "mid": 1}]
    [events] = image.threads.values()
    named = [(k, image.sites[s][3] if k in ("entry", "exit", "tail-exit") else s, sp)
             for _, k, s, sp in events]
    seen = [(k, what) for k, what, _ in named]
    usr1 = [("entry", "on_usr1"), ("entry", "leaf"), ("exit", "leaf"), ("entry", "leaf"),
            ("exit", "leaf"), ("tail-exit", "on_usr1"), ("entry", "leaf"), ("exit", "leaf")]
    usr2 = [("entry", "on_usr2"), ("tail-exit", "on_usr2"), ("entry", "mid"),
            ("entry", "leaf"), ("exit", "leaf"), ("exit", "mid")]
    assert seen == [("entry", "before_main"), ("exit", "before_main"), ("entry", "main"),
                    ("signal", 10), *usr1, ("sigreturn", 10),
                    ("signal", 12), *usr2, ("sigreturn", 12),
                    ("entry", "report"), ("tail-exit", "report"), ("exit", "main")]
    main_sp = named[2][2]
    marks = [i for i, (k, _, _) in enumerate(named) if k in ("signal", "sigreturn")]
    for start, end in zip(marks[::2], marks[1::2]):
        mark_sp = named[start][2]
        assert named[end][2] == mark_sp < main_sp
        assert all(sp < mark_sp for _, _, sp in named[start + 1:end])
    said = run([FTPAD_BIN, "replay", tmp_path / "trace"]).stdout
    assert "unwound" not in said and "without a signal" not in said, said


@pytest.mark.parametrize("how,status", [("_exit", 5), ("_Exit", 6)])
def test_aarch64_exit_without_destructors_keeps_every_event(a64_prog, tmp_path, how, status):
    """exechooks.c on aarch64: _exit and _Exit end the trace first, so the
    last buffers and the image's totals are written."""
    p, image = record_a64(a64_prog, tmp_path, how, "50")
    assert p.returncode == status
    own = counts(p.stdout)[0]
    calls = image.calls()
    assert (calls["mid"], calls["leaf"]) == (own["mid"], own["leaf"]) == (50, 50)
    assert image.kv["events"] == [str(image.events())] and image.kv["dropped"] == ["0"]


@pytest.mark.parametrize("how,sig", [("segv", signal.SIGSEGV), ("abort", signal.SIGABRT)])
def test_aarch64_crash_keeps_its_events(a64_prog, tmp_path, how, sig):
    """end_by_signal() on aarch64, where every event takes the C path."""
    p, image = record_a64(a64_prog, tmp_path, "crash", how, "50")
    assert p.returncode == -sig
    calls = image.calls()
    assert (calls["mid"], calls["leaf"], calls["crash"]) == (50, 50, 1)
    assert image.kv["events"] == [str(image.events())] and image.kv["dropped"] == ["0"]
