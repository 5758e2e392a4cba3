#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What the plugins add to compile time, on GNU binutils 2.40.

binutils is configured and built once, plainly, through a wrapper compiler
that logs every compile command (directory and arguments).  The largest
translation units are then compiled again, each with and without the
plugin, in pairs whose order alternates, for GCC 12 and clang 14.  For
each pair the CPU time (user + system of the compiler and its children)
is taken from the kernel, so other load on the host matters less than
for wall time; the result is the median of the paired ratios and the
ratio of the sums.  With --callgrind K, the first K files are also run
under callgrind, whose instruction counts (every process of the compile)
are exact.  The goal is an overhead of at most 2 %.

  /usr/bin/python3 bench/compile_overhead.py [--build DIR] [--files N]
      [--rounds R] [--callgrind K] [--workdir DIR]
"""
import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
VERSION = "2.40"
TARBALL = pathlib.Path(f"/usr/src/binutils/binutils-{VERSION}.tar.xz")
CACHE = pathlib.Path(os.environ.get("FTPAD_CACHE", "/var/cache/ftpad")) / f"binutils-{VERSION}"
CONFIGURE = ["--disable-gdb", "--disable-gdbserver", "--disable-sim", "--disable-gprofng",
             "--disable-nls", "--disable-werror", "--without-debuginfod", "--disable-plugins"]
GOAL = 1.02
# The wrapper the plain build compiles through: it logs where and how it
# was called, then becomes gcc.
LOGGING_CC = """#!/usr/bin/python3
import json, os, sys
with open({log!r}, "a") as f:
    f.write(json.dumps({{"cwd": os.getcwd(), "args": sys.argv[1:]}}) + "\\n")
