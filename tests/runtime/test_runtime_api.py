# SPDX-License-Identifier: MIT
"""The parts of the libftpad API a callback uses beyond reading arguments:
notrace lists, changing arguments, the entry stack pointer, redirecting a
function with FTPAD_OPS_FL_IPMODIFY (live patching) and its one-per-function
rule, and the calls refused from inside a callback.  tests/src/runtime/api.c is
compiled with the GCC plugin and prints what it saw."""
import errno
import re

from ftpadtest import BUILD, INCLUDE, ROOT, TEST_SRC, run

SRC = TEST_SRC / "runtime"
LIBDIR = BUILD / "runtime"

# What tests/src/runtime/api.c prints, line by line.
EXPECTED = [
    # g is on the notrace list; then f joins it, so the second f and g
    # calls are seen by nobody.
    "notrace: f h ",
    # f(10, 3) runs as f(10, 1); h's 7th argument, on the stack, is 1000.
    "set_argument: f(10, 3)=9 h(1..7)=1021",
    "restored: f(10, 3)=7 h(1..7)=28",
    # f redirected to g, which runs (and is traced) as if called directly.
    "redirected: f(6, 7)=42 set_ip=0 seen=g ",
    f"second ipmodify: {-errno.EBUSY}",
    f"refilter onto f: {-errno.EBUSY}",
    "restored: f(6, 7)=-1",
    f"without IPMODIFY: f(6, 7)=-1 set_ip={-errno.EPERM}",
    f"unknown flag: {-errno.EINVAL}",
    "strerror: not allowed from inside a callback | cannot write code: both /proc/self/mem "
    "and mprotect were refused (proc_mem.force_override, MDWE, mseal or PaX?)",
    f"from a callback: {-errno.EDEADLK}",
    # The callback calls f, which it traces: with FTPAD_OPS_FL_RECURSION
    # it sees 2, not 100.
    "recursion: 2 callbacks for 2 calls",
    # Without it, as in Linux, its own calls reach it (it stops at depth 3).
    "no recursion flag: 8 callbacks for 2 calls",
    # ftpad_recursion_trylock(): the guard the flag uses, by hand.
    "trylock: 2 callbacks, 2 blocked",
    # A signal handler that interrupts a callback and calls f: seen
    # without the flag; with it, dropped as recursion (unlike Linux's
    # per-context guard: docs/runtime.md).
    "signal in a callback: 2 callbacks",
    "signal in a protected callback: 1 callbacks",
]


def test_api_from_callbacks(plugin, libftpad, tmp_path):
    exe = tmp_path / "api"
    run(["gcc", "-O2", "-g", "-Wall", "-Wextra", "-Werror", f"-fplugin={plugin}",
         f"-I{INCLUDE}", SRC / "api.c", f"-L{LIBDIR}", "-lftpad", f"-Wl,-rpath,{LIBDIR}",
         "-o", exe])
    p = run([exe])
    assert p.stdout.splitlines() == EXPECTED
    assert p.stderr.count("f: already redirected by another IPMODIFY ops") == 2


def test_runtime_doc_example_builds_and_runs(plugin, libftpad, tmp_path):
    """docs/runtime.md's complete example, compiled with -Wall -Werror and
    run: every call in it must exist and succeed (it exits 1 otherwise)."""
    doc = (ROOT / "docs" / "runtime.md").read_text()
    api = doc[doc.index("## The API"):]
    (tmp_path / "example.c").write_text(re.search(r"```c\n(.*?)```", api, re.S).group(1))
    (tmp_path / "hashes.c").write_text(
        "unsigned long old_hash(const char *s) { return (unsigned long)*s; }\n"
        "unsigned long new_hash(const char *s) { return 2ul * (unsigned long)*s; }\n")
    exe = tmp_path / "example"
    run(["gcc", "-O2", "-Wall", "-Werror", "-Wno-unused-parameter", f"-fplugin={plugin}",
         f"-I{INCLUDE}", tmp_path / "example.c", tmp_path / "hashes.c", f"-L{LIBDIR}",
         "-lftpad", f"-Wl,-rpath,{LIBDIR}", "-o", exe])
    assert run([exe]).stdout == "0 parse calls\n"
