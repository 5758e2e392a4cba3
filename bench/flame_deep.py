#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""`ftpad flame` on deep recursions: tests/src/trace/deep.c built with the
GCC plugin and recorded with `ftpad record` at each --depths, then drawn two
ways: `ftpad flame DIR` (the frames made from the trace's call paths) and
`ftpad dump --folded DIR | ftpad flame --folded -` (through folded text,
which holds depth^2/2 names: the way `flame DIR` went before).  Prints the
best round's CPU time (user + system) and peak memory of each, their
ratio, and how each grows when the depth doubles (2 = linear, 4 =
quadratic).  No thresholds: the host is shared.

    bench/flame_deep.py [--build DIR] [--depths 2000,4000,8000] [--rounds R]
"""
import argparse
import os
import pathlib
import resource
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent


def measured(cmd, **kw):
    """(cpu s, peak KB) of one run of the shell command CMD, its output
    thrown away; the peak is the largest process's (ru_maxrss), read in a
    fresh child so that earlier runs do not count."""
    probe = ("import resource, subprocess, sys\n"
             "subprocess.run(sys.argv[1], shell=True, check=True, stdout=subprocess.DEVNULL)\n"
             "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
             "print(u.ru_utime + u.ru_stime, u.ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", probe, cmd], capture_output=True, text=True,
                         check=True, **kw).stdout.split()
    return float(out[0]), int(out[1])


def best(cmd, rounds):
    runs = [measured(cmd) for _ in range(rounds)]
    return min(r[0] for r in runs), min(r[1] for r in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.environ.get("FTPAD_BUILD", ROOT / "build"))
    ap.add_argument("--depths", default="2000,4000,8000")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    build = pathlib.Path(a.build).resolve()
    ftpad = build / "bin" / "ftpad"
    depths = [int(d) for d in a.depths.split(",")]
    with tempfile.TemporaryDirectory(prefix="ftpad-flame-deep.") as tmp:
        tmp = pathlib.Path(tmp)
        subprocess.run(["gcc", "-O1", "-g0", f"-fplugin={build / 'gcc-plugin' / 'ftpad.so'}",
                        "-fplugin-arg-ftpad-exit=1", ROOT / "tests" / "src" / "trace" / "deep.c",
                        "-o", tmp / "deep"], check=True)
        print(f"{'depth':>8} {'direct s':>9} {'direct KB':>10} {'folded s':>9} "
              f"{'folded KB':>10} {'x folded':>9}")
        rows = []
        for depth in depths:
            trace = tmp / f"d{depth}"
            subprocess.run([ftpad, "record", "--force", "-o", trace, "--", tmp / "deep",
                            str(depth)], check=True, stderr=subprocess.DEVNULL)
            direct = best(f"'{ftpad}' flame '{trace}' -o -", a.rounds)
            folded = best(f"'{ftpad}' dump --folded '{trace}' -o - | "
                          f"'{ftpad}' flame --folded - -o -", a.rounds)
            rows.append((depth, direct, folded))
            print(f"{depth:>8} {direct[0]:>9.3f} {direct[1]:>10} {folded[0]:>9.3f} "
                  f"{folded[1]:>10} {folded[0] / max(direct[0], 1e-3):>9.1f}")
        for (d0, dir0, fol0), (d1, dir1, fol1) in zip(rows, rows[1:]):
            print(f"{d0} -> {d1} deep: direct CPU x{dir1[0] / max(dir0[0], 1e-3):.1f}, "
                  f"folded CPU x{fol1[0] / max(fol0[0], 1e-3):.1f}")


if __name__ == "__main__":
    main()
