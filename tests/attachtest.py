# SPDX-License-Identifier: MIT
"""Shared helpers for the tests of `ftpad attach`: running the tool against
a live process, and reading that process's text through /proc/PID/mem."""
import os
import platform
import re
import signal
import subprocess

import pytest

from ftpadtest import FTPAD_BIN, LIBFTPAD_SO, PLUGIN, run

# What `ftpad attach` prints once the process's control thread has said
# "started" (docs/design.md): the chosen sites are enabled.
STARTED = re.compile(r"^ftpad: attached to process \d+")


def require_attach():
    if platform.machine() != "x86_64":
        # aarch64's is tested in the arm64 QEMU machine: test_attach_aarch64.py.
        pytest.skip("ftpad attach is tested natively on x86_64 only")
    for p in (PLUGIN, FTPAD_BIN, LIBFTPAD_SO):
        if not p.exists():
            pytest.fail(f"{p} is missing: run `make` first")


def attach_program(tmp_path_factory, src, name):
    """SRC built with the plugin and exit sites, and not linked with
    libftpad: a program for attach to get into.  Its path."""
    require_attach()
    out = tmp_path_factory.mktemp(name) / name
    run(["gcc", "-O2", "-Wall", "-Werror", f"-fplugin={PLUGIN}", "-fplugin-arg-ftpad-exit=1",
         "-pthread", "-o", out, src])
    return out


def exec_ranges(pid):
    """(start, end, path) of every executable mapping of process PID."""
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if "x" in fields[1]:
                start, end = (int(a, 16) for a in fields[0].split("-"))
                path = fields[5].strip() if len(fields) > 5 else ""
                out.append((start, end, path))
    return out


def read_ranges(pid, ranges):
    """{range: its bytes now}, read through /proc/PID/mem; [vsyscall] and
    other ranges the kernel will not read are left out."""
    out = {}
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for r in ranges:
            if r[0] >= 1 << 63:   # [vsyscall]: not readable, and past off_t
                continue
            try:
                mem.seek(r[0])
                out[r] = mem.read(r[1] - r[0])
            except OSError:
                continue
    return out


def text_snapshot(pid):
    """Every executable mapping's bytes, by range."""
    return read_ranges(pid, exec_ranges(pid))


def assert_text_unchanged(pid, before):
    """Every range that was executable in BEFORE holds the same bytes now."""
    after = read_ranges(pid, list(before))
    assert set(after) == set(before), "an executable range can no longer be read"
    changed = [f"{r[2] or 'anon'} {r[0]:#x}-{r[1]:#x}" for r in before
               if after[r] != before[r]]
    assert not changed, f"text changed in {changed}"


def libftpad_maps(pid):
    """The distinct libftpad files process PID has mapped."""
    with open(f"/proc/{pid}/maps") as f:
        return {line.split()[-1] for line in f if "libftpad" in line}


def thread_states(pid):
    """{tid: state letter} of process PID's threads (T/t: stopped)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                out[int(tid)] = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended since the listing (the servers make and end threads)
    return out


class Attach:
    """`ftpad attach PID OPTS -o OUT` running in the background."""

    def __init__(self, pid, out, *opts):
        self.cmd = [str(FTPAD_BIN), "attach", str(pid), *map(str, opts), "-o", str(out)]
        self.p = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
        self.output = ""

    def wait_started(self):
        """Read the tool's output until it says the sites are enabled."""
        for line in self.p.stdout:
            self.output += line
            if STARTED.search(line):
                return self
        self.p.wait()
        raise AssertionError(f"{' '.join(self.cmd)} exited {self.p.returncode} before "
                             f"starting:\n{self.output}")

    def finish(self, interrupt=True, timeout=120):
        """Ctrl-C the tool (unless it ends by itself: --duration) and wait
        for it; its whole output.  It must exit 0."""
        if interrupt:
            self.p.send_signal(signal.SIGINT)
        rest, _ = self.p.communicate(timeout=timeout)
        self.output += rest
        assert self.p.returncode == 0, (
            f"{' '.join(self.cmd)} exited {self.p.returncode}:\n{self.output}")
        return self.output

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.communicate()


class ReadyProcess:
    """A test program that prints "ready PID" once running, and at its
    stdin's end of file ends with "ok ..." and exit 0 once its own checks
    held."""

    def __init__(self, cmd, **kw):
        self.p = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  **kw)
        line = self.p.stdout.readline()
        m = re.match(r"ready (\d+)$", line)
        assert m, f"{cmd} did not start: {line!r} {'' if m else self.p.stderr.read()}"
        self.pid = int(m.group(1))

    def state(self):
        return open(f"/proc/{self.pid}/stat").read().rsplit(")", 1)[1].split()[0]

    def alive(self):
        return self.p.poll() is None

    def finish(self):
        """Its stdin closed: it must exit 0 with "ok"; its output."""
        out, err = self.p.communicate(timeout=60)
        assert self.p.returncode == 0 and out.startswith("ok "), (self.p.returncode, out, err)
        return out

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.communicate()
