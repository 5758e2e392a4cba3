# SPDX-License-Identifier: MIT
"""The demo program, traced, is right.

examples/calc.c is built twice from the same source with the same flags:
with the ftpad plugin and run under `ftpad record --text --filter '*'`, and with
GCC's own -finstrument-functions and a hook that logs every function entry.
The second build knows nothing of ftpad, so it is an independent oracle for
which functions ran, how often, and who called them.  examples/demo.sh, what
`make demo` runs, is tested too."""
import collections
import os
import re
import xml.etree.ElementTree as ET

import pytest

import ftpadtest
from ftpadtest import run

CALC = ftpadtest.ROOT / "examples" / "calc.c"
DEMO = ftpadtest.ROOT / "examples" / "demo.sh"

# Flags that make the two builds comparable: no inlining, no IPA clones or
# folding (which would rename or merge functions), no sibling calls (which
# would change who the caller is).
FLAGS = {
    "O0": ["-O0"],
    "O2": ["-O2", "-fno-inline", "-fno-ipa-cp", "-fno-ipa-sra", "-fno-ipa-icf",
           "-fno-optimize-sibling-calls"],
}

# What calc runs: every operator and built-in, a comment, a blank statement
# and two errors, so nearly every function of calc.c is called.
STATEMENTS = [
    "let x = 3",
    "x * (2 + 4) - sqrt(16)",
    "let r = 2",
    "pi * r ^ 2  # area",
    "-2^2 + abs(-7) % 4",
    "max(1, x, r) / min(4, 2)",
    "2^3^2",
    "",
    "1 / (x - 3)",
    "2 3",
]
STDOUT = "x = 3\n14\nr = 2\n12.5663706143592\n-1\n1.5\n512\n"
ERRORS = ["calc: error: column 3: division by zero",
          "calc: error: column 3: unexpected '3'"]
# The functions those statements must reach, in either input mode: the
# comparison below means little if the oracle saw only a few.
MUST_RUN = {
    "main", "run_statement", "next_token", "is_op", "expect_op", "failed",
    "set_error", "report_unexpected", "new_node", "new_operator", "free_node",
    "parse_expr", "parse_term", "parse_unary", "parse_factor", "parse_primary",
    "parse_call", "eval", "eval_binary", "eval_call", "find_builtin",
    "find_variable", "set_variable", "fn_sqrt", "fn_abs", "fn_min", "fn_max",
}

# The oracle's hooks, built without -finstrument-functions.  The address of
# main, taken at run time, gives the load base of the PIE.
HOOKS = r"""
#include <stdio.h>
#include <stdlib.h>

extern int main(int, char **);
static FILE *out;

__attribute__((no_instrument_function))
void __cyg_profile_func_enter(void *fn, void *call_site)
{
	if (!out) {
		const char *path = getenv("ORACLE_OUT");

		if (!path || !(out = fopen(path, "w")))
			abort();
		fprintf(out, "main %p\n", (void *)main);
	}
	fprintf(out, "%p %p\n", fn, call_site);
}

__attribute__((no_instrument_function))
void __cyg_profile_func_exit(void *fn, void *call_site)
{
	(void)fn;
	(void)call_site;
}
"""

SUMMARY = re.compile(r"ftpad: (\d+) sites found, (\d+) sites enabled, (\d+) calls seen")
CALL = re.compile(r"(?P<comm>\S+)-(?P<tid>\d+) (?P<func>\S+) <-(?P<caller>\S+)")


class Run:
    """One run of calc: its output and the calls it made, as
    (function, caller) pairs where the caller is None outside calc."""

    def __init__(self, proc, calls):
        self.proc = proc
        self.calls = calls

    def functions(self):
        return {f for f, _ in self.calls}

    def counts(self):
        return collections.Counter(f for f, _ in self.calls)

    def edges(self):
        return {(f, c) for f, c in self.calls if c is not None}


def run_calc(cmd, mode, env=None):
    """calc with STATEMENTS as arguments, or one per line on stdin."""
    if mode == "argv":
        return run([*cmd, *STATEMENTS], check=False, env=env)
    return run(cmd, check=False, env=env, input="\n".join(STATEMENTS) + "\n")


def build_oracle(flags, out):
    out.mkdir()
    (out / "hooks.c").write_text(HOOKS)
    run(["gcc", *flags, "-g", "-finstrument-functions", "-c", CALC, "-o", out / "calc.o"])
    run(["gcc", "-O2", "-c", out / "hooks.c", "-o", out / "hooks.o"])
    run(["gcc", "-o", out / "calc", out / "calc.o", out / "hooks.o", "-lm"])
    return out / "calc"


