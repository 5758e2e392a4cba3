# SPDX-License-Identifier: MIT
"""libftpad and the ftpad tool on x86_64.

Most tests run over tests/src/runtime/pads_x86_64.S: functions with exactly the
plugin's pads and records, written by hand, so the runtime is tested layout
by layout (endbr64 or not, ops slot or not, name record or not, a broken
site) independently of the compiler.  tests/src/runtime/rt_main.c drives the
API and prints what it saw; everything is checked here against the ELF
files.  The last tests trace programs compiled with the real GCC plugin."""
import fnmatch
import os
import re

import pytest

import ftpadtest
from ftpadtest import (BUILD, FTPAD_BIN, INCLUDE, LIBFTPAD_A, LIBFTPAD_A_LIBS, LIBFTPAD_SO,
                       TEST_SRC, run)

SRC = TEST_SRC / "runtime"
PADS = SRC / "pads_x86_64.S"
RT_MAIN = SRC / "rt_main.c"
LIBDIR = BUILD / "runtime"

# The hand-made functions, (prefix-less name: has a valid site).
FUNCS = {"add1": True, "add1_endbr": True, "noslot": True, "noslot_endbr": True,
         "sum8": True, "calls_add1": True, "echo_regs": True, "echo_regs_noslot": True,
         "regs_probe": True, "bad": False}
VALID = sorted(p + f for p in ("t_", "so_") for f, ok in FUNCS.items() if ok)
# What rt_main's call_all() calls, in order, with the first argument; a
# call to t_calls_add1 is followed by its two calls to t_add1.
CALLS = [("t_add1", 1), ("t_add1_endbr", 1), ("t_noslot", 3), ("t_noslot_endbr", 3),
         ("t_sum8", 1), ("t_calls_add1", 5), ("t_add1", 5), ("t_add1", 6),
         ("so_add1", 10), ("so_noslot", 10), ("so_sum8", 10)]
SUMMARY = re.compile(r"ftpad: (\d+) sites found, (\d+) sites enabled, (\d+) calls seen")
TRACE_LINE = re.compile(r"(?P<comm>[^\s]+)-(?P<tid>\d+) (?P<func>\S+) <-(?P<caller>\S+)")

# A program that knows nothing of libftpad: for LD_PRELOAD and the tracer.
PLAIN_MAIN = r"""
#include <stdio.h>
long t_add1(long), t_calls_add1(long), t_noslot(long);
int main(void)
{
	printf("%ld\n", t_calls_add1(1) + t_noslot(1));
	return 0;
}
"""


