# SPDX-License-Identifier: MIT
"""The Debian packages: `dpkg-buildpackage -us -uc -b` builds them
from a copy of the tree, each file lands where it should, lintian finds no
error, libftpad1's symbols file is runtime/libftpad.map, and in a throwaway
Debian 12 chroot the installed packages let `gcc -fplugin=ftpad` (by name)
build a program that traces itself and that `ftpad record` traces.

The package build is a full build of the tree (about 6 minutes here, 2
cores); the chroot is debootstrapped once (about 2 minutes, from the Debian
mirror) and cached under /var/cache/ftpad, like the kernel trees: it is an
input made of Debian's packages, not a result of the code under test."""
import hashlib
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from ftpadtest import ROOT, run
from test_install import TRACED, doc_block

ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                      text=True).stdout.strip()
TRIPLET = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True,
                         text=True).stdout.strip() if shutil.which("dpkg-architecture") else ""
LIB = f"usr/lib/{TRIPLET}"
GCC_PLUGIN_DIR = f"usr/lib/gcc/{TRIPLET}/12/plugin"
CROSS_PLUGIN_DIR = "usr/lib/gcc-cross/aarch64-linux-gnu/12/plugin"

# Package -> the files (and symlinks, "path -> target") it must hold.
CONTENTS = {
    "ftpad": ["usr/bin/ftpad", "usr/bin/ftpad-config", "usr/bin/recordmcount-ng",
              f"{LIB}/ftpad/ftpad-specs.sh", "usr/share/man/man1/ftpad.1.gz",
              "usr/share/man/man1/ftpad-config.1.gz", "usr/share/man/man1/recordmcount-ng.1.gz",
              "usr/share/doc/ftpad/copyright"],
    "gcc-12-plugin-ftpad": [f"{GCC_PLUGIN_DIR}/ftpad.so",
                            f"{LIB}/ftpad/ftpad.so -> ../../gcc/{TRIPLET}/12/plugin/ftpad.so"],
    "gcc-11-plugin-ftpad": [f"usr/lib/gcc/{TRIPLET}/11/plugin/ftpad.so",
                            f"{LIB}/ftpad/gcc-11/ftpad.so -> "
                            f"../../../gcc/{TRIPLET}/11/plugin/ftpad.so"],
    "gcc-12-plugin-ftpad-aarch64-linux-gnu": [
        f"{CROSS_PLUGIN_DIR}/ftpad.so",
        f"{LIB}/ftpad/aarch64/ftpad.so -> "
        "../../../gcc-cross/aarch64-linux-gnu/12/plugin/ftpad.so"],
    "gcc-11-plugin-ftpad-aarch64-linux-gnu": [
        "usr/lib/gcc-cross/aarch64-linux-gnu/11/plugin/ftpad.so",
        f"{LIB}/ftpad/aarch64-gcc-11/ftpad.so -> "
        "../../../gcc-cross/aarch64-linux-gnu/11/plugin/ftpad.so"],
    "clang-plugin-ftpad": [f"{LIB}/ftpad/ftpad-clang.so"],
    "libftpad1": [f"{LIB}/libftpad.so.1.0.0", f"{LIB}/libftpad.so.1 -> libftpad.so.1.0.0"],
    "libftpad-dev": ["usr/include/ftpad.h", "usr/include/ftpad_site.h",
                     "usr/include/ftpad_trace.h", "usr/include/ftpad_patch.h",
                     f"{LIB}/libftpad.a",
                     f"{LIB}/libftpad.so -> libftpad.so.1", f"{LIB}/pkgconfig/ftpad.pc",
                     f"{LIB}/cmake/ftpad/ftpadConfig.cmake",
                     f"{LIB}/cmake/ftpad/ftpadConfigVersion.cmake",
                     f"{LIB}/cmake/ftpad/ftpadTargets.cmake",
                     "usr/share/man/man3/libftpad.3.gz", "usr/share/man/man7/ftpad-plugin.7.gz"],
}
# Files that must be in no package but the one named above.
OWNED = {"libftpad.so.1.0.0": "libftpad1", "ftpad.h": "libftpad-dev"}

# The chroot: Debian 12 with the compiler and what the packages need.
SUITE = "bookworm"
CHROOT_PACKAGES = ["gcc", "gcc-12", "libc6-dev", "libstdc++6", "libelf1"]
CHROOT_CACHE = pathlib.Path(os.environ.get("FTPAD_CHROOT_CACHE", pathlib.Path(os.environ.get("FTPAD_CACHE", "/var/cache/ftpad")) / "chroot"))
# The packages a user of the GCC plugin installs (clang-14 would add ~500 MB).
CHROOT_DEBS = ["ftpad", "gcc-12-plugin-ftpad", "libftpad1", "libftpad-dev"]