def run_oracle(calc, mode, out):
    log = out / f"oracle-{mode}.txt"
    proc = run_calc([calc], mode, env=dict(os.environ, ORACLE_OUT=str(log)))
    with ftpadtest.Image(calc) as image:
        funcs = image.functions()
    by_addr = {addr: name for name, (addr, _) in funcs.items()}

    def containing(addr):
        for name, (start, size) in funcs.items():
            if start <= addr < start + size:
                return name
        return None

    lines = log.read_text().splitlines()
    tag, main = lines[0].split()
    assert tag == "main"
    base = int(main, 16) - funcs["main"][0]
    calls = []
    for line in lines[1:]:
        fn, site = (int(x, 16) - base for x in line.split())
        assert fn in by_addr, f"oracle: {fn:#x} is not the start of a function"
        # The return address can sit just past the end of a call at the
        # end of a function: look it up one byte earlier.
        calls.append((by_addr[fn], containing(site - 1)))
    return Run(proc, calls)


def build_traced(flags, out):
    out.mkdir()
    run(["gcc", *flags, "-g", *ftpadtest.plugin_flags(), "-c", CALC, "-o", out / "calc.o"])
    run(["gcc", "-o", out / "calc", out / "calc.o", f"-L{ftpadtest.LIBFTPAD_SO.parent}",
         "-lftpad", f"-Wl,-rpath,{ftpadtest.LIBFTPAD_SO.parent}", "-lm"])
    return out / "calc"


def read_trace(path, names):
    """The calls of a trace file and its summary (found, enabled, seen).
    A caller that is not a function of calc (@names) becomes None."""
    lines = path.read_text().splitlines()
    assert lines, f"{path} is empty"
    summaries = [i for i, line in enumerate(lines) if line.startswith("ftpad:")]
    assert summaries == [len(lines) - 1], f"{path}: one summary line, the last, expected"
    summary = SUMMARY.fullmatch(lines[-1])
    assert summary, f"{path}: bad summary line {lines[-1]!r}"
    calls, tids = [], set()
    for line in lines[:-1]:
        m = CALL.fullmatch(line)
        assert m, f"{path}: bad trace line {line!r}"
        assert m["comm"] == "calc", line
        tids.add(m["tid"])
        caller = m["caller"].split("+")[0]
        calls.append((m["func"], caller if caller in names else None))
    assert len(tids) <= 1, f"calc has one thread, the trace shows {tids}"
    return calls, tuple(int(x) for x in summary.groups())


@pytest.fixture(scope="module", params=list(FLAGS))
def oracle(request, tmp_path_factory):
    flags = FLAGS[request.param]
    out = tmp_path_factory.mktemp(f"oracle-{request.param}")
    return request.param, build_oracle(flags, out / "build")


@pytest.fixture(scope="module")
def traced(oracle, tmp_path_factory):
    if not ftpadtest.PLUGIN.exists():
        pytest.fail(f"{ftpadtest.PLUGIN} is missing: run `make` first")
    for p in (ftpadtest.LIBFTPAD_SO, ftpadtest.FTPAD_BIN):
        if not p.exists():
            pytest.fail(f"{p} is missing: run `make` first")
    name, _ = oracle
    out = tmp_path_factory.mktemp(f"traced-{name}")
    return build_traced(FLAGS[name], out / "build")


def run_traced(calc, mode, out):
    trace = out / f"trace-{mode}.txt"
    proc = run_calc([ftpadtest.FTPAD_BIN, "record", "--text", "--filter", "*", "-o", trace, "--", calc],
                    mode)
    with ftpadtest.Image(calc) as image:
        names = set(image.functions())
        nsites = len(image.sites())
    calls, summary = read_trace(trace, names)
    return Run(proc, calls), summary, nsites


def check_output(proc, what):
    assert proc.returncode == 1, f"{what}: {proc.stderr}"  # the two errors
    assert proc.stdout == STDOUT, what
    lines = proc.stderr.splitlines()
    for error in ERRORS:
        assert error in lines, f"{what}: {proc.stderr}"


