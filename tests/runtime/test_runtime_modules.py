# SPDX-License-Identifier: MIT
"""Modules that come and go under libftpad: unmaps, reused
addresses and lookups racing with the writer.

Every write of code is made with the list of modules current and no module
unmapped meanwhile (module.c, ftpad_modules_hold()): a dlclose racing with
register/unregister, a dlclose libftpad.so's hooks did not see (made in a
callback, through a pre-2.34 symbol version, or with libftpad.a, which has
no hooks), a library loaded where another was, a library unloaded and
loaded again at the same address.  Lookups read the tables like any call,
and libftpad.a patches new modules at the next call, as libftpad.so does.
Each program runs with libftpad.so and libftpad.a."""
import shutil

import pytest

from ftpadtest import A64_PLUGIN, BUILD, INCLUDE, LIBFTPAD_A, LIBFTPAD_A_LIBS, TEST_SRC, run

SRC = TEST_SRC / "runtime"
LIBDIR = BUILD / "runtime"
A64_LIBDIR = BUILD / "runtime" / "aarch64"
A64_CC = "aarch64-linux-gnu-gcc-12"
LINKS = {
    "so": lambda: [f"-L{LIBDIR}", "-lftpad", f"-Wl,-rpath,{LIBDIR}"],
    # -rdynamic: the MOD_CTOR library calls the program's copy.
    "a": lambda: ["-rdynamic", LIBFTPAD_A, *LIBFTPAD_A_LIBS, "-lpthread"],
}


def program(d, plugin, source, link, include):
    exe = d / f"{source}_{link}"
    run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", f"-fplugin={plugin}",
         f"-fplugin-arg-ftpad-include={include}", SRC / f"{source}.c", "-o", exe,
         *LINKS[link]()])
    return exe


@pytest.fixture(scope="module")
def mods(plugin, libftpad, tmp_path_factory):
    d = tmp_path_factory.mktemp("mods")
    lib = SRC / "mod_lib.c"
    run(["gcc", "-O2", f"-fplugin={plugin}", "-shared", "-fPIC", lib, "-o", d / "libmod_a.so"])
    run(["gcc", "-O2", "-shared", "-fPIC", "-DMOD_FILL=3000", lib, "-o", d / "libmod_b.so"])
    run(["gcc", "-O2", f"-fplugin={plugin}", "-shared", "-fPIC", "-DMOD_HUNDREDS=5", lib,
         "-o", d / "libmod_big.so"])
    run(["gcc", "-O2", f"-fplugin={plugin}", "-shared", "-fPIC", "-DMOD_HUNDREDS=5",
         "-DMOD_CTOR", f"-I{INCLUDE}", lib, "-o", d / "libmod_ctor.so"])
    for link in LINKS:
        program(d, plugin, "mod_reuse", link, "trigger")
        program(d, plugin, "mod_race", link, "none")
        program(d, plugin, "mod_lookup", link, "traced_here")
        program(d, plugin, "mod_tracer", link, "traced_*,named_*")
    return d


def run_checked(cmd, timeout=60):
    p = run(cmd, check=False, timeout=timeout)
    if p.returncode == 77:
        pytest.skip(f"the loader put the library elsewhere: {p.stdout.strip()}")
    assert p.returncode == 0 and "ok" in p.stdout, \
        f"exit {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"
    return p


@pytest.mark.parametrize("link", ["so", "a"])
@pytest.mark.parametrize("lib", ["libmod_big.so", "libmod_ctor.so"])
def test_dlclose_races_register(mods, link, lib):
    """The unmap waits for the writer (seen: SIGSEGV, or
    "/proc/self/mem: Input/output error").  libmod_ctor.so registers in its
    constructor and unregisters in its destructor, so glibc's loader lock
    and ftpad_lock are taken in both orders: this must not deadlock."""
    for _ in range(3):
        run_checked([mods / f"mod_race_{link}", mods / lib, "150"])


# (mode, link, legacy): libftpad.so's hooks catch the program's dlopen and
# dlclose unless they are made through a pre-2.34 version or in a callback.
REUSE = [(mode, link, legacy) for mode in ("other", "callback", "gone", "reload")
         for link, legacy in (("so", ""), ("so", "legacy"), ("a", ""))]


