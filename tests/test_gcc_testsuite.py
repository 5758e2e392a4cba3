# SPDX-License-Identifier: MIT
"""GCC's own tests for patchable function entries, taken from Debian's
gcc-12-source at test time (never copied here) and run with the plugin
loaded.

Where every function of a test carries its own patchable_function_entry
attribute, the user's attribute wins (docs/gcc-plugin.md), so the test's own
dg-final checks must still pass: that exercises the plugin's hand-back to
GCC's hook before and after the label, ENDBR and BTI included.  Where a test
pads through -fpatchable-function-entry alone, the plugin's layout replaces
GCC's for the functions it pads: there the test must pass without the plugin
and, with it, the function must carry an ftpad record and none of GCC's
NOPs.

GCC's layouts with one or three NOPs cannot be given to the plugin as
"equal counts": its sites have a fixed size (one 5-byte NOP, or mov x9, x30
plus a NOP).  Byte equality with GCC where the layouts coincide is
tests/test_gcc_plugin_kernel.py."""
import pathlib
import re
import shlex
import subprocess

import pytest

from ftpadtest import A64_PLUGIN, PLUGIN, run

TARBALL = pathlib.Path("/usr/src/gcc-12/gcc-12.2.0-dfsg.tar.xz")
CACHE = pathlib.Path("/var/cache/ftpad/gcc-12.2.0-testsuite")
MEMBERS = ["c-c++-common/patchable_function_entry-*.c", "gcc.target/aarch64/pr92424-*.c",
           "gcc.target/i386/pr93492-*.c"]
X86 = ("gcc", PLUGIN)
A64 = ("aarch64-linux-gnu-gcc-12", A64_PLUGIN)
# Tests in which no function relies on the command line alone.
ATTRIBUTED = [("c-c++-common/patchable_function_entry-decl.c", X86),
              ("c-c++-common/patchable_function_entry-definition.c", X86),
              ("c-c++-common/patchable_function_entry-decl.c", A64),
              ("c-c++-common/patchable_function_entry-definition.c", A64),
              ("gcc.target/i386/pr93492-1.c", X86), ("gcc.target/i386/pr93492-2.c", X86),
              ("gcc.target/i386/pr93492-3.c", X86),
              ("gcc.target/aarch64/pr92424-1.c", A64), ("gcc.target/aarch64/pr92424-2.c", A64),
              ("gcc.target/aarch64/pr92424-3.c", A64)]
COMMAND_LINE_ONLY = [("c-c++-common/patchable_function_entry-default.c", X86, "f3"),
                     ("c-c++-common/patchable_function_entry-default.c", A64, "f3"),
                     ("gcc.target/i386/pr93492-4.c", X86, "foo")]
# -pg -mfentry wants the first instruction too: a function the plugin would
# pad is an error, one with its own attribute is left to GCC (pr93492-3).
CONFLICTS = [("gcc.target/i386/pr93492-5.c", "-pg -mfentry puts a call first")]
ERRORS = ["c-c++-common/patchable_function_entry-error-1.c",
          "c-c++-common/patchable_function_entry-error-2.c",
          "c-c++-common/patchable_function_entry-error-3.c"]


@pytest.fixture(scope="module")
def testsuite():
    """The test files, unpacked once per GCC version."""
    done = CACHE / ".complete"
    if not done.exists():
        if not TARBALL.exists():
            pytest.fail(f"{TARBALL} is missing: scripts/install-deps.sh installs gcc-12-source")
        CACHE.mkdir(parents=True, exist_ok=True)
        prefix = "gcc-12.2.0/gcc/testsuite/"
        subprocess.run(["tar", "xf", TARBALL, "-C", CACHE, "--strip-components=3",
                        "--wildcards", *[prefix + m for m in MEMBERS]], check=True)
        done.touch()
    return CACHE


def dg_options(source):
    m = re.search(r'dg-options "([^"]*)"', source)
    options = shlex.split(m.group(1)) if m else []
    # Debian's gcc makes PIE by default, where -pg calls __fentry__ through
    # the GOT; the tests expect the direct call of a non-PIE build.
    return options + ["-fno-pie"] if "-pg" in options else options


def tcl_string(s):
    """A Tcl double-quoted string's backslash escapes."""
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n"}.get(m.group(1), m.group(1)), s)