@pytest.mark.parametrize("mode", ["argv", "stdin"])
def test_oracle_sees_the_program(oracle, tmp_path, mode):
    """The oracle itself: right output, and nearly every function of calc
    seen, each address the start of a known function."""
    _, calc = oracle
    ran = run_oracle(calc, mode, tmp_path)
    check_output(ran.proc, "oracle")
    assert MUST_RUN <= ran.functions(), MUST_RUN - ran.functions()
    assert ("run_stdin" in ran.functions()) == (mode == "stdin")
    assert ("parse_expr", "run_statement") in ran.edges()
    assert ("parse_expr", "parse_call") in ran.edges()
    assert ("fn_sqrt", "eval_call") in ran.edges()


@pytest.mark.parametrize("mode", ["argv", "stdin"])
def test_traced_functions_match_oracle(oracle, traced, tmp_path, mode):
    name, oracle_calc = oracle
    expect = run_oracle(oracle_calc, mode, tmp_path)
    got, _, _ = run_traced(traced, mode, tmp_path)
    check_output(got.proc, "traced")
    assert got.functions() == expect.functions(), (
        f"only traced: {sorted(got.functions() - expect.functions())}, "
        f"only in the oracle: {sorted(expect.functions() - got.functions())}")
    if name == "O0":
        # Only at -O0, where every call in the source is made.  At -O2 the
        # oracle's hooks make every function impure and the plugin's NOPs do
        # not, so GCC merges calls in one build only (gcc 12 saves one call
        # of the pure failed() in the traced build).
        assert got.counts() == expect.counts()


@pytest.mark.parametrize("mode", ["argv"])
def test_traced_callers_match_oracle(oracle, traced, tmp_path, mode):
    """Each traced call names its caller: the same (function, caller) pairs
    as the oracle's, for callers inside calc."""
    _, oracle_calc = oracle
    expect = run_oracle(oracle_calc, mode, tmp_path)
    got, _, _ = run_traced(traced, mode, tmp_path)
    assert got.edges() == expect.edges(), (
        f"only traced: {sorted(got.edges() - expect.edges())}, "
        f"only in the oracle: {sorted(expect.edges() - got.edges())}")


def test_trace_summary_is_consistent(traced, tmp_path):
    """With --filter '*', every site of calc is found and enabled, and every
    call seen is in the trace."""
    got, (found, enabled, seen), nsites = run_traced(traced, "argv", tmp_path)
    assert nsites > 0
    assert (found, enabled) == (nsites, nsites)
    assert seen == len(got.calls)


def test_demo_script(tmp_path):
    """`make demo` (examples/demo.sh): every step succeeds; the recording's
    summary line shows events, and replay, report and flame show the
    parser's calls with their exits."""
    for p in (ftpadtest.PLUGIN, ftpadtest.LIBFTPAD_SO, ftpadtest.FTPAD_BIN):
        if not p.exists():
            pytest.fail(f"{p} is missing: run `make` first")
    p = run([DEMO, ftpadtest.BUILD, tmp_path], check=False, cwd=tmp_path)
    assert p.returncode == 0, f"demo failed:\n{p.stdout}\n{p.stderr}"
    lines = p.stdout.splitlines()
    summary = [line for line in lines if line.startswith("ftpad: ")]
    assert len(summary) == 1 and re.fullmatch(
        rf"ftpad: \d+ sites, [1-9]\d* enabled, [1-9]\d* events, 0 dropped, \d+ bytes in "
        rf"{tmp_path}/calc.data", summary[0]), summary
    assert (f"+ gcc -O2 -g -fplugin={ftpadtest.PLUGIN} -fplugin-arg-ftpad-exit=1 "
            f"-c examples/calc.c -o {tmp_path}/calc.o") in lines
    assert "x = 3" in lines and "14" in lines  # calc's own output
    assert any(re.fullmatch(r"\s+[0-9a-f]+:\s+nopl\s+0x0\(%rax,%rax,1\)", line)
               for line in lines), "no 5-byte NOP shown"
    # replay: parse_expr's frame opens and closes (exit sites), nesting the parser.
    assert any(re.fullmatch(r"\s+\[\s*\d+\] \| parse_expr\(\) \{", line) for line in lines)
    assert any(re.fullmatch(r"\s*[\d.]+ us \[\s*\d+\] \| \} /\* parse_expr \*/", line)
               for line in lines)
    # report: a row per traced function, none of them entry-only.
    assert any(re.fullmatch(r"(\s+[\d.]+ us){4}\s+4\s+parse_expr", line) for line in lines)
    # flame: a frame of each traced function.
    titles = {t.text.split(" (")[0] for t in ET.parse(tmp_path / "calc.svg").iter(
        "{http://www.w3.org/2000/svg}title")}
    assert {"parse_expr", "parse_term", "parse_unary", "eval"} <= titles, titles
