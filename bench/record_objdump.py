#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Recording a real program: binutils' objdump disassembling a binary,
`ftpad record` against `uftrace record` and XRay's flight-data recorder,
in one run.  Prints added ns per traced call, and the bytes an event of
ftpad's traces on disk; no thresholds.

    bench/record_objdump.py [--build DIR] [--rounds R] [--target FILE] [--workdir DIR]

objdump (and the libraries it links: bfd, opcodes, libiberty, libsframe)
is built six ways from one configured tree of Debian's binutils-source, at
-O2: GCC 12 plain, with the ftpad plugin and exit=1, and with -pg for
uftrace; clang 14 plain, with the ftpad clang pass and exit=1, and with
-fxray-instrument (every function: -fxray-instruction-threshold=1).  Each
traced run is timed against its own compiler's plain build, and the added
time divided by the calls of the run, counted from ftpad's trace of the
same compiler's build (its entries plus its drops, over two events a
call): none of the three tracers changes what the compiler inlines, so the
builds of one compiler make the same calls.  Every build's output is
checked against the plain GCC build's first.  Rounds are interleaved in
shuffled order and the fastest of each row is kept.  --workdir keeps the
builds for the next run (building takes a few minutes on 2 CPUs).
"""
import argparse
import hashlib
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
VERSION = "2.40"
TARBALL = pathlib.Path(f"/usr/src/binutils/binutils-{VERSION}.tar.xz")
CACHE = pathlib.Path(os.environ.get("FTPAD_CACHE", "/var/cache/ftpad")) / f"binutils-{VERSION}"
# As tests/trace/test_objdump_trace.py configures it: only what objdump needs.
CONFIGURE = ["--disable-gdb", "--disable-gdbserver", "--disable-sim", "--disable-gprofng",
             "--disable-nls", "--disable-werror", "--without-debuginfod", "--disable-plugins",
             "--disable-libctf", "--with-system-zlib", "--without-zstd"]
LIBS = ["all-libiberty", "all-bfd", "all-opcodes", "all-libsframe"]
CFLAGS = "-O2"
SUMMARY = re.compile(r"ftpad: \d+ sites, \d+ enabled, (\d+) events, (\d+) dropped, (\d+) bytes")


def say(text):
    print(text, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, **kw)


def source(work):
    """The unpacked binutils tree: the tests' cache when it is complete,
    else unpacked into WORK."""
    if (CACHE / ".complete").exists():
        return CACHE / f"binutils-{VERSION}"
    if not TARBALL.exists():
        sys.exit(f"bench/record_objdump.py: {TARBALL} is missing: "
                 "scripts/install-deps.sh installs binutils-source")
    if not (work / f"binutils-{VERSION}" / "configure").exists():
        sh(["tar", "xf", TARBALL, "-C", work])
    return work / f"binutils-{VERSION}"


def variants(build_dir):
    """name: (compiler and its flags, what the build is for)."""
    plugin = build_dir / "gcc-plugin" / "ftpad.so"
    pas = build_dir / "clang-pass" / "ftpad-clang.so"
    return {
        "gcc": "gcc",
        "gcc-ftpad": f"gcc -fplugin={plugin} -fplugin-arg-ftpad-exit=1",
        "gcc-pg": "gcc -pg",
        "clang": "clang-14",
        "clang-ftpad": f"clang-14 -fplugin={pas} -fplugin-arg-ftpad-clang-exit=1",
        "clang-xray": "clang-14 -fxray-instrument -fxray-instruction-threshold=1",
    }


def build(work, build_dir):
    """Each variant's objdump, built in WORK unless it is there already."""
    configured = work / "configured"
    if not (configured / "binutils" / "Makefile").exists():
        say("configuring binutils")
        shutil.rmtree(configured, ignore_errors=True)
        configured.mkdir(parents=True)
        with open(configured / "configure.log", "w") as log:
            sh([source(work) / "configure", *CONFIGURE, f"CFLAGS={CFLAGS}"], cwd=configured,
               stdout=log, stderr=subprocess.STDOUT)
            sh(["make", f"-j{os.cpu_count()}", "configure-libiberty", "configure-bfd",
                "configure-opcodes", "configure-libsframe", "configure-binutils"],
               cwd=configured, stdout=log, stderr=subprocess.STDOUT)
    built = {}
    for name, cc in variants(build_dir).items():
        tree = work / name
        exe = tree / "binutils" / "objdump"
        if not exe.exists():
            say(f"building objdump: {cc}")
            shutil.rmtree(tree, ignore_errors=True)
            # The copy keeps the timestamps, so make configures nothing again.
            shutil.copytree(configured, tree, symlinks=True)
            with open(tree / "build.log", "w") as log:
                for cmd in (["make", f"-j{os.cpu_count()}", *LIBS],
                            ["make", f"-j{os.cpu_count()}", "-C", "binutils", "objdump"]):
                    p = subprocess.run([*cmd, f"CC={cc}", f"CFLAGS={CFLAGS}"], cwd=tree,
                                       stdout=log, stderr=subprocess.STDOUT)
                    if p.returncode:
                        sys.exit(f"bench/record_objdump.py: building {name} failed; "
                                 f"see {tree / 'build.log'}")
        built[name] = exe
    return built


