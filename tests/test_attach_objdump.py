# SPDX-License-Identifier: MIT
"""A real program attached to and detached from 100 times in a row: GNU
objdump 2.40 (Debian's binutils-source), built with the GCC plugin at -O2
with exit sites and not linked with libftpad, disassembling libc with
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
with an un-attached run on the same name.

Building objdump alone (libiberty, zlib, bfd, opcodes, libsframe, then
objdump) takes minutes, so it is kept in /var/cache/ftpad/attach-objdump
(FTPAD_ATTACH_CACHE overrides it), under a key of the plugin's bytes, the
compiler's version and the configure flags: a new plugin builds anew
(14 minutes on the shared 2-core host, then about 75 s a run)."""
import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from attachtest import Attach, assert_text_unchanged, require_attach, text_snapshot
from ftpadtest import PLUGIN, run
from test_binutils_build import CONFIGURE, VERSION, source  # noqa: F401 (a fixture)
from test_record import Trace

CACHE = pathlib.Path(os.environ.get("FTPAD_ATTACH_CACHE", "/var/cache/ftpad/attach-objdump"))
CYCLES = 100
# libctf is left out: objdump builds without it, and it is one more library.
FLAGS = [*CONFIGURE, "--disable-libctf"]
CFLAGS = "-O2"
INPUT = pathlib.Path("/usr/lib/x86_64-linux-gnu/libc.so.6")
TINY = "int tiny(int x) { return x + 1; }\n"


def sha256_file(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def build_objdump(src, out):
    """objdump alone, built with the plugin and exit sites in OUT."""
    cc = f"gcc -fplugin={PLUGIN} -fplugin-arg-ftpad-exit=1"
    log = out / "build.log"
    steps = [[src / "configure", *FLAGS, f"CC={cc}", f"CFLAGS={CFLAGS}"],
             ["make", "-j2", "all-libiberty", "all-zlib", "all-bfd", "all-opcodes",
              "all-libsframe"],
             ["make", "-j2", "configure-binutils"],
             ["make", "-j2", "-C", "binutils", "objdump"]]
    with open(log, "w") as f:
        for cmd in steps:
            p = subprocess.run([str(c) for c in cmd], cwd=out, stdout=f, stderr=subprocess.STDOUT)
            if p.returncode:
                pytest.fail(f"{cmd[0]} failed building objdump:\n{log.read_text()[-4000:]}")
    return out / "binutils" / "objdump"


@pytest.fixture(scope="module")
def objdump(source):  # noqa: F811 (the fixture imported above)
    require_attach()
    gcc = run(["gcc", "--version"]).stdout.splitlines()[0]
    key = "\n".join([f"binutils={VERSION}", f"plugin={sha256_file(PLUGIN)}", f"gcc={gcc}",
                     "flags=" + " ".join(FLAGS), f"cflags={CFLAGS}"])
    dst = CACHE / hashlib.sha256(key.encode()).hexdigest()[:16]
    if not (dst / "objdump").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = pathlib.Path(tempfile.mkdtemp(prefix="build-", dir=CACHE))
        try:
            built = build_objdump(source, tmp)
            dst.mkdir(exist_ok=True)
            shutil.copy(built, dst / "objdump.tmp")
            (dst / "key").write_text(key + "\n")
            os.rename(dst / "objdump.tmp", dst / "objdump")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dst / "objdump"


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
