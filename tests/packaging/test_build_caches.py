# SPDX-License-Identifier: MIT
"""The plugins under ccache and distcc, and objects that do not depend on the
build directory (docs/build-caches.md says how to set them up).

- ccache: a second build is all hits; a changed plugin file is a miss
  (ccache hashes what -fplugin= names); a changed policy file is a miss only
  when it is in CCACHE_EXTRAFILES, and a stale hit without it.
- distcc: two distccd servers on 127.0.0.1 compile with the plugin through a
  wrapper compiler (distccd 3.4 refuses -fplugin= itself), and the objects
  are byte-identical to local ones.
- The same sources built in two directories by absolute paths give the same
  objects and the same report.

Every cache lives in tmp_path, never the user's; the servers listen on
loopback only and are stopped at the end.
"""
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
from elftools.elf.elffile import ELFFile

from conftest import require_tool
from ftpadtest import BUILD, ROOT, run

CLANG_PLUGIN = BUILD / "clang-pass" / "ftpad-clang.so"
CALC = ROOT / "examples" / "calc.c"
# A second translation unit, so that "all hits" means more than one.
EXTRA_SOURCE = """\
static int twice(int x) { return 2 * x; }
int parse_one(int x) { return twice(x) + 1; }
int handle_two(int x) { int s = 0; for (int i = 0; i < x; i++) s += parse_one(i); return s; }
"""


def sources(tmp_path):
    src = tmp_path / "src"
    src.mkdir(parents=True, exist_ok=True)
    shutil.copy(CALC, src / "calc.c")
    (src / "extra.c").write_text(EXTRA_SOURCE)
    return [src / "calc.c", src / "extra.c"]


def ccache_env(tmp_path):
    """A private cache and config: never the user's ~/.ccache."""
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("CCACHE_"):
            del env[key]
    env["CCACHE_DIR"] = str(tmp_path / "ccache")
    env["CCACHE_CONFIGPATH"] = str(tmp_path / "ccache.conf")
    (tmp_path / "ccache.conf").write_text("")
    return env


def ccache_stats(env):
    out = run(["ccache", "--print-stats"], env=env).stdout
    stats = dict(line.split("\t") for line in out.splitlines() if "\t" in line)
    hits = int(stats["direct_cache_hit"]) + int(stats["preprocessed_cache_hit"])
    return hits, int(stats["cache_miss"])


def compile_all(cc, srcs, out, flags, env=None):
    out.mkdir(exist_ok=True)
    objs = []
    for s in srcs:
        obj = out / (s.stem + ".o")
        run([*cc, "-O2", *flags, "-c", s, "-o", obj], env=env)
        objs.append(obj)
    return objs


@pytest.fixture(scope="module")
def ccache():
    return require_tool("ccache")


def test_ccache_second_build_hits_all(tmp_path, plugin, ccache):
    env = ccache_env(tmp_path)
    srcs = sources(tmp_path)
    flags = [f"-fplugin={plugin}"]
    first = compile_all(["ccache", "gcc"], srcs, tmp_path / "1", flags, env)
    assert ccache_stats(env) == (0, len(srcs))
    second = compile_all(["ccache", "gcc"], srcs, tmp_path / "2", flags, env)
    assert ccache_stats(env) == (len(srcs), len(srcs))
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_ccache_plugin_change_misses(tmp_path, plugin, ccache, compiler):
    if compiler == "clang":
        require_tool("clang-14")
        if not CLANG_PLUGIN.exists():
            pytest.fail(f"{CLANG_PLUGIN} is missing: run `make` first")
        original, cc = CLANG_PLUGIN, ["ccache", "clang-14"]
    else:
        original, cc = plugin, ["ccache", "gcc"]
    env = ccache_env(tmp_path)
    srcs = sources(tmp_path)
    copy = tmp_path / original.name
    shutil.copy(original, copy)
    flags = [f"-fplugin={copy}"]
    first = compile_all(cc, srcs, tmp_path / "1", flags, env)
    compile_all(cc, srcs, tmp_path / "2", flags, env)
    assert ccache_stats(env) == (len(srcs), len(srcs))
    # New content that still loads: the loader ignores bytes after the ELF
    # image.  The mtime moves too; the test is that ccache looks at the file.
    with open(copy, "ab") as f:
        f.write(b"\0")
    third = compile_all(cc, srcs, tmp_path / "3", flags, env)
    assert ccache_stats(env) == (len(srcs), 2 * len(srcs)), \
        "a changed plugin file must be a cache miss"
    for a, b in zip(first, third):
        assert a.read_bytes() == b.read_bytes()