@pytest.fixture(scope="session")
def progs(tmp_path_factory, libftpad):
    """Build the test programs once: rt_main against libftpad.so and against
    libftpad.a, libpads.so, and the plain program."""
    d = tmp_path_factory.mktemp("rt")
    rpath = f"-Wl,-rpath,{d}:{LIBDIR}"
    run(["gcc", "-shared", "-fPIC", "-DPREFIX=so_", PADS, "-o", d / "libpads.so"])
    common = ["gcc", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-DPREFIX=t_", f"-I{INCLUDE}"]
    run([*common, RT_MAIN, PADS, f"-L{d}", "-lpads", f"-L{LIBDIR}", "-lftpad", rpath,
         "-o", d / "rt_main"])
    run([*common, RT_MAIN, PADS, f"-L{d}", "-lpads", LIBFTPAD_A, *LIBFTPAD_A_LIBS, rpath,
         "-o", d / "rt_static"])
    (d / "plain.c").write_text(PLAIN_MAIN)
    run([*common, d / "plain.c", PADS, rpath, "-o", d / "plain"])
    # Linked statically with nothing calling ftpad: the tracer's constructor
    # must be pulled in, either way ftpad.h documents.
    run([*common, d / "plain.c", PADS, "-Wl,--whole-archive", LIBFTPAD_A,
         "-Wl,--no-whole-archive", *LIBFTPAD_A_LIBS, "-o", d / "plain_static"])
    run([*common, d / "plain.c", PADS, "-Wl,--undefined=ftpad_register_ops", LIBFTPAD_A,
         *LIBFTPAD_A_LIBS, "-o", d / "plain_static_u"])
    return d


def rt(progs, *args, prog="rt_main", env=None, check=True):
    return run([progs / prog, *args], env={**os.environ, **(env or {})}, check=check)


def parse_events(out):
    events = []
    for line in out.splitlines():
        if line.startswith("event "):
            fields = dict(kv.split("=", 1) for kv in line.split()[1:])
            fields["ops"] = int(fields["ops"])
            fields["ip"] = int(fields["ip"], 16)
            fields["parent"] = int(fields["parent"], 16)
            fields["args"] = [int(a) for a in fields["args"].split(",")]
            events.append(fields)
    return events


def stats(out, when):
    m = re.search(rf"^stats {when} modules=(\d+) sites=(\d+) enabled=(\d+)$", out, re.M)
    assert m, out
    return tuple(int(x) for x in m.groups())


def bases(out):
    m = re.search(r"^base exe=(0x[0-9a-f]+) lib=(0x[0-9a-f]+)$", out, re.M)
    return {"t_": int(m.group(1), 16), "so_": int(m.group(2), 16)}


def image_of(progs, name):
    return progs / ("libpads.so" if name.startswith("so_") else "rt_main")


def expected_calls(globs_list):
    """The (name, first argument) call_all() makes that these globs select."""
    globs = [g.strip() for g in globs_list.split(",") if g.strip()]
    return [(n, a) for n, a in CALLS
            if globs_list == "-" or any(fnmatch.fnmatchcase(n, g) for g in globs)]


def test_sites_found_in_pie_and_shared_library(progs):
    for path, prefix in ((progs / "rt_main", "t_"), (progs / "libpads.so", "so_")):
        with ftpadtest.Image(path) as image:
            assert image.elf["e_type"] == "ET_DYN"  # PIE, or shared object
            # Every function's record, and the stray one of a "function"
            # in .data (pads_x86_64.S) last.
            sites = image.sites()
            assert sorted(s.entry for s in sites[:-1]) == sorted(
                image.functions()[prefix + f][0] for f in FUNCS)
            assert sites[-1].name == prefix + "stray"
    p = rt(progs, "trace", "-")
    # Two modules, 9 good sites each; each module's broken site is refused,
    # and so is its stray record, although the record before it was code.
    assert stats(p.stdout, "before") == (2, 18, 0)
    assert stats(p.stdout, "enabled") == (2, 18, 18)
    assert stats(p.stdout, "after") == (2, 18, 0)
    for prefix in ("t_", "so_"):
        assert re.search(rf"warning: ftpad: {prefix}bad: the site is not the 5-byte NOP "
                         r"0f 1f 44 00 00 \(or 0f 1f 44 00 08\); not patched", p.stderr), p.stderr
        assert re.search(rf"warning: ftpad: {prefix}stray: its addresses are outside the "
                         r"module's code; not patched", p.stderr), p.stderr


@pytest.mark.parametrize("globs", [
    "-", "*", "t_add1", "t_add1*", "*noslot*,so_sum8", " t_sum8 , t_noslot ", "so_*",
    "t_?dd1", "t_[cn]*", "nothing_matches", "*bad",
])
def test_filter_selects_functions(progs, globs):
    p = rt(progs, "trace", globs)
    got = [(e["func"], e["args"][0]) for e in parse_events(p.stdout)]
    assert got == expected_calls(globs)
    patterns = [g.strip() for g in globs.split(",")]
    enabled = [n for n in VALID
               if globs == "-" or any(fnmatch.fnmatchcase(n, g) for g in patterns)]
    assert stats(p.stdout, "enabled")[2] == len(enabled)
    assert "after-unregister events=0" in p.stdout


def test_callbacks_get_entry_and_caller(progs):
    p = rt(progs, "trace", "*")
    base = bases(p.stdout)
    events = parse_events(p.stdout)
    assert len(events) == len(CALLS)
    funcs = {}
    for prefix, path in (("t_", progs / "rt_main"), ("so_", progs / "libpads.so")):
        with ftpadtest.Image(path) as image:
            funcs.update({n: (a + base[prefix], s) for n, (a, s) in image.functions().items()
                          if n.startswith(prefix) or n in ("call_all", "main")})
    for e, (name, _) in zip(events, CALLS):
        # ip is the symbol value, found by address in the process...
        assert e["func"] == name and e["ip"] == funcs[name][0]
        # ...and named by the record, or by .symtab where the record has none.
        assert e["lookup"] == name
        # parent_ip is the return address into the caller.
        caller = "t_calls_add1" if e["args"][0] in (5, 6) and name == "t_add1" else "call_all"
        start, size = funcs[caller]
        assert start < e["parent"] < start + size, (e, caller)
        assert e["caller"] == f"{caller}+{e['parent'] - start:#x}"


def test_arguments_from_registers_and_stack(progs):
    events = parse_events(rt(progs, "trace", "*sum8,*add1").stdout)
    sums = [e["args"] for e in events if e["func"].endswith("sum8")]
    assert sums == [[1, 2, 3, 4, 5, 6, 7, 8], [10, 20, 30, 40, 50, 60, 70, 80]]
    assert [e["args"][0] for e in events if e["func"] == "t_add1"] == [1, 5, 6]


def test_two_ops_on_one_function(progs):
    events = parse_events(rt(progs, "trace", "t_add1*", "t_add1,so_*").stdout)
    got = [(e["ops"], e["func"]) for e in events]
    assert got == [
        (0, "t_add1"), (1, "t_add1"), (0, "t_add1_endbr"),
        (0, "t_add1"), (1, "t_add1"), (0, "t_add1"), (1, "t_add1"),
        (1, "so_add1"), (1, "so_noslot"), (1, "so_sum8")]


def pads(out, phase):
    """{function: 32 bytes around its entry} as rt_main dumped them."""
    return {m.group(1): bytes.fromhex(m.group(2))
            for m in re.finditer(rf"^pad (\S+) {phase} ([0-9a-f]+)$", out, re.M)}


def file_pads(progs, names):
    out = {}
    for name in names:
        with ftpadtest.Image(image_of(progs, name)) as image:
            entry = image.functions()[name][0]
            out[name] = image.read(entry - 16, 32)
    return out


@pytest.mark.parametrize("method", [None, "procmem", "mprotect"])
def test_disable_restores_every_byte(progs, method):
    env = {"FTPAD_TEXT_WRITE": method} if method else {}
    p = rt(progs, "bytes", env=env)
    before, enabled, after = (pads(p.stdout, ph) for ph in ("before", "enabled", "after"))
    assert before == file_pads(progs, before)
    assert after == before
    base = bases(p.stdout)
    stub_pages = {}
    for name, code in enabled.items():
        with ftpadtest.Image(image_of(progs, name)) as image:
            site = next(s for s in image.sites() if s.entry == image.functions()[name][0])
            at = 16 + site.site - site.entry
            if code[at] == 0xE8:
                # The call goes to the module's own stub page, outside its
                # image and within rel32 of it.
                target = site.site + 5 + int.from_bytes(code[at + 1:at + 5], "little", signed=True)
                with pytest.raises(KeyError):
                    image.read(target, 1)
                prefix = "so_" if name.startswith("so_") else "t_"
                stub_pages.setdefault(prefix, set()).add((target + base[prefix]) & ~0xfff)
        # Offsets in the dump, which starts 16 bytes before the entry.
        at, end = 16 + site.site - site.entry, 16 + site.site - site.entry + site.after
        if name.endswith("bad"):
            assert code[8:end] == before[name][8:end]
            continue
        assert code[at] == 0xE8 and code[at + 5:end] == before[name][at + 5:end]
        assert code[16:at] == before[name][16:at]  # endbr64
        if site.ops:
            assert code[8:16] != before[name][8:16] == bytes.fromhex("0f1f840000000000")
    # One stub page per module: the program's and the library's differ.
    assert len(stub_pages["t_"]) == len(stub_pages["so_"]) == 1
    assert stub_pages["t_"] != stub_pages["so_"]


def test_idle_program_text_untouched(progs):
    p = rt(progs, "idle")
    assert stats(p.stdout, "idle") == (2, 18, 0)
    assert pads(p.stdout, "idle") == file_pads(progs, pads(p.stdout, "idle"))
    cow = dict(re.findall(r"^cow (\S+) (\d+)$", p.stdout, re.M))
    assert cow and set(cow.values()) == {"0"}, p.stdout
    # The same measure does see the pages a trace copied.
    cow = dict(re.findall(r"^cow (\S+) (\d+)$", rt(progs, "trace", "*").stdout, re.M))
    assert cow and "0" not in cow.values()


def test_trampoline_preserves_argument_registers(progs):
    """A callback clobbers every call-clobbered register; the function must
    still receive each argument register (rdi-r9, rax, r10, xmm0-7) as its
    caller set it, on every trampoline path: the fast one (sites with an
    ops slot), the one through C (without), and the full register save,
    in the program and in a library."""
    p = rt(progs, "regs")
    assert p.stdout == "regs ok 8\n"


def test_full_register_save(progs):
    """FTPAD_OPS_FL_SAVE_REGS: the callback reads rbx, rbp, r12-r15, the
    flags, rip and rsp as they were at the entry, and what it changes
    (rbx, rbp, r13, the carry flag) is what the function runs with and
    returns to its caller.  Without the flag, ftpad_get_pt_regs() is NULL."""
    p = rt(progs, "saveregs")
    want = ("rbx=0xb0 rbp=0xc0 r12=0x1212121212121212 r13=0x31 r15=0x1515151515151515 "
            "rax=0\n")
    assert p.stdout == f"t_ {want}so_ {want}full=2 partial=1 rbx=0xb0b0b0b0b0b0b0b\n"


def test_static_library(progs):
    assert not run(["nm", "-D", progs / "rt_static"]).stdout.count("ftpad_")
    p = rt(progs, "trace", "t_add1*,so_sum8", prog="rt_static")
    assert [(e["func"], e["args"][0]) for e in parse_events(p.stdout)] == \
        expected_calls("t_add1*,so_sum8")


def read_trace(text):
    """The call lines and the summary's numbers; the runtime's warnings
    (about the deliberately broken sites) may share stderr."""
    lines = [line for line in text.splitlines() if ": warning: ftpad: " not in line]
    calls = [TRACE_LINE.fullmatch(line) for line in lines[:-1]]
    assert all(calls), text
    assert SUMMARY.fullmatch(lines[-1]), text
    return calls, tuple(int(x) for x in SUMMARY.fullmatch(lines[-1]).groups())


PLAIN_TRACE = [("t_calls_add1", "main"), ("t_add1", "t_calls_add1"),
               ("t_add1", "t_calls_add1"), ("t_noslot", "main")]


@pytest.mark.parametrize("prog", ["rt_main", "plain_static", "plain_static_u"])
def test_builtin_tracer_from_environment(progs, tmp_path, prog):
    out = tmp_path / "trace.txt"
    args = ("idle",) if prog == "rt_main" else ()
    p = rt(progs, *args, prog=prog, env={"FTPAD_FILTER": "t_*", "FTPAD_OUTPUT": str(out)})
    calls, summary = read_trace(out.read_text())
    if prog == "rt_main":  # idle calls nothing traced
        assert calls == [] and summary == (18, 9, 0)
    else:
        assert [(c["func"], c["caller"]) for c in calls] == PLAIN_TRACE
        assert summary == (9, 9, 4)
        assert {c["comm"] for c in calls} == {prog} and len({c["tid"] for c in calls}) == 1
    assert p.returncode == 0


def test_record_preloads_into_unlinked_program(progs, tmp_path):
    assert "libftpad" not in run(["ldd", progs / "plain"]).stdout
    out = tmp_path / "sub" / "trace.txt"
    out.parent.mkdir()
    out.write_text("stale line\n")  # truncated by record
    p = run([FTPAD_BIN, "record", "--text", "-f", "t_*add1", "-o", out, "--", progs / "plain"],
            cwd=tmp_path)
    assert p.stdout == "5\n"
    calls, summary = read_trace(out.read_text())
    assert [(c["func"], c["caller"]) for c in calls] == PLAIN_TRACE[:3]
    assert summary == (9, 2, 3)
    assert calls[0]["comm"] == "plain" and int(calls[0]["tid"]) > 0


def test_record_defaults_to_all_functions_on_stderr(progs):
    p = run([FTPAD_BIN, "record", "--text", progs / "plain"])
    calls, summary = read_trace(p.stderr)
    assert [(c["func"], c["caller"]) for c in calls] == PLAIN_TRACE
    assert summary == (9, 9, 4)


def test_record_keeps_existing_preload(progs, tmp_path):
    # An LD_PRELOAD the user had stays in force after libftpad.
    p = run([FTPAD_BIN, "record", "--text", "--filter=t_noslot", "--", "sh", "-c", 'echo "$LD_PRELOAD"'],
            env={**os.environ, "LD_PRELOAD": "/nonexistent.so"})
    assert p.stdout.strip() == f"{LIBFTPAD_SO.resolve()}:/nonexistent.so"


@pytest.mark.parametrize("args,message", [
    ([], "missing command"),
    (["bogus"], "unknown command 'bogus'"),
    (["--bogus"], "unknown option '--bogus'"),
    (["record", "--text"], "record: missing PROG"),
    (["record", "--text", "--"], "record: missing PROG"),
    (["record", "--text", "--bogus", "--", "true"], "record: unknown option '--bogus'"),
    (["record", "--text", "-x", "true"], "record: unknown option '-x'"),
    (["record", "--text", "-f"], "record: option '-f' needs an argument"),
    (["record", "--text", "--output"], "record: option '--output' needs an argument"),
    (["record", "--text", "-f", "", "true"], "record: option '-f' needs at least one glob"),
    (["record", "--text", "--filter", " , ", "true"], "record: option '--filter' needs at least one glob"),
    (["record", "--text", "-o", "", "true"], "record: option '-o' needs a file name"),
])
def test_cli_usage_errors(args, message):
    p = run([FTPAD_BIN, *args], check=False)
    assert p.returncode == 2, p
    assert p.stderr.startswith(f"ftpad: error: {message}"), p.stderr
    assert p.stdout == ""


def test_cli_help_and_version():
    # ftpad --help: one line per subcommand, from cli/ftpad.c's table.
    p = run([FTPAD_BIN, "--help"])
    assert p.stdout.startswith("usage: ftpad COMMAND [ARGS...]")
    for command in ["record", "attach", "replay", "report", "dump", "live", "flame"]:
        assert re.search(rf"^  {command} +\S", p.stdout, re.M), command
    p = run([FTPAD_BIN, "record", "--help"])
    assert p.stdout.startswith("usage: ftpad record [-F GLOB]... [-N GLOB]... [--depth N]")
    assert "ftpad record --text [-f|--filter GLOBS] [-o|--output FILE]" in p.stdout
    assert run([FTPAD_BIN, "record", "--help"]).stdout == p.stdout
    assert run([FTPAD_BIN, "record", "--text", "--help"]).stdout == p.stdout
    assert re.fullmatch(r"ftpad \d+\.\d+\.\d+\n", run([FTPAD_BIN, "--version"]).stdout)


def test_cli_runtime_errors(tmp_path):
    p = run([FTPAD_BIN, "record", "--text", "--", tmp_path / "nope"], check=False)
    assert p.returncode == 127 and "cannot run" in p.stderr and "nope" in p.stderr
    p = run([FTPAD_BIN, "record", "--text", "-o", tmp_path / "no" / "dir", "true"], check=False)
    assert p.returncode == 1 and "--output" in p.stderr
    p = run([FTPAD_BIN, "record", "--text", "true"], check=False,
            env={**os.environ, "FTPAD_LIB": str(tmp_path / "none.so")})
    assert p.returncode == 1 and "FTPAD_LIB" in p.stderr


# ---- with the real GCC plugin ---------------------------------------------

PLUGIN_PROG = r"""
#include <stdio.h>
#include <stdlib.h>
int lib_twice(int);
__attribute__((noinline)) int parse_num(const char *s) { return atoi(s); }
__attribute__((noinline)) int parse_expr(const char *a, const char *b)
{
	return parse_num(a) + parse_num(b);
}
int main(int argc, char **argv)
{
	printf("%d\n", lib_twice(parse_expr(argc > 1 ? argv[1] : "2", "3")));
	return 0;
}
"""
PLUGIN_LIB = r"""
__attribute__((noinline)) int lib_helper(int x) { return x + x; }
int lib_twice(int x) { return lib_helper(x) + 1; /* no tail call */ }
"""


@pytest.mark.parametrize("flags", [
    ["-O2"], ["-O0"], ["-Os", "-fcf-protection=full"], ["-O2", "-fplugin-arg-ftpad-ops=0"],
    ["-O2", "-fplugin-arg-ftpad-before=3", "-fplugin-arg-ftpad-after=8"],
], ids=lambda f: " ".join(f))
def test_plugin_program_traced(plugin, libftpad, tmp_path, flags):
    (tmp_path / "prog.c").write_text(PLUGIN_PROG)
    (tmp_path / "lib.c").write_text(PLUGIN_LIB)
    cc = ["gcc", f"-fplugin={plugin}", *flags, "-g"]
    run([*cc, "-shared", "-fPIC", tmp_path / "lib.c", "-o", tmp_path / "liblib.so"])
    run([*cc, tmp_path / "prog.c", f"-L{tmp_path}", "-llib", f"-Wl,-rpath,{tmp_path}",
         "-o", tmp_path / "prog"])
    out = tmp_path / "trace.txt"
    p = run([FTPAD_BIN, "record", "--text", "-f", "parse_*,lib_*", "-o", out, "--", tmp_path / "prog", "4"])
    assert p.stdout == "15\n"
    calls, (found, enabled, seen) = read_trace(out.read_text())
    assert [(c["func"], c["caller"]) for c in calls] == [
        ("parse_expr", "main"), ("parse_num", "parse_expr"), ("parse_num", "parse_expr"),
        ("lib_twice", "main"), ("lib_helper", "lib_twice")]
    assert (enabled, seen) == (4, 5) and found >= 5  # main is padded too


THREADS_MAIN = r"""
#include <pthread.h>
#include <stdio.h>
long t_add1(long);
static void *work(void *arg)
{
	long sum = 0;
	for (int i = 0; i < 1000; i++)
		sum += t_add1(i);
	*(long *)arg = sum;
	return NULL;
}
int main(void)
{
	pthread_t t[4];
	long sums[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, work, &sums[i]);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("%ld\n", sums[0] + sums[1] + sums[2] + sums[3]);
	return 0;
}
"""


def test_tracer_counts_calls_from_threads(progs, tmp_path):
    """Patched before the threads start, the sites are called concurrently:
    every call gets one whole line and the summary counts them all."""
    (tmp_path / "threads.c").write_text(THREADS_MAIN)
    run(["gcc", "-O1", "-pthread", tmp_path / "threads.c", PADS, "-DPREFIX=t_",
         "-o", tmp_path / "threads"])
    out = tmp_path / "trace.txt"
    p = run([FTPAD_BIN, "record", "--text", "-f", "t_add1", "-o", out, "--", tmp_path / "threads"])
    assert p.stdout == f"{4 * 500500}\n"
    calls, summary = read_trace(out.read_text())
    assert summary == (9, 1, 4000) and len(calls) == 4000
    assert {(c["comm"], c["func"], c["caller"]) for c in calls} == {("threads", "t_add1", "work")}
    assert len({c["tid"] for c in calls}) == 4