def commands(built, build_dir, target, tmp):
    """row: (argv, environment, the plain build it is timed against)."""
    ftpad = build_dir / "bin" / "ftpad"
    xray = f"patch_premain=true xray_mode=xray-fdr xray_logfile_base={tmp}/xray-log."
    trace = tmp / "trace"
    disasm = ["-d", target]
    return {
        "gcc -O2": ([built["gcc"], *disasm], {}, None),
        "ftpad record (gcc plugin)": ([ftpad, "record", "--force", "-o", trace, "--",
                                       built["gcc-ftpad"], *disasm], {}, "gcc -O2"),
        "uftrace record (gcc -pg)": (["uftrace", "record", "-d", trace, built["gcc-pg"],
                                      *disasm], {}, "gcc -O2"),
        "clang-14 -O2": ([built["clang"], *disasm], {}, None),
        "ftpad record (clang pass)": ([ftpad, "record", "--force", "-o", trace, "--",
                                       built["clang-ftpad"], *disasm], {}, "clang-14 -O2"),
        "XRay FDR (clang)": ([built["clang-xray"], *disasm], {"XRAY_OPTIONS": xray},
                             "clang-14 -O2"),
    }


def run(argv, env, tmp):
    """The run's wall time and its stdout's digest."""
    shutil.rmtree(tmp / "trace", ignore_errors=True)
    for f in tmp.glob("xray-log.*"):
        f.unlink()
    out = tmp / "out.txt"
    with open(out, "wb") as f:
        t0 = time.perf_counter()
        subprocess.run([str(a) for a in argv], check=True, stdout=f, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, **env), cwd=tmp)
        took = time.perf_counter() - t0
    return took, hashlib.sha256(out.read_bytes()).hexdigest()


def calls_of(argv, tmp):
    """Calls in the run, from ftpad record's summary: entries and exits,
    written or dropped, two a call; the events dropped, and the trace's
    bytes on disk an event written."""
    shutil.rmtree(tmp / "trace", ignore_errors=True)
    p = subprocess.run([str(a) for a in argv], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, cwd=tmp)
    m = SUMMARY.search(p.stderr)
    if not m:
        sys.exit(f"bench/record_objdump.py: no summary from ftpad record:\n{p.stderr}")
    events, dropped, size = map(int, m.groups())
    return (events + dropped) // 2, dropped, size / max(events, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--target", default="/usr/lib/x86_64-linux-gnu/libc.so.6",
                    help="the binary objdump -d disassembles")
    ap.add_argument("--workdir")
    args = ap.parse_args()
    build_dir = pathlib.Path(args.build).resolve()
    for need in ("gcc-plugin/ftpad.so", "clang-pass/ftpad-clang.so", "bin/ftpad"):
        if not (build_dir / need).exists():
            sys.exit(f"bench/record_objdump.py: {build_dir}: no {need}; build first")
    for tool in ("uftrace", "clang-14"):
        if not shutil.which(tool):
            sys.exit(f"bench/record_objdump.py: {tool} is not installed "
                     "(scripts/install-deps.sh installs it)")
    target = pathlib.Path(args.target).resolve()
    if not target.is_file():
        sys.exit(f"bench/record_objdump.py: --target {args.target}: no such file")
    with tempfile.TemporaryDirectory(prefix="ftpad-objdump-bench-") as d:
        tmp = pathlib.Path(d)
        work = pathlib.Path(args.workdir).resolve() if args.workdir else tmp / "work"
        work.mkdir(parents=True, exist_ok=True)
        built = build(work, build_dir)
        rows = commands(built, build_dir, target, tmp)
        digests = {name: run(argv, env, tmp)[1] for name, (argv, env, _) in rows.items()}
        wrong = [name for name, dg in digests.items() if dg != digests["gcc -O2"]]
        if wrong:
            sys.exit(f"bench/record_objdump.py: output differs from gcc -O2's: {wrong}")
        calls = {"gcc -O2": calls_of(rows["ftpad record (gcc plugin)"][0], tmp),
                 "clang-14 -O2": calls_of(rows["ftpad record (clang pass)"][0], tmp)}
        best = dict.fromkeys(rows, float("inf"))
        for _ in range(args.rounds):
            order = list(rows)
            random.shuffle(order)
            for name in order:
                argv, env, _ = rows[name]
                best[name] = min(best[name], run(argv, env, tmp)[0])
        print(f"objdump -d {target}, fastest of {args.rounds} rounds")
        for base, (n, dropped, per_event) in calls.items():
            print(f"{base}: {n} calls a run (ftpad's trace; {dropped} events dropped, "
                  f"{per_event:.2f} bytes/event on disk)")
        print(f"{'row':28} {'seconds':>8} {'added ns/call':>14}")
        added = {}
        for name, (_, _, base) in rows.items():
            col = ""
            if base:
                added[name] = (best[name] - best[base]) / calls[base][0] * 1e9
                col = f"{added[name]:14.1f}"
            print(f"{name:28} {best[name]:8.3f} {col}")
        for ours, peer in (("ftpad record (gcc plugin)", "uftrace record (gcc -pg)"),
                           ("ftpad record (gcc plugin)", "XRay FDR (clang)"),
                           ("ftpad record (clang pass)", "XRay FDR (clang)")):
            print(f"{ours} / {peer}: {added[ours] / added[peer]:.2f}x")


if __name__ == "__main__":
    main()