@pytest.mark.parametrize("mode,link,legacy", REUSE)
def test_module_gone(mods, mode, link, legacy):
    """Nothing is written into a library loaded where a closed one
    was (B must compute right); unregister after dlclose does not fault;
    a library loaded again at its old address is a new module, whose calls
    are seen again."""
    cmd = [mods / f"mod_reuse_{link}", mode, mods / "libmod_a.so", mods / "libmod_b.so"]
    run_checked(cmd + ([legacy] if legacy else []))


@pytest.mark.parametrize("link", ["so", "a"])
def test_lookup_first(mods, link):
    """A lookup as the very first call, and one for a library
    loaded since, find the names."""
    p = run_checked([mods / f"mod_lookup_{link}", "lookup", mods / "libmod_a.so"])
    assert p.stdout.splitlines()[:2] == ["program: traced_here", "library: mod_f150"]


@pytest.mark.parametrize("link", ["so", "a"])
def test_stats_patches_new_modules(mods, link):
    """After a dlopen (a new address, then the old one again),
    ftpad_get_stats() patches the new library for the registered ops."""
    run_checked([mods / f"mod_lookup_{link}", "stats", mods / "libmod_a.so"])


@pytest.mark.parametrize("link", ["so", "a"])
def test_tracer_reads_symbols_first(mods, link, tmp_path):
    """The tracer's symbol tables are read when it starts and when a module
    is read, not in its callbacks: a program that then forbids itself mmap
    still sees its callers named."""
    out = tmp_path / "trace"
    env = {"FTPAD_FILTER": "traced_*", "FTPAD_OUTPUT": str(out), "PATH": "/usr/bin:/bin"}
    p = run([mods / f"mod_tracer_{link}"], check=False, env=env, timeout=60)
    if p.returncode == 77:
        pytest.skip("seccomp refused")
    assert p.returncode == 0 and p.stdout == "13\n", p.stderr
    lines = [line for line in out.read_text().splitlines() if not line.startswith("ftpad:")]
    assert [line.split(" ", 1)[1] for line in lines] == ["traced_leaf <-named_caller"], lines


def test_modules_aarch64(tmp_path):
    """The same programs on aarch64 under qemu, with libftpad.so and the
    legacy versions (GLIBC_2.17) that its hooks do not see.  qemu-user
    places mappings itself and does not reuse a freed address, so the
    programs that need B where A was usually exit 77; "gone" (unregister
    after a dlclose: SIGSEGV before) always runs."""
    if shutil.which(A64_CC) is None or shutil.which("qemu-aarch64") is None:
        pytest.skip(f"{A64_CC} or qemu-aarch64 missing")
    lib = SRC / "mod_lib.c"
    run([A64_CC, "-O2", f"-fplugin={A64_PLUGIN}", "-shared", "-fPIC", lib,
         "-o", tmp_path / "libmod_a.so"])
    run([A64_CC, "-O2", "-shared", "-fPIC", "-DMOD_FILL=3000", lib,
         "-o", tmp_path / "libmod_b.so"])
    exe = tmp_path / "mod_reuse"
    run([A64_CC, "-O2", f"-I{INCLUDE}", f"-fplugin={A64_PLUGIN}",
         "-fplugin-arg-ftpad-include=trigger", SRC / "mod_reuse.c", "-o", exe,
         f"-L{A64_LIBDIR}", "-lftpad"])
    env = {"QEMU_LD_PREFIX": "/usr/aarch64-linux-gnu",
           "LD_LIBRARY_PATH": str(A64_LIBDIR)}
    for mode in ("gone", "reload", "other", "callback"):
        p = run(["qemu-aarch64", exe, mode, tmp_path / "libmod_a.so",
                 tmp_path / "libmod_b.so", "legacy"], check=False, env=env, timeout=120)
        if p.returncode == 77:
            continue
        assert p.returncode == 0 and "ok" in p.stdout, \
            f"{mode}: exit {p.returncode}\n{p.stdout}\n{p.stderr}"
