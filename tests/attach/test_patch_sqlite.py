# SPDX-License-Identifier: MIT
"""`ftpad patch` on a real program, the way libpulp is used: SQLite's
shell (the amalgamation of npm's `sqlite3` package, tests/sqlite.py,
built at -O0 with the plugin: about 30 s on the shared 2-core machine,
the most of this file's cost) serves queries from a client thread while a
static function of the library, versionFunc() (SQL's sqlite_version()),
is replaced by tests/src/patch/sqlite_version.c and put back, three times.
Every answer's data is right, its version the old or the patched one;
every query sent after `ftpad patch` returned (and answered before the
next command started) gets the patched one, after the revert the old one; at the end the text is byte for byte as before
and the shell quits with status 0.  x86_64, natively."""
import os
import subprocess
import threading
import time

import pytest

from attachtest import assert_text_unchanged, require_attach, text_snapshot
from ftpadtest import INCLUDE, PLUGIN, TEST_SRC
from patchtest import patch
from sqlite import build_shells

ROWS = 20000
CYCLES = 3
QUERY = "SELECT sqlite_version(), count(*), sum(x) FROM t WHERE x % 7 = 3;\n"
DATA = f"{len(range(3, ROWS + 1, 7))}|{sum(range(3, ROWS + 1, 7))}"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    require_attach()
    out = tmp_path_factory.mktemp("sqlite")
    os.chmod(out, 0o755)  # ftpad patch refuses a patch others may write
    shell = build_shells(out, {"padded": ["gcc", "-O0", f"-fplugin={PLUGIN}"]})["padded"]
    fix = out / "version_fix.so"
    subprocess.run(["gcc", "-O2", "-Wall", "-Werror", "-shared", "-fPIC", f"-I{INCLUDE}",
                    "-o", str(fix), str(TEST_SRC / "patch" / "sqlite_version.c")], check=True)
    return shell, fix


class Client:
    """Queries sent one after the other, each answer kept with the
    CLOCK_MONOTONIC times its query was sent and it came back."""

    def __init__(self, shell):
        self.p = subprocess.Popen([str(shell), ":memory:"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.p.stdin.write(f"CREATE TABLE t(x INTEGER);\n"
                           f"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
                           f"WHERE i < {ROWS}) INSERT INTO t SELECT i FROM c;\n")
        self.answers = []
        self.stop = False
        self.version = self.ask()[2].split("|")[0]
        self.thread = threading.Thread(target=self.serve)
        self.thread.start()

    def ask(self):
        sent = time.monotonic()
        self.p.stdin.write(QUERY)
        self.p.stdin.flush()
        answer = self.p.stdout.readline().rstrip("\n")
        return sent, time.monotonic(), answer

    def serve(self):
        while not self.stop:
            self.answers.append(self.ask())

    def quit(self):
        self.stop = True
        self.thread.join()
        self.p.stdin.write(".quit\n")
        self.p.stdin.close()
        return self.p.wait(timeout=30)


def test_patch_sqlite_while_it_serves(built):
    shell, fix = built
    client = Client(shell)
    try:
        old = client.version
        new = f"{old} (patched)"
        before = text_snapshot(client.p.pid)
        # (from, to, version): queries sent after a command returned and
        # answered before the next one started get that version; others,
        # either.
        steady = [(0, None, old)]
        for _ in range(CYCLES):
            for args, version in (([fix], new), (["--revert", fix], old)):
                time.sleep(0.2)
                steady[-1] = steady[-1][:1] + (time.monotonic(),) + steady[-1][2:]
                patch(client.p.pid, *args)
                steady.append((time.monotonic(), None, version))
        time.sleep(0.2)
        assert_text_unchanged(client.p.pid, before)
    finally:
        status = client.quit()
    assert status == 0
    seen = set()
    for sent, received, answer in client.answers:
        version, data = answer.rsplit("|", 2)[0], "|".join(answer.rsplit("|", 2)[1:])
        assert data == DATA, answer
        assert version in (old, new), answer
        for lo, hi, expected in steady:
            if lo <= sent and (hi is None or received < hi):
                assert version == expected, (sent, answer, steady)
        seen.add(version)
    assert seen == {old, new}, seen