def need(*tools):
    for t in tools:
        if not shutil.which(t):
            pytest.skip(f"{t} is not installed (scripts/install-deps.sh installs it)")


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    """Build the packages from a copy of the tracked and new (not ignored)
    files, so that neither build/ nor a stale obj-*/ gets in, and nothing is
    written into the working tree (dpkg-buildpackage writes the .debs next to
    the source folder: here, the temporary folder)."""
    need("dpkg-buildpackage", "dh", "git")
    if not (ROOT / "debian" / "control").exists():
        pytest.fail("debian/control is missing")
    out = tmp_path_factory.mktemp("deb")
    src = out / "ftpad"
    src.mkdir()
    files = run(["git", "-C", ROOT, "ls-files", "-z", "-c", "-o", "--exclude-standard"]).stdout
    for rel in filter(None, files.split("\0")):
        if (ROOT / rel).is_file() or (ROOT / rel).is_symlink():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel, follow_symlinks=False)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "DESTDIR", "CC", "CFLAGS", "FTPAD_BUILD")}
    p = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b", f"-j{os.cpu_count() or 2}"],
                       cwd=src, env=env, capture_output=True, text=True)
    log = p.stdout + p.stderr
    (out / "build.log").write_text(log)
    assert p.returncode == 0, log[-6000:]
    debs = {}
    for deb in out.glob("*.deb"):
        name, version, arch = deb.stem.split("_")
        debs[name] = deb
    changes = list(out.glob("*.changes"))
    assert len(changes) == 1, changes
    return {"debs": debs, "changes": changes[0], "log": log, "dir": out}


def deb_listing(deb):
    """{path: symlink target or None} for every file in the .deb."""
    listing = {}
    for line in run(["dpkg-deb", "-c", deb]).stdout.splitlines():
        # drwxr-xr-x root/root 0 2026-11-26 23:50 ./usr/bin/
        parts = line.split(None, 5)
        path = parts[5]
        target = None
        if " -> " in path:
            path, target = path.split(" -> ", 1)
        if not path.endswith("/"):
            listing[path.removeprefix("./")] = target
    return listing


def test_packages_are_built(packages):
    expected = set(CONTENTS)
    if ARCH != "amd64":
        expected -= {"gcc-12-plugin-ftpad-aarch64-linux-gnu",
                     "gcc-11-plugin-ftpad-aarch64-linux-gnu"}
    assert expected <= set(packages["debs"]), sorted(packages["debs"])
    # Debug symbols packages (-dbgsym) are fine; nothing else is expected.
    extra = {d for d in packages["debs"] if not d.endswith("-dbgsym")} - expected
    assert not extra, extra


@pytest.mark.parametrize("package", sorted(CONTENTS))
def test_package_contents(packages, package):
    if package not in packages["debs"]:
        pytest.skip(f"{package} is not built on {ARCH}")
    listing = deb_listing(packages["debs"][package])
    for want in CONTENTS[package]:
        path, _, target = want.partition(" -> ")
        assert path in listing, f"{package}: no {path} in {sorted(listing)}"
        assert listing[path] == (target or None), f"{package}: {path} -> {listing[path]}"
    for base, owner in OWNED.items():
        if package != owner:
            assert not any(p.endswith("/" + base) for p in listing), f"{base} in {package}"


def control_field(deb, field):
    return run(["dpkg-deb", "-f", deb, field]).stdout.strip()


@pytest.mark.parametrize("gcc", ["gcc-12", "gcc-11"])
def test_gcc_plugin_depends_on_its_compiler_build(packages, gcc):
    """A GCC plugin loads only into the GCC it was built against."""
    depends = control_field(packages["debs"][f"{gcc}-plugin-ftpad"], "Depends")
    version = run(["dpkg-query", "-W", "-f=${Version}", gcc]).stdout
    upstream = re.match(r"\d+\.\d+\.\d+", version).group(0)
    major, minor, _ = upstream.split(".")
    assert f"{gcc} (>= {upstream})" in depends, depends
    assert f"{gcc} (<< {major}.{int(minor) + 1})" in depends, depends
    assert "libftpad1 (= " in control_field(packages["debs"]["libftpad-dev"], "Depends")


def test_lintian_finds_no_error(packages):
    need("lintian")
    p = run(["lintian", "--fail-on", "error", "--tag-display-limit", "0", packages["changes"]],
            check=False)
    errors = [line for line in p.stdout.splitlines() if line.startswith("E:")]
    assert p.returncode == 0 and not errors, p.stdout + p.stderr


def map_symbols():
    """{"name@NODE"} for every global of runtime/libftpad.map, and each
    version node itself ("NODE@NODE"), as dpkg-gensymbols lists them."""
    text = re.sub(r"/\*.*?\*/", "", (ROOT / "runtime" / "libftpad.map").read_text(), flags=re.S)
    names = set()
    for node, body in re.findall(r"([A-Za-z_][\w.]*)\s*\{(.*?)\}", text, re.S):
        names.add(f"{node}@{node}")
        glob = re.search(r"global:(.*?)(?:local:|$)", body, re.S).group(1)
        names |= {f"{n}@{node}" for n in re.findall(r"([A-Za-z_]\w*)\s*;", glob)}
    return names


