# SPDX-License-Identifier: MIT
"""A real program attached to and detached from 100 times in a row: GNU
objdump 2.40 (Debian's binutils-source), built with the GCC plugin and exit
sites and not linked with libftpad (test_objdump_trace.py's build, made once
a session by conftest.py's `objdumps`), disassembling libc with
`objdump -d` over and over in one process.

Each cycle attaches `ftpad attach` (every function; --graph every other
time), records for 50 ms, detaches and finds events in the trace; after each, no thread is left stopped or
traced and the process's text is byte for byte as before (every range
that was executable, read through /proc/PID/mem).  At the end its output
equals that of un-attached runs, file by file, and it exits 0.

objdump is given the same input name many times, more than it can reach in
100 cycles; once they are done, a tiny object is renamed over that name, so
that the rest goes fast.  Its output is then some copies of the big
input's disassembly followed by copies of the tiny one's, each compared
with an un-attached run on the same name."""
import hashlib
import os
import pathlib
import shutil
import subprocess
import threading
import time

import pytest

from attachtest import Attach, assert_text_unchanged, require_attach, text_snapshot
from ftpadtest import run
from test_record import Trace

CYCLES = 100
INPUT = pathlib.Path("/usr/lib/x86_64-linux-gnu/libc.so.6")
TINY = "int tiny(int x) { return x + 1; }\n"


@pytest.fixture(scope="module")
def objdump(objdumps):
    require_attach()
    return objdumps[0]


class Reader(threading.Thread):
    """Reads objdump's output as it comes and cuts it into one part per
    input file (each starts with "\\nNAME:     file format"), keeping only
    each part's hash: the whole output is gigabytes."""

    def __init__(self, stream, name):
        super().__init__(daemon=True)
        self.stream, self.marker = stream, f"\n{name}:     file format".encode()
        self.parts = []
        self.first_output = threading.Event()

    def run(self):
        h, size, carry = hashlib.sha256(), 0, b""
        keep = len(self.marker) - 1  # bytes that may begin a marker
        while True:
            chunk = self.stream.read(1 << 20)
            if not chunk:
                break
            self.first_output.set()
            data, pos, search = carry + chunk, 0, 0
            while True:
                i = data.find(self.marker, search)
                if i < 0:
                    break
                h.update(data[pos:i])
                size += i - pos
                if size:
                    self.parts.append(h.hexdigest())
                h, size = hashlib.sha256(), 0
                pos, search = i, i + 1
            end = max(pos, len(data) - keep)
            h.update(data[pos:end])
            size += end - pos
            carry = data[end:]
        h.update(carry)
        if size + len(carry):
            self.parts.append(h.hexdigest())


def disassembly(objdump, path):
    """The hash of `objdump -d PATH`, un-attached."""
    p = subprocess.run([str(objdump), "-d", str(path)], stdout=subprocess.PIPE, check=True)
    return hashlib.sha256(p.stdout).hexdigest()


def test_attach_and_detach_100_times(objdump, tmp_path):
    name = tmp_path / "input"
    shutil.copy(INPUT, name)
    big = disassembly(objdump, name)
    copies = 2000
    err = tmp_path / "objdump.err"
    with open(err, "w") as f:
        p = subprocess.Popen([str(objdump), "-d", *[str(name)] * copies],
                             stdout=subprocess.PIPE, stderr=f)
    reader = Reader(p.stdout, name)
    reader.start()
    try:
        # Its text once it runs main (the loader is done): its first output.
        assert reader.first_output.wait(timeout=600), "objdump printed nothing"
        text = text_snapshot(p.pid)
        for cycle in range(CYCLES):
            assert p.poll() is None, f"objdump ended after {cycle} cycles: give it more copies"
            out = tmp_path / f"trace{cycle}"
            attach = Attach(p.pid, out, *(["--graph"] if cycle % 2 else [])).wait_started()
            time.sleep(0.05)  # calls enough to fill some buffers
            attach.finish()
            trace = Trace(out)
            assert int(trace.info["events"][-1]) > 0, attach.output
            with open(f"/proc/{p.pid}/status") as f:
                assert "TracerPid:\t0\n" in f.read()
            assert_text_unchanged(p.pid, text)
            shutil.rmtree(out)
        # The rest of the copies: a tiny object under the same name.
        run(["gcc", "-c", "-x", "c", "-", "-o", tmp_path / "tiny.o"], input=TINY)
        os.rename(tmp_path / "tiny.o", name)
        p.wait(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    reader.join()
    assert p.returncode == 0, err.read_text()
    tiny = disassembly(objdump, name)
    parts = reader.parts
    n = parts.index(tiny) if tiny in parts else len(parts)
    assert len(parts) == copies and n >= 1
    assert parts == [big] * n + [tiny] * (copies - n)
