# SPDX-License-Identifier: MIT
import contextlib
import fcntl
import os
import pathlib
import shutil
import sys

import pytest

import ftpadtest

# The tests sit in one folder per area (plugins, recordmcount, runtime,
# trace, attach, kbuild, packaging, bench), and a few import another
# area's helpers (attach's option tests take trace's Trace reader).  Every
# area's folder is on the path from the start, so that such an import does
# not depend on the order in which pytest collects the folders.
for _area in sorted(pathlib.Path(__file__).resolve().parent.iterdir()):
    if _area.is_dir() and any(_area.glob("*.py")):
        sys.path.insert(0, str(_area))


@pytest.fixture(scope="session")
def plugin():
    if not ftpadtest.PLUGIN.exists():
        pytest.fail(f"{ftpadtest.PLUGIN} is missing: run `make` first")
    return ftpadtest.PLUGIN


@pytest.fixture(scope="session", params=ftpadtest.DEFAULT_COMPILERS, ids=lambda c: c.name)
def compiler(request):
    """Each compiler of ftpadtest.DEFAULT_COMPILERS, with its plugins."""
    c = request.param
    require_default_compiler(c)
    return c


def require_default_compiler(c):
    """Fail unless the build's plugin list has default compiler C for both
    targets, and its plugins are there."""
    if set(c.targets) != {"x86_64", "aarch64"}:
        pytest.fail(f"{ftpadtest.PLUGIN_LIST} does not list {c.name} with {c.plugin} "
                    "for both targets: run `make` first")
    for t in c.targets.values():
        if not t.plugin.exists():
            pytest.fail(f"{t.plugin} is missing: run `make` first")


@pytest.fixture(scope="session")
def libftpad():
    for p in (ftpadtest.LIBFTPAD_SO, ftpadtest.LIBFTPAD_A):
        if not p.exists():
            pytest.fail(f"{p} is missing: run `make` first")
    return ftpadtest.LIBFTPAD_SO


def run_folder(tmp_path_factory):
    """A folder of this run that every pytest-xdist worker shares (each
    worker's own base folder is under one per run), or the session's base
    folder without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def locked(path):
    """Holds an exclusive lock on the file PATH: one worker at a time."""
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def objdumps(tmp_path_factory):
    """binutils' objdump built with the GCC plugin and exit=1, the same
    objdump built with -finstrument-functions, and the library that counts
    its calls (test_objdump_trace.py).  Built once a run, by whichever
    worker comes first, because two test files use the first: each build is
    minutes of this machine's make check."""
    from test_objdump_trace import build_objdumps
    out = run_folder(tmp_path_factory) / "objdumps"
    with locked(f"{out}.lock"):
        if not (out / ".built").exists():
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            built = build_objdumps(out)
            (out / ".built").write_text("\n".join(str(p.relative_to(out)) for p in built))
        return [out / line for line in (out / ".built").read_text().splitlines()]


@pytest.fixture(scope="session")
def rmc():
    """recordmcount-ng in the build tree."""
    if not ftpadtest.RECORDMCOUNT.exists():
        pytest.fail(f"{ftpadtest.RECORDMCOUNT} is missing: run `make` first")
    return ftpadtest.RECORDMCOUNT


def require_tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: scripts/install-deps.sh installs it")
    return path


def require_kernel_tools(*extra):
    """What every kernel build needs (tests/kbuild/kernel.py), and EXTRA."""
    for tool in ("make", "flex", "bison", "bc", *extra):
        require_tool(tool)
