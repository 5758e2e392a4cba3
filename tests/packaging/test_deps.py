# SPDX-License-Identifier: MIT
"""scripts/install-deps.sh: `make check` installs everything, `make demo`
(--demo) only what the demo builds and runs with, and a wrong argument is
refused by name.  Run on a machine that has everything, so that no call
here installs anything."""
import re
import shutil
import subprocess

from ftpadtest import ROOT

SCRIPT = ROOT / "scripts" / "install-deps.sh"
DEMO = ROOT / "examples" / "demo.sh"


def demo_packages():
    text = SCRIPT.read_text()
    body = re.search(r"^demo_packages=\(\n(.*?)^\)", text, re.M | re.S).group(1)
    return [w for line in body.splitlines() for w in line.split("#")[0].split()]


def test_demo_installs_what_the_demo_runs():
    """Every tool examples/demo.sh checks for, and the build's compilers,
    come from a package of the demo's list."""
    packages = set(demo_packages())
    tools = re.search(r"for tool in ([^;]+); do", DEMO.read_text()).group(1).split()
    for tool in tools + ["cmake", "make", "g++"]:
        path = shutil.which(tool)
        assert path, f"{tool} is not installed"
        owner = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True,
                               check=True)
        names = {o.split(":")[0].strip() for o in owner.stdout.splitlines()}
        # binutils' tools are shipped by binutils-<triplet>, which it pulls in
        assert names & packages or any(n.startswith("binutils") for n in names), \
            (tool, names, packages)
    assert {"gcc-12-plugin-dev", "libelf-dev", "libzstd-dev"} <= packages


def test_demo_list_is_part_of_the_whole():
    out = subprocess.run(["bash", "-c", f"source <(sed -n '/^set -euo/,/^missing=()/p' {SCRIPT}"
                          " | sed '$d'); printf '%s\\n' \"${packages[@]}\""],
                         capture_output=True, text=True, check=True).stdout.split()
    assert set(demo_packages()) <= set(out)
    assert len(out) > 3 * len(demo_packages())


def test_both_lists_are_installed_here():
    for args in ([], ["--demo"]):
        p = subprocess.run([SCRIPT, *args], capture_output=True, text=True)
        assert p.returncode == 0 and "installing" not in p.stderr, (args, p.stderr)


def test_a_wrong_argument_is_refused_by_name():
    p = subprocess.run([SCRIPT, "--demo-please"], capture_output=True, text=True)
    assert p.returncode == 2
    assert "--demo-please" in p.stderr and "--demo" in p.stderr