os.execvp("gcc", ["gcc", *sys.argv[1:]])
"""
# Flags that write dependency files next to the build's objects.
DEPFLAGS_WITH_VALUE = {"-MF", "-MT", "-MQ"}
DEPFLAGS = {"-MD", "-MMD", "-MP"}


def die(msg):
    sys.exit(f"compile_overhead.py: {msg}")


def binutils_source():
    """The unpacked source, shared with tests/plugins/test_binutils_build.py."""
    src = CACHE / f"binutils-{VERSION}"
    if not (CACHE / ".complete").exists():
        if not TARBALL.exists():
            die(f"{TARBALL} is missing: scripts/install-deps.sh installs binutils-source")
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "xf", TARBALL, "-C", CACHE], check=True)
        (CACHE / ".complete").touch()
    return src


def build_plain(src, work):
    """Configure and build binutils with plain gcc -O2 through the logging
    wrapper; the list of logged commands."""
    log = work / "commands.jsonl"
    if (work / ".built").exists():
        return [json.loads(l) for l in log.read_text().splitlines()]
    log.unlink(missing_ok=True)
    cc = work / "logging-cc"
    cc.write_text(LOGGING_CC.format(log=str(log)))
    cc.chmod(0o755)
    out = work / "binutils"
    out.mkdir(exist_ok=True)
    with open(work / "build.log", "w") as f:
        for cmd in ([src / "configure", *CONFIGURE, f"CC={cc}", "CFLAGS=-O2"],
                    ["make", f"-j{os.cpu_count()}", "all-binutils"]):
            if subprocess.run([str(c) for c in cmd], cwd=out, stdout=f,
                              stderr=subprocess.STDOUT).returncode:
                die(f"{cmd[0]} failed; see {work / 'build.log'}")
    (work / ".built").touch()
    return [json.loads(l) for l in log.read_text().splitlines()]


def translation_units(commands, count):
    """The count largest C files the build compiled (configure's tests left
    out), each as (cwd, source, args without -o and dependency flags)."""
    units = {}
    for c in commands:
        args, cwd = c["args"], pathlib.Path(c["cwd"])
        if "-c" not in args or "conftest" in " ".join(args):
            continue
        sources = [a for a in args if a.endswith(".c") and (cwd / a).exists()]
        if len(sources) != 1:
            continue
        source = (cwd / sources[0]).resolve()
        units[source] = (cwd, source, compile_args(args))
    biggest = sorted(units.values(), key=lambda u: (-u[1].stat().st_size, str(u[1])))
    return biggest[:count]


def compile_args(args):
    kept, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in DEPFLAGS_WITH_VALUE or a == "-o":
            skip = True
        elif a not in DEPFLAGS:
            kept.append(a)
    return kept


def cpu_seconds(cmd, cwd):
    """User + system CPU time of cmd and every process it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        die(f"{' '.join(cmd)} failed in {cwd}:\n{p.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def compilers(build):
    gcc_plugin = build / "gcc-plugin" / "ftpad.so"
    clang_plugin = build / "clang-pass" / "ftpad-clang.so"
    for plugin in (gcc_plugin, clang_plugin):
        if not plugin.exists():
            die(f"{plugin} is missing: build ftpad first (make)")
    # -w for both: binutils' gcc warning flags are not all clang's.
    return [("gcc-12", ["gcc", "-w"], [f"-fplugin={gcc_plugin}"]),
            ("clang-14", ["clang-14", "-w"], [f"-fplugin={clang_plugin}"])]


def command(driver, plugin, unit, obj):
    cwd, source, args = unit
    return [*driver, *plugin, *args, "-o", str(obj)]


def paired_cpu(driver, plugin_flags, units, rounds, tmp):
    """Per pair, (plain seconds, plugin seconds); the order alternates."""
    pairs = []
    for r in range(rounds):
        for i, unit in enumerate(units):
            plain = command(driver, [], unit, tmp / "plain.o")
            padded = command(driver, plugin_flags, unit, tmp / "padded.o")
            if (r + i) % 2:
                b = cpu_seconds(padded, unit[0])
                a = cpu_seconds(plain, unit[0])
            else:
                a = cpu_seconds(plain, unit[0])
                b = cpu_seconds(padded, unit[0])
            pairs.append((a, b))
    return pairs


def callgrind_ir(cmd, cwd, tmp):
    """Instructions executed by cmd and every process it starts."""
    out = tmp / "cg"
    for f in tmp.glob("cg.*"):
        f.unlink()
    p = subprocess.run(["valgrind", "--tool=callgrind", "--trace-children=yes",
                        f"--callgrind-out-file={out}.%p", *cmd], cwd=cwd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode:
        die(f"callgrind of {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    total = 0
    for f in tmp.glob("cg.*"):
        for line in f.read_text(errors="replace").splitlines():
            if line.startswith("summary:") or line.startswith("totals:"):
                total += int(line.split()[1])
                break
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=pathlib.Path,
                    default=pathlib.Path(os.environ.get("FTPAD_BUILD", ROOT / "build")))
    ap.add_argument("--files", type=int, default=24, help="largest translation units timed")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--callgrind", type=int, default=0, metavar="K",
                    help="also count instructions for the K largest files")
    ap.add_argument("--workdir", type=pathlib.Path,
                    help="keep the plain build here and reuse it next time")
    a = ap.parse_args()
    build = a.build.resolve()
    work = a.workdir or pathlib.Path(tempfile.mkdtemp(prefix="ftpad-compile-"))
    work.mkdir(parents=True, exist_ok=True)
    units = translation_units(build_plain(binutils_source(), work.resolve()), a.files)
    if not units:
        die(f"no compile commands were logged in {work}")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="ftpad-objs-"))
    print(f"binutils {VERSION}: the {len(units)} largest translation units, "
          f"{a.rounds} rounds, CPU seconds of paired compiles (plain, plugin)")
    print(f"{'compiler':10} {'plain s':>9} {'plugin s':>9} {'sum ratio':>10} "
          f"{'median pair':>12} {'Ir ratio':>9}")
    worst = 1.0
    for name, driver, plugin_flags in compilers(build):
        pairs = paired_cpu(driver, plugin_flags, units, a.rounds, tmp)
        plain = sum(p for p, _ in pairs)
        padded = sum(q for _, q in pairs)
        median = statistics.median(q / p for p, q in pairs if p > 0)
        ir = "-"
        if a.callgrind:
            ir_plain = sum(callgrind_ir(command(driver, [], u, tmp / "p.o"), u[0], tmp)
                           for u in units[:a.callgrind])
            ir_padded = sum(callgrind_ir(command(driver, plugin_flags, u, tmp / "q.o"), u[0], tmp)
                            for u in units[:a.callgrind])
            ir = f"{ir_padded / ir_plain:.4f}"
            worst = max(worst, ir_padded / ir_plain)
        else:
            worst = max(worst, median)
        print(f"{name:10} {plain:9.2f} {padded:9.2f} {padded / plain:10.4f} "
              f"{median:12.4f} {ir:>9}")
    basis = "instructions" if a.callgrind else "median paired CPU time"
    verdict = "met" if worst <= GOAL else "NOT met"
    print(f"goal: at most {GOAL:.2f}x by {basis}; worst {worst:.4f}x: {verdict}")


if __name__ == "__main__":
    main()