def test_ccache_policy_file_needs_extra_files(tmp_path, plugin, ccache):
    env = ccache_env(tmp_path)
    srcs = sources(tmp_path)[:1]
    policy = tmp_path / "ftpad.policy"
    flags = [f"-fplugin={plugin}", f"-fplugin-arg-ftpad-policy={policy}"]

    def build(name, env):
        return compile_all(["ccache", "gcc"], srcs, tmp_path / name, flags, env)[0].read_bytes()

    def fresh(name):
        return compile_all(["gcc"], srcs, tmp_path / name, flags)[0].read_bytes()

    policy.write_text("pad parse_* after=7\n")
    old = build("1", env)
    policy.write_text("pad parse_* after=9\n")
    new = fresh("fresh")
    assert new != old, "the policy change must change the object"

    # The pitfall: ccache does not know about the file, so the old object
    # comes back.
    stale = build("2", env)
    assert ccache_stats(env) == (1, 1)
    assert stale == old

    # With the file in extra_files_to_hash its content is in the hash.
    extra = dict(env, CCACHE_EXTRAFILES=str(policy))
    assert build("3", extra) == new
    assert ccache_stats(env) == (1, 2)
    assert build("4", extra) == new
    assert ccache_stats(env) == (2, 2)
    policy.write_text("pad parse_* after=11\n")
    assert build("5", extra) == fresh("fresh2")
    assert ccache_stats(env) == (2, 3)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def shared_dir():
    """A directory distccd's compiler can read: as root distccd runs jobs
    as the distcc user, which cannot enter pytest's 0700 tmp_path."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="ftpad-distcc-"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def distcc_servers(shared_dir):
    """Two distccd on 127.0.0.1, one job each; stopped at the end."""
    require_tool("distcc")
    distccd = require_tool("distccd")
    servers = []
    try:
        for _ in range(2):
            port = free_port()
            log = shared_dir / f"distccd-{port}.log"
            log.touch()
            log.chmod(0o666)
            # --enable-tcp-insecure: the wrapper compiler is not in
            # /usr/lib/distcc, distccd's list of compilers it will run.
            p = subprocess.Popen(
                [distccd, "--daemon", "--no-detach", "--enable-tcp-insecure",
                 "--allow", "127.0.0.1", "--listen", "127.0.0.1",
                 "--port", str(port), "--jobs", "1", "--log-level", "info",
                 "--log-file", str(log)],
                start_new_session=True, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            servers.append((p, port, log))
        for _, port, _ in servers:
            deadline = time.monotonic() + 60  # a hang guard: slow on a loaded machine
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        pytest.fail(f"distccd did not listen on 127.0.0.1:{port}")
                    time.sleep(0.1)
        yield servers
    finally:
        for p, _, _ in servers:
            # distccd forks a child per job slot, in its own session.
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            p.wait(timeout=10)


def distcc_env(tmp_path, servers):
    (tmp_path / "distcc").mkdir(exist_ok=True)
    env = dict(os.environ)
    env.update(
        DISTCC_HOSTS=" ".join(f"127.0.0.1:{port}/1" for _, port, _ in servers),
        DISTCC_DIR=str(tmp_path / "distcc"),
        # Never compile locally behind the test's back.
        DISTCC_FALLBACK="0", DISTCC_SKIP_LOCAL_RETRY="1",
        DISTCC_VERBOSE="1")
    return env


def test_distcc_refuses_fplugin(tmp_path, plugin, distcc_servers):
    """What docs/build-caches.md warns about: distccd 3.4 will not run a
    compile with -fplugin= on its command line."""
    srcs = sources(tmp_path)[:1]
    p = run(["distcc", "gcc", "-O2", f"-fplugin={plugin}", "-c", srcs[0],
             "-o", tmp_path / "x.o"], check=False,
            env=distcc_env(tmp_path, distcc_servers), timeout=60)
    assert p.returncode != 0
    logs = "".join(log.read_text() for _, _, log in distcc_servers)
    assert "-fplugin= and/or -specs= passed" in logs


def test_distcc_objects_match_local(tmp_path, plugin, distcc_servers, shared_dir):
    srcs = sources(tmp_path)
    policy = shared_dir / "ftpad.policy"
    policy.write_text("pad parse_* after=9\nexclude twice\n")
    policy.chmod(0o644)
    # The wrapper, at the same path on every machine, adds -fplugin=; the
    # plugin's own arguments pass through distcc.  The plugin is copied
    # beside it: distccd's user may not enter the build tree (a clone in a
    # 0700 directory).
    shared_plugin = shared_dir / "ftpad.so"
    shutil.copy2(plugin, shared_plugin)
    shared_plugin.chmod(0o755)
    wrapper = shared_dir / "ftpad-gcc"
    wrapper.write_text(f'#!/bin/sh\nexec gcc -fplugin={shared_plugin} "$@"\n')
    wrapper.chmod(0o755)
    flags = [f"-fplugin-arg-ftpad-policy={policy}"]
    env = distcc_env(tmp_path, distcc_servers)

    local = compile_all([wrapper], srcs, tmp_path / "local", flags)
    remote_dir = tmp_path / "remote"
    remote_dir.mkdir()
    remote = []
    # Two at a time, so that both servers get work.
    for round in range(2):
        procs = []
        for s in srcs:
            obj = remote_dir / f"{s.stem}-{round}.o"
            procs.append((subprocess.Popen(
                ["distcc", str(wrapper), "-O2", *flags, "-c", str(s), "-o", str(obj)],
                env=env, stderr=subprocess.PIPE, text=True), obj))
        for p, obj in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            assert "exec on 127.0.0.1:" in err, "the job did not go to a server"
            remote.append(obj)

    for i, obj in enumerate(remote):
        assert obj.read_bytes() == local[i % len(srcs)].read_bytes(), obj
    logs = [log.read_text() for _, _, log in distcc_servers]
    assert sum(log.count("COMPILE_OK") for log in logs) == len(remote)
    assert all("COMPILE_OK" in log for log in logs), "one server got no job"
    # The plugin ran on the server: the policy's pad is in the objects.
    assert b"__ftpad_sites" in remote[0].read_bytes()

    # With -g the debug sections differ (the server compiles preprocessed
    # source in its own directory, with or without the plugin); the code
    # and ftpad's sections do not.
    g_local = compile_all([wrapper], srcs[:1], tmp_path / "glocal", ["-g", *flags])[0]
    g_remote = remote_dir / "calc-g.o"
    p = run(["distcc", wrapper, "-O2", "-g", *flags, "-c", srcs[0], "-o", g_remote],
            env=env, timeout=120)
    assert "exec on 127.0.0.1:" in p.stderr
    a, b = sections(g_local), sections(g_remote)
    assert a.keys() == b.keys()
    differ = {name for name in a if a[name] != b[name]}
    assert all(n.startswith((".debug_", ".rela.debug_")) for n in differ), differ
    assert any(name.startswith("__ftpad_sites#") for name in a)


def sections(obj):
    """Each section's bytes, by name (ftpad has one __ftpad_sites per
    function, so the name carries its index too)."""
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        return {f"{s.name}#{i}": s.data() for i, s in enumerate(elf.iter_sections())
                if s.header.sh_type != "SHT_NOBITS"}


def build_in(root, cc, flags, report_flag):
    """Compile by absolute paths inside ROOT, as CMake does."""
    srcs = sources(root)
    report = root / "report.json"
    return compile_all(
        cc, srcs, root / "obj",
        [*flags, f"{report_flag}={report}", f"-ffile-prefix-map={root}=."]), report


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_output_independent_of_build_dir(tmp_path, plugin, compiler):
    if compiler == "clang":
        require_tool("clang-14")
        cc, flags = ["clang-14"], [f"-fplugin={CLANG_PLUGIN}"]
        report_flag = "-fplugin-arg-ftpad-clang-report"
    else:
        # -gno-record-gcc-switches: DW_AT_producer holds the command line,
        # and -ffile-prefix-map does not apply to it.
        cc, flags = ["gcc"], [f"-fplugin={plugin}", "-gno-record-gcc-switches"]
        report_flag = "-fplugin-arg-ftpad-report"
    for debug in ([], ["-g"]):
        a, report_a = build_in(tmp_path / "a" / ("g" if debug else "n"), cc,
                               [*flags, *debug], report_flag)
        b, report_b = build_in(tmp_path / "elsewhere" / "b" / ("g" if debug else "n"),
                               cc, [*flags, *debug], report_flag)
        for x, y in zip(a, b):
            assert x.read_bytes() == y.read_bytes(), f"{x} and {y} differ"
            assert str(tmp_path).encode() not in x.read_bytes()
        text = report_a.read_text()
        assert text == report_b.read_text()
        assert '"source": "./src/calc.c"' in text
        assert str(tmp_path) not in text
