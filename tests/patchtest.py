# SPDX-License-Identifier: MIT
"""Shared helpers for the tests of `ftpad patch`: tests/src/patch/server.c
and its patches built, the server driven through its stdin, and the tool
run against it."""
import os
import re
import subprocess
import time

from attachtest import attach_program, thread_states
from ftpadtest import FTPAD_BIN, INCLUDE, TEST_SRC, run

SRC = TEST_SRC / "patch"
PATCHES = ("patch1.c", "patch2.cc", "missing.c", "unpadded.c", "blocked.c")


def build_server(tmp_path_factory):
    """server and its patches (NAME.so) in one folder only root and its
    owner may write; that folder."""
    exe = attach_program(tmp_path_factory, SRC / "server.c", "server")
    out = exe.parent
    os.chmod(out, 0o755)
    for name in PATCHES:
        cc = "g++" if name.endswith(".cc") else "gcc"
        run([cc, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", f"-I{INCLUDE}",
             "-o", out / (name.split(".")[0] + ".so"), SRC / name])
    return out


class Server:
    def __init__(self, exe, *args):
        self.p = subprocess.Popen([exe, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        assert self.p.stdout.readline().startswith("ready")
        self.pid = self.p.pid

    def expect(self, what):
        self.p.stdin.write(f"expect {what}\n")
        self.p.stdin.flush()
        assert self.p.stdout.readline() == "ok\n"

    def bad(self):
        """The count of unexpected results so far."""
        self.p.stdin.write("bad\n")
        self.p.stdin.flush()
        return int(self.p.stdout.readline().split()[1])

    def quit(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.flush()
        out = self.p.stdout.read()
        assert self.p.wait(timeout=30) == 0, out
        return out

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def patch(pid, *args, check=True):
    p = subprocess.run([str(FTPAD_BIN), "patch", str(pid), *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def traced(pid):
    """Whether any thread of PID is traced (the main thread's TracerPid
    does not say it for the others)."""
    for tid in thread_states(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                if int(re.search(r"TracerPid:\s+(\d+)", f.read())[1]):
                    return True
        except (FileNotFoundError, ProcessLookupError):
            pass
    return False


def tools_on(pid):
    """The `ftpad patch PID` processes still running, a killed tool's
    guardian among them (a fork of the tool: the same command line)."""
    mine = ["patch", str(pid)]
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError, PermissionError):
            continue
        if argv[0].endswith("/ftpad") and argv[1:3] == mine:
            found.append(int(entry))
    return found


def wait_untraced(pid, what):
    """No `ftpad patch` left on PID, every thread of it running and none
    traced, within 10 s: a tool killed lets its stopped threads go, and
    its guardian holds the loader stub's thread a moment."""
    for _ in range(1000):
        if not tools_on(pid) and not set(thread_states(pid).values()) & {"t", "T"} \
                and not traced(pid):
            return
        time.sleep(0.01)
    raise AssertionError(f"{what}: threads left stopped or traced ({thread_states(pid)}), "
                         f"or tools left ({tools_on(pid)})")