def function_bodies(asm):
    """{name: [instruction lines]} as GCC's check-function-bodies sees them:
    directives, local labels, comments and our inline asm markers are fluff."""
    bodies, name = {}, None
    for line in asm.splitlines():
        m = re.match(r"^([a-zA-Z_]\S+):$", line)
        if m:
            name = m.group(1)
            bodies[name] = []
        elif re.match(r"^\s*\.size", line):
            name = None
        elif name and not re.match(r"^\s*(?:\.|//|@|#|$)", line):
            bodies[name].append(line)
    return bodies


def expected_bodies(source):
    out = {}
    for block in re.findall(r"/\*\n(\*\*.*?)\*/", source, re.S):
        lines = [l[2:] for l in block.splitlines() if l.startswith("**")]
        out[lines[0].rstrip(":")] = lines[1:]
    return out


def check_dg_final(source, asm):
    """The test's dg-final directives that apply to our targets."""
    checked = 0
    for directive in re.findall(r"dg-final \{ (.*) \} \*/", source):
        if "alpha*-*-*" in directive and "!" not in directive:
            continue
        m = re.match(r'scan-assembler-times "(.*?)" (\d+)', directive)
        if m:
            count = len(re.findall(tcl_string(m.group(1)), asm))
            assert count == int(m.group(2)), f"{directive}: {count} matches"
        elif (m := re.match(r'scan-assembler "(.*)"', directive)):
            assert re.search(tcl_string(m.group(1)), asm, re.S), directive
        elif directive.startswith("check-function-bodies"):
            bodies = function_bodies(asm)
            for name, want in expected_bodies(source).items():
                got = bodies.get(name)
                assert got is not None and len(got) == len(want) and all(
                    re.fullmatch(w, g) for w, g in zip(want, got)), f"{name}: {got} != {want}"
        else:
            raise AssertionError(f"unhandled directive: {directive}")
        checked += 1
    assert checked, "no dg-final directive applied"


def compile_asm(tmp_path, path, target, with_plugin):
    cc, plugin = target
    out = tmp_path / (path.stem + (".plugin.s" if with_plugin else ".s"))
    flags = [f"-fplugin={plugin}"] if with_plugin else []
    run([cc, *dg_options(path.read_text()), *flags, "-S", path, "-o", out])
    return out.read_text()


@pytest.mark.parametrize("name,target", ATTRIBUTED,
                         ids=[f"{n}-{t[0].split('-')[0]}" for n, t in ATTRIBUTED])
def test_user_attributes_keep_gcc_semantics(tmp_path, plugin, testsuite, name, target):
    path = testsuite / name
    source = path.read_text()
    check_dg_final(source, compile_asm(tmp_path, path, target, False))
    asm = compile_asm(tmp_path, path, target, True)
    check_dg_final(source, asm)
    assert "__ftpad_sites" not in asm, "the user's attribute must win"


@pytest.mark.parametrize("name,target,function", COMMAND_LINE_ONLY,
                         ids=[f"{n}-{t[0].split('-')[0]}" for n, t, _ in COMMAND_LINE_ONLY])
def test_plugin_layout_replaces_command_line(tmp_path, plugin, testsuite, name, target, function):
    path = testsuite / name
    source = path.read_text()
    check_dg_final(source, compile_asm(tmp_path, path, target, False))
    asm = compile_asm(tmp_path, path, target, True)
    assert re.search(r"\.pushsection __ftpad_sites,.*," + function + r",", asm)
    assert "__patchable_function_entries" not in asm, "GCC's own pad is still there"


@pytest.mark.parametrize("name", ERRORS)
def test_bad_command_line_still_rejected(tmp_path, plugin, testsuite, name):
    """GCC's own argument errors are untouched by the plugin."""
    path = testsuite / name
    args = [*dg_options(path.read_text()), "-S", path, "-o", tmp_path / "x.s"]
    native = run(["gcc", *args], check=False)
    with_plugin = run(["gcc", f"-fplugin={PLUGIN}", *args], check=False)
    assert (native.returncode != 0) == (with_plugin.returncode != 0)
    if native.returncode:
        assert native.stderr.splitlines()[-1] in with_plugin.stderr


@pytest.mark.parametrize("name,message", CONFLICTS)
def test_conflicting_options(tmp_path, plugin, testsuite, name, message):
    path = testsuite / name
    p = run(["gcc", *dg_options(path.read_text()), f"-fplugin={PLUGIN}", "-S", path,
             "-o", tmp_path / "x.s"], check=False)
    assert p.returncode != 0 and message in p.stderr, p.stderr
