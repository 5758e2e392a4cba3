# SPDX-License-Identifier: MIT
"""recordmcount-ng's command line: Linux 6.12 scripts/recordmcount's
`[-w] file.o...` plus --dry-run, --help and --version, with honest exit
statuses.  What it does to objects is test_recordmcount.py."""
import re

import pytest

import ftpadtest

# The one place the version is written down.
VERSION = re.search(r"project\(ftpad VERSION (\S+)",
                    (ftpadtest.ROOT / "CMakeLists.txt").read_text()).group(1)

USAGE = "usage: recordmcount-ng [-w] file.o..."
NOT_ELF = "{}: error: recordmcount-ng: not an ELF file"
NO_FILE = "{}: error: recordmcount-ng: cannot open: No such file or directory"


def rmc_run(rmc, *args, cwd=None):
    return ftpadtest.run([rmc, *args], check=False, cwd=cwd)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_goes_to_stdout_and_exits_0(rmc, flag):
    p = rmc_run(rmc, flag)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(USAGE + "\n")
    for option in ("-w", "--dry-run", "--help", "--version"):
        assert option in p.stdout
    assert p.stderr == ""


def test_help_wins_over_files(rmc, tmp_path):
    p = rmc_run(rmc, "--help", tmp_path / "a.o")
    assert p.returncode == 0
    assert p.stdout.startswith(USAGE)


def test_version(rmc):
    p = rmc_run(rmc, "--version")
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"recordmcount-ng (ftpad) {VERSION}\n"
    assert p.stderr == ""


@pytest.mark.parametrize("args", [[], ["-w"], ["--"], ["-w", "--"]],
                         ids=["nothing", "only-w", "only-dashdash", "w-dashdash"])
def test_no_files_is_a_usage_error(rmc, args):
    p = rmc_run(rmc, *args)
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr.startswith(USAGE + "\n")


@pytest.mark.parametrize("args, spelled", [
    (["-x", "a.o"], "-x"),
    (["--frob", "a.o"], "--frob"),
    (["-wx", "a.o"], "-x"),          # grouped short options, as getopt
    (["a.o", "-q"], "-q"),           # options after files, as GNU getopt
    (["--help=yes"], "--help=yes"),  # no option takes a value
    (["--w", "a.o"], "--w"),         # -w has no long spelling
])
def test_unknown_option(rmc, args, spelled):
    p = rmc_run(rmc, *args)
    assert p.returncode == 2
    assert p.stdout == ""
    first, rest = p.stderr.split("\n", 1)
    assert first == f"recordmcount-ng: error: unknown option '{spelled}'"
    assert rest.startswith(USAGE + "\n")
    assert "a.o" not in p.stderr  # rejected before any file


@pytest.mark.parametrize("args, errors", [
    (["a.o"], [NOT_ELF.format("a.o")]),
    (["-w", "a.o", "b.o"], [NOT_ELF.format("a.o"), NO_FILE.format("b.o")]),  # every file, in order
    (["a.o", "-w"], [NOT_ELF.format("a.o")]),          # options anywhere
    (["--", "-w"], [NO_FILE.format("-w")]),             # after --, a file
    (["-"], [NO_FILE.format("-")]),                     # "-" is a file, as with getopt
    (["--dry-run", "a.o"], [NOT_ELF.format("a.o")]),
])
def test_every_file_is_processed_and_named(rmc, tmp_path, args, errors):
    """Each bad file is an error naming it, processing goes on after it, the
    status is 1, and the file is left untouched."""
    obj = tmp_path / "a.o"
    obj.write_bytes(b"not an object")
    p = rmc_run(rmc, *args, cwd=tmp_path)
    assert p.returncode == 1
    assert p.stdout == ""
    assert p.stderr.splitlines() == errors
    assert obj.read_bytes() == b"not an object"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.o"]


@pytest.mark.parametrize("name", ["kernel/trace/ftrace.o", "./ftrace.o"])
def test_ftrace_o_is_skipped_like_linux(rmc, tmp_path, name):
    """Linux skips any path ending in /ftrace.o without looking at it."""
    p = rmc_run(rmc, name, cwd=tmp_path)  # it does not even exist
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