def test_symbols_file_is_the_version_script(packages, tmp_path):
    run(["dpkg-deb", "-e", packages["debs"]["libftpad1"], tmp_path / "control"])
    lines = (tmp_path / "control" / "symbols").read_text().splitlines()
    assert lines[0].startswith("libftpad.so.1 libftpad1 "), lines[0]
    installed = {line.split()[0] for line in lines[1:] if line.startswith(" ")}
    assert installed == map_symbols(), (installed ^ map_symbols())
    # dpkg-gensymbols ran at -c4 and had nothing to say about them.
    gensymbols = [line for line in packages["log"].splitlines() if "dpkg-gensymbols" in line]
    assert not gensymbols, "\n".join(gensymbols)


def apt_mirror():
    """The Debian mirror this machine's apt uses, for the chroot."""
    for f in [pathlib.Path("/etc/apt/sources.list"),
              *sorted(pathlib.Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            text = f.read_text()
        except OSError:
            continue
        m = re.search(r"^(?:URIs:|deb)\s+(?:\[[^]]*\]\s+)?(https?://\S+/debian)/?\s", text, re.M)
        if m:
            return m.group(1)
    return "http://deb.debian.org/debian"


def cached_chroot():
    """A minimal Debian 12 with the compiler, debootstrapped once per
    package list and mirror; built beside its final place and renamed, so an
    interrupted debootstrap leaves no half chroot in the cache."""
    mirror = apt_mirror()
    key = hashlib.sha256(" ".join([SUITE, mirror, *CHROOT_PACKAGES]).encode()).hexdigest()[:12]
    root = CHROOT_CACHE / f"{SUITE}-{key}"
    if (root / "usr/bin/gcc").exists():
        return root
    CHROOT_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = CHROOT_CACHE / f".{root.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    p = run(["debootstrap", "--variant=minbase", f"--include={','.join(CHROOT_PACKAGES)}",
             SUITE, tmp, mirror], check=False)
    if p.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.skip(f"debootstrap {SUITE} from {mirror} failed (no network to the mirror?); "
                    f"the install test needs it:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    tmp.rename(root)
    return root


def in_chroot(root, cmd, check=True):
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LC_ALL": "C.UTF-8",
           "DEBIAN_FRONTEND": "noninteractive"}
    return run(["chroot", root, "sh", "-ec", cmd], env=env, check=check)


@pytest.fixture
def chroot(packages, tmp_path):
    """A throwaway copy of the cached chroot with the packages installed
    (dpkg -i, then apt-get -f install for anything missing) and /proc."""
    if os.geteuid() != 0:
        pytest.skip("the install test needs root for debootstrap and chroot")
    need("debootstrap", "chroot")
    root = tmp_path / "root"
    run(["cp", "-a", "--reflink=auto", cached_chroot(), root])
    for name in CHROOT_DEBS:
        shutil.copy(packages["debs"][name], root / "tmp")
    debs = " ".join(f"/tmp/{packages['debs'][n].name}" for n in CHROOT_DEBS)
    p = in_chroot(root, f"dpkg -i {debs}", check=False)
    if p.returncode != 0:
        in_chroot(root, "apt-get update -qq && apt-get -f install -y -qq")
    run(["mount", "-t", "proc", "proc", root / "proc"])
    try:
        yield root
    finally:
        run(["umount", root / "proc"])


def test_installed_packages_build_with_the_plugin_by_name(chroot):
    """What a user does after `apt install gcc-12-plugin-ftpad libftpad-dev`."""
    (chroot / "tmp/hello.c").write_text(doc_block("c"))
    in_chroot(chroot, "cd /tmp && gcc -O2 -fplugin=ftpad -o hello hello.c -lftpad")
    assert in_chroot(chroot, "/tmp/hello").stdout == TRACED
    # ftpad-config names the same plugin, through the symlink in lib/ftpad/.
    flags = in_chroot(chroot, "CC=gcc ftpad-config --cflags --libs").stdout.split()
    assert flags == [f"-fplugin=/{LIB}/ftpad/ftpad.so", f"-L/{LIB}", "-lftpad"], flags
    plugin_dir = in_chroot(chroot, "gcc -print-file-name=plugin").stdout.strip()
    assert in_chroot(chroot, f"readlink -f /{LIB}/ftpad/ftpad.so").stdout.strip() == \
        f"{plugin_dir}/ftpad.so"
    # ftpad record preloads libftpad from libftpad1 alone (libftpad.so.1:
    # without libftpad-dev there is no libftpad.so).
    in_chroot(chroot, "dpkg -r libftpad-dev")
    p = in_chroot(chroot, "ftpad record --text --filter greet -o /tmp/trace.txt -- /tmp/hello")
    assert p.stdout == TRACED
    trace = (chroot / "tmp/trace.txt").read_text()
    assert re.search(r"^hello-\d+ greet <-main$", trace, re.M), trace
