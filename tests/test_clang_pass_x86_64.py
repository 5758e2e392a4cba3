# SPDX-License-Identifier: MIT
"""ftpad-clang.so, the clang 14 plugin, on x86_64: the same user layout and
records as the GCC plugin, read back from real objects and linked programs,
and traced by libftpad.  The one byte that differs is the site's: LLVM
encodes its 5-byte NOP as 0f 1f 44 00 08 (docs/clang-pass.md)."""
import itertools
import json
import pathlib
import re

import capstone
import pytest

import test_gcc_plugin_x86_64 as x86
from ftpadtest import (BUILD, FLAG_ENDBR, FTPAD_BIN, INCLUDE, Image, check_records,
                       plugin_flags, run)

SRC = pathlib.Path(__file__).parent / "src"
CLANG_PLUGIN = BUILD / "clang-pass" / "ftpad-clang.so"
LLVM_NOP5 = bytes.fromhex("0f1f440008")
SUMMARY = re.compile(r"^ftpad: (\d+) sites found, (\d+) sites enabled, (\d+) calls seen$")


@pytest.fixture(scope="session")
def clang_plugin():
    if not CLANG_PLUGIN.exists():
        pytest.fail(f"{CLANG_PLUGIN} is missing: run `make` (needs libclang-14-dev)")
    return CLANG_PLUGIN


def clang_flags(**args):
    """-fplugin=ftpad-clang.so and -fplugin-arg-ftpad-clang-KEY=VALUE."""
    return [f"-fplugin={CLANG_PLUGIN}", *(
        f"-fplugin-arg-ftpad-clang-{k.replace('_', '-')}={v}" for k, v in args.items())]


def build(tmp_path, source, flags, plugin_args=None, link=True):
    compiler = "clang++-14" if source.suffix == ".cc" else "clang-14"
    obj = tmp_path / (source.stem + ".o")
    run([compiler, *flags, *clang_flags(**(plugin_args or {})), "-c", source, "-o", obj])
    if not link:
        return obj, None
    exe = tmp_path / source.stem
    run([compiler, *flags, obj, "-o", exe])
    return obj, exe


def disassemble(code, addr, count):
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    return list(itertools.islice(md.disasm(code, addr), count))


def check_site(image, site, before, ops=True):
    """The GCC plugin's x86_64 layout with clang's site encoding; clang
    only allows after=5, so nothing but the function follows the site."""
    x86.check_site(image, site, before, 5, ops, nop5=LLVM_NOP5)


def starts_with_pad(image, addr):
    return x86.starts_with_pad(image, addr, nop5=LLVM_NOP5)


def check_program(obj, exe, before=0, ops=True, padded=lambda name: "skip_" not in name):
    return check_records(obj, exe, lambda image, site: check_site(image, site, before, ops),
                         starts_with_pad, padded)


CF = [[], ["-fcf-protection"]]


@pytest.mark.parametrize("source", ["layout.c", "layout.cc"])
@pytest.mark.parametrize("opt", ["-O0", "-O2", "-Os"])
@pytest.mark.parametrize("cf", CF, ids=["plain", "cf-protection"])
def test_default_layout(tmp_path, clang_plugin, source, opt, cf):
    obj, exe = build(tmp_path, SRC / source, [opt, *cf])
    sites = check_program(obj, exe)
    assert any(s.flags & FLAG_ENDBR for s in sites) == bool(cf)
    run([exe])


@pytest.mark.parametrize("before,ops", [(0, 0), (3, 1), (9, 0), (16, 1), (255, 1)])
@pytest.mark.parametrize("cf", CF, ids=["plain", "cf-protection"])
def test_counts(tmp_path, clang_plugin, before, ops, cf):
    obj, exe = build(tmp_path, SRC / "layout.c", ["-O2", *cf], dict(before=before, ops=ops))
    check_program(obj, exe, before, bool(ops))
    run([exe])


@pytest.mark.parametrize("flags", [["-Os"], ["-O2", "-falign-functions=1"],
                                   ["-O3", "-fcf-protection", "-falign-functions=1"]])
def test_alignment_is_forced(tmp_path, clang_plugin, flags):
    """-Os and cold functions lose LLVM's alignment; the ops slot must stay
    8-aligned anyway (checked in check_site)."""
    obj, exe = build(tmp_path, SRC / "layout.c", flags)
    assert any(s.name == "rarely" for s in check_program(obj, exe))


def test_pass_plugin_given_too_runs_once(tmp_path, clang_plugin):
    """-fplugin= adds the pass itself; -fpass-plugin= as well must not give
    every function two records."""
    obj, exe = build(tmp_path, SRC / "layout.c", ["-O2", f"-fpass-plugin={CLANG_PLUGIN}"])
    check_program(obj, exe)


def test_pass_plugin_alone_pads_everything(tmp_path, clang_plugin):
    """Without the frontend half nothing tells the pass about
    no_instrument_function or patchable_function_entry(0, 0), which clang
    leaves out of the IR, so those get a pad too."""
    obj = tmp_path / "layout.o"
    run(["clang-14", "-O2", f"-fpass-plugin={CLANG_PLUGIN}", "-c", SRC / "layout.c", "-o", obj])
    exe = tmp_path / "layout"
    run(["clang-14", obj, "-o", exe])
    check_program(obj, exe, padded=lambda n: n != "skip_naked")


@pytest.mark.parametrize("linker", ["bfd", "gold", "lld"])
def test_records_follow_gc_sections(tmp_path, clang_plugin, linker):
    src = tmp_path / "gc.c"
    src.write_text("int dropped(int x) { return x * 3; }\n"
                   "__attribute__((noinline)) int kept(int x) { return x + 2; }\n"
                   "int main(int c, char **v) { (void)v; return kept(c); }\n")
    exe = tmp_path / "gc"
    run(["clang-14", "-O2", "-ffunction-sections", f"-fuse-ld={linker}", "-Wl,--gc-sections",
         *clang_flags(), src, "-o", exe])
    with Image(exe) as image:
        assert sorted(s.name for s in image.sites()) == ["kept", "main"]


@pytest.mark.parametrize("linker", ["bfd", "gold", "lld"])
def test_comdat_one_record_per_function(tmp_path, clang_plugin, linker):
    exe = tmp_path / "prog"
    run(["clang++-14", "-O2", f"-fuse-ld={linker}", *clang_flags(),
         SRC / "comdat_a.cc", SRC / "comdat_b.cc", "-o", exe])
    with Image(exe) as image:
        names = [s.name for s in image.sites()]
        assert len(names) == len(set(names)), f"duplicate records: {sorted(names)}"
        assert {"_Z13shared_inlinei", "_Z12shared_twiceIiET_S0_", "main"} <= set(names)
        funcs = image.functions()
        for site in image.sites():
            assert funcs[site.name][0] == site.entry
    assert run([exe]).stdout.strip() == "13"


def test_deterministic(tmp_path, clang_plugin):
    objects = []
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        obj, _ = build(tmp_path / sub, SRC / "layout.cc", ["-O2", "-fcf-protection"], link=False)
        objects.append(obj.read_bytes())
    assert objects[0] == objects[1]


@pytest.mark.parametrize("arg", ["before=-1", "before=256", "after=abc", "after=6", "ops=2",
                                 "include=a,,b", "min-insns=65536", "report=", "bogus=1",
                                 "before"])
def test_bad_arguments(tmp_path, clang_plugin, arg):
    obj = tmp_path / "x.o"
    p = run(["clang-14", "-c", SRC / "layout.c", "-o", obj, f"-fplugin={CLANG_PLUGIN}",
             f"-fplugin-arg-ftpad-clang-{arg}"], check=False)
    assert p.returncode != 0
    assert f"-fplugin-arg-ftpad-clang-{arg}" in p.stderr, p.stderr
    assert not obj.exists()


def record(tmp_path, exe, filt):
    """Run exe under `ftpad record`; the trace's lines."""
    trace = tmp_path / "trace.txt"
    p = run([FTPAD_BIN, "record", "--filter", filt, "-o", trace, "--", exe])
    return p.stdout, trace.read_text().splitlines()


HELLO = ('#include <stdio.h>\n'
         '__attribute__((noinline)) int greet(int n) { return printf("hi %d\\n", n); }\n'
         'int main(void) { return greet(1) < 0; }\n')


@pytest.mark.parametrize("flags", [["-O2"], ["-O0", "-fcf-protection"], ["-Os", "-fPIE", "-pie"],
                                   ["-O2", "-flto=thin", "-fuse-ld=lld"],
                                   ["-O2", "-flto=full", "-fuse-ld=lld"]])
def test_ftpad_record_traces_a_clang_program(tmp_path, clang_plugin, libftpad, flags):
    src = tmp_path / "hello.c"
    src.write_text(HELLO)
    exe = tmp_path / "hello"
    run(["clang-14", *flags, *clang_flags(), src, "-o", exe])
    out, lines = record(tmp_path, exe, "greet")
    assert out == "hi 1\n"
    assert re.fullmatch(r"hello-\d+ greet <-main", lines[0]), lines
    m = SUMMARY.match(lines[-1])
    assert m and m.groups() == ("2", "1", "1"), lines[-1]


def test_mixed_gcc_and_clang_program(tmp_path, plugin, clang_plugin, libftpad):
    """Half the program from gcc with its plugin, half from clang with this
    one: one table, both site encodings, every function traced."""
    (tmp_path / "g.c").write_text(
        "int from_clang(int);\n"
        "__attribute__((noinline)) int from_gcc(int x) { return from_clang(x) + 1; }\n")
    (tmp_path / "c.c").write_text(
        "#include <stdio.h>\n"
        "int from_gcc(int);\n"
        "__attribute__((noinline)) int from_clang(int x) { return x * 2; }\n"
        "int main(int argc, char **v) { (void)v; printf(\"%d\\n\", from_gcc(argc)); return 0; }\n")
    run(["gcc", "-O2", "-fcf-protection", *plugin_flags(before=3), "-c", tmp_path / "g.c",
         "-o", tmp_path / "g.o"])
    run(["clang-14", "-O2", "-fcf-protection", *clang_flags(), "-c", tmp_path / "c.c",
         "-o", tmp_path / "c.o"])
    exe = tmp_path / "mixed"
    run(["gcc", tmp_path / "g.o", tmp_path / "c.o", "-o", exe])
    with Image(exe) as image:
        sites = {s.name: s for s in image.sites()}
        assert sorted(sites) == ["from_clang", "from_gcc", "main"]
        assert sites["from_gcc"].before == 3 and sites["from_clang"].before == 0
        assert image.read(sites["from_gcc"].site, 5) == bytes.fromhex("0f1f440000")
        check_site(image, sites["from_clang"], 0)
    out, lines = record(tmp_path, exe, "from_*")
    assert out == "3\n"
    assert [l.split(" ", 1)[1] for l in lines[:2]] == ["from_gcc <-main", "from_clang <-from_gcc"]
    assert SUMMARY.match(lines[-1]).groups() == ("3", "2", "2"), lines[-1]


def test_api_program_built_with_clang(tmp_path, clang_plugin, libftpad):
    """The README's way: a program that links -lftpad and registers its own
    ops, built by clang, sees its arguments."""
    src = tmp_path / "api.c"
    src.write_text(
        "#include <ftpad.h>\n#include <stdio.h>\n"
        "static unsigned long seen;\n"
        "static void on_entry(unsigned long ip, unsigned long parent_ip,\n"
        "                     struct ftpad_ops *ops, struct ftpad_regs *regs)\n"
        "{ (void)ip; (void)parent_ip; (void)ops; seen += ftpad_regs_get_argument(regs, 0); }\n"
        "static struct ftpad_ops ops = { .func = on_entry };\n"
        "__attribute__((noinline)) int parse_one(int x) { return x + 1; }\n"
        "int main(void) {\n"
        "  ftpad_set_filter(&ops, \"parse_*\", 1);\n"
        "  if (ftpad_register_ops(&ops)) return 2;\n"
        "  int s = parse_one(40) + parse_one(2);\n"
        "  printf(\"%d %lu\\n\", s, seen);\n"
        "  return 0;\n}\n")
    exe = tmp_path / "api"
    run(["clang-14", "-O2", "-fcf-protection", *clang_flags(), f"-I{INCLUDE}", src, "-o", exe,
         f"-L{BUILD / 'runtime'}", "-lftpad", f"-Wl,-rpath,{BUILD / 'runtime'}"])
    assert run([exe]).stdout == "44 42\n"


@pytest.mark.parametrize("unsafe", [0, 1], ids=["plugin", "control"])
def test_ipra_stays_off(tmp_path, clang_plugin, libftpad, unsafe):
    """tests/src/ipa_ra.c with -mllvm -enable-ipra: the plugin turns IPRA
    off so the caller stays right while a callback clobbers every
    call-clobbered register; the control leaves it on and must go wrong."""
    from test_ipa_ra import SRC as IPA_RA_SRC, caller_keeps_values_in
    exe = tmp_path / "ipra"
    run(["clang-14", "-O2", "-mllvm", "-enable-ipra", f"-I{INCLUDE}",
         *clang_flags(unsafe_ipa_ra=unsafe), IPA_RA_SRC, "-o", exe,
         f"-L{BUILD / 'runtime'}", "-lftpad", f"-Wl,-rpath,{BUILD / 'runtime'}"])
    p = run([exe], check=False)
    if unsafe:
        assert caller_keeps_values_in(exe), "the control no longer exercises IPRA"
        assert p.returncode == 1 and p.stdout.startswith("MISMATCH"), p.stdout + p.stderr
    else:
        assert not caller_keeps_values_in(exe)
        assert p.returncode == 0 and p.stdout.startswith("OK"), p.stdout + p.stderr


# The policy: the GCC plugin's rules (docs/gcc-plugin.md "Which functions
# get a pad") from clang, on the GCC policy tests' source.
def compile_policy(tmp_path, flags=(), **args):
    from test_gcc_plugin_policy import SOURCE
    src = tmp_path / "prog.c"
    src.write_text(SOURCE.replace("ftpad(3, 9)", "ftpad(3, 5)"))
    exe = tmp_path / "prog"
    run(["clang-14", "-O2", *flags, *clang_flags(**args), src, "-o", exe])
    run([exe])
    with Image(exe) as image:
        sites = {s.name: s for s in image.sites()}
        for site in sites.values():
            check_site(image, site, site.before, site.ops != 0)
    return {name: s.before for name, s in sites.items()}


POLICY_ALL = {"tiny", "attr_tiny", "loop", "init_fn", "noinstr_fn", "helper_a", "helper_b", "main"}


@pytest.mark.parametrize("cf", CF, ids=["plain", "cf-protection"])
@pytest.mark.parametrize("before", [0, 2])
def test_attribute_sets_one_layout(tmp_path, clang_plugin, cf, before):
    want = dict.fromkeys(POLICY_ALL, before)
    want["attr_tiny"] = 3
    assert compile_policy(tmp_path, cf, before=before) == want


@pytest.mark.parametrize("args,padded", [
    (dict(include="helper_*"), {"helper_a", "helper_b"}),
    (dict(exclude="helper_*,main"), POLICY_ALL - {"helper_a", "helper_b", "main"}),
    (dict(include="helper_*", exclude="helper_b"), {"helper_a"}),
    (dict(exclude_section=".init.text,.noinstr.text"), POLICY_ALL - {"init_fn", "noinstr_fn"}),
    # The section rule, like the GCC plugin's, does not see .text.* names.
    (dict(exclude_section=".text.*"), POLICY_ALL),
    # The build's switches win over the attribute.
    (dict(exclude="attr_*"), POLICY_ALL - {"attr_tiny"}),
])
def test_include_exclude(tmp_path, clang_plugin, args, padded):
    assert set(compile_policy(tmp_path, ["-ffunction-sections"], **args)) == padded


def test_min_insns_and_report(tmp_path, clang_plugin):
    """min-insns skips small loop-free functions by the IR estimate, never
    the loop or the attributed one; the report says why for each function
    and agrees with the records."""
    report = tmp_path / "report.jsonl"
    sites = compile_policy(tmp_path, min_insns=10, report=report)
    assert set(sites) == {"attr_tiny", "loop", "main"}
    lines = [json.loads(l) for l in report.read_text().splitlines()]
    by_name = {r["function"]: r for r in lines}
    assert len(by_name) == len(lines) == 11
    assert {n for n, r in by_name.items() if r["decision"] == "pad"} == set(sites)
    assert by_name["tiny"]["reason"] == "2 insns < min-insns 10, no loop"
    assert by_name["loop"]["reason"] == "default"
    assert by_name["attr_tiny"] == {
        "function": "attr_tiny", "source": str(tmp_path / "prog.c"), "section": ".text",
        "decision": "pad", "reason": "ftpad attribute", "before": 3, "after": 5,
        "insns": 2, "loop": False}
    assert (by_name["loop"]["loop"], by_name["tiny"]["loop"]) == (True, False)
    # The counts in the report are the ones min-insns decided on.
    for r in by_name.values():
        if r["reason"] == "default":
            assert r["insns"] >= 10 or r["loop"], r
        elif "min-insns" in r["reason"]:
            assert r["reason"] == f"{r['insns']} insns < min-insns 10, no loop", r
    assert by_name["init_fn"]["section"] == ".init.text"
    assert {by_name[n]["reason"] for n in ("notrace_fn", "naked_fn", "user_pfe")} == {
        "no_instrument_function", "naked", "user patchable_function_entry"}


def test_attribute_in_cxx(tmp_path, clang_plugin):
    src = tmp_path / "a.cc"
    src.write_text("__attribute__((noinline, ftpad(4, 5))) int f(int x) { return x + 1; }\n"
                   "template <int N> __attribute__((noinline, ftpad(6, 5)))\n"
                   "int t(int x) { return x * N; }\n"
                   "struct S { __attribute__((noinline, ftpad(7, 5))) S(int x); int v; };\n"
                   "S::S(int x) : v(x) {}\n"
                   "__attribute__((no_instrument_function)) int quiet(int x) { return x; }\n"
                   "int main(int c, char **) { return f(c) + t<2>(c) + t<3>(c) + S(c).v"
                   " + quiet(c); }\n")
    exe = tmp_path / "a"
    run(["clang++-14", "-O2", *clang_flags(), src, "-o", exe])
    with Image(exe) as image:
        sites = {s.name: s.before for s in image.sites()}
    assert sites == {"_Z1fi": 4, "_Z1tILi2EEii": 6, "_Z1tILi3EEii": 6, "_ZN1SC2Ei": 7,
                     "main": 0}, sites


@pytest.mark.parametrize("decl,message", [
    ("__attribute__((ftpad(1))) int f(int x) { return x; }", "requires exactly 2 arguments"),
    ("int n; __attribute__((ftpad(n, 5))) int f(int x) { return x; }",
     "ftpad(before, after) on 'f' needs two small integer constants"),
    # clang keeps no plugin attribute on a template to instantiate later.
    ("template <int N> __attribute__((ftpad(N, 5))) int f(int x) { return x; }",
     "ftpad(before, after) on 'f' needs two small integer constants"),
    ("__attribute__((ftpad(3, 9))) int f(int x) { return x; }",
     "ftpad attribute on 'f': after must be 5"),
    ("__attribute__((ftpad(256, 5))) int f(int x) { return x; }",
     "ftpad attribute on 'f': before must be 0 to 255"),
    ("__attribute__((ftpad(1, 5))) int v;", "the ftpad attribute only applies to functions"),
])
def test_attribute_errors(tmp_path, clang_plugin, decl, message):
    src = tmp_path / ("bad.cc" if "template" in decl else "bad.c")
    src.write_text(decl + "\n")
    obj = tmp_path / "bad.o"
    p = run(["clang-14", "-c", *clang_flags(), src, "-o", obj], check=False)
    assert p.returncode != 0 and message in p.stderr, p.stderr
    assert not obj.exists()


def test_traces_a_clang_shared_library(tmp_path, clang_plugin, libftpad):
    """-fPIC: default-visibility functions may be interposed, yet the table
    must stay read-only and hold the library's own entries."""
    (tmp_path / "lib.c").write_text(
        '#include <stdio.h>\nint greet(int n) { return printf("hi %d\\n", n); }\n')
    (tmp_path / "main.c").write_text("int greet(int);\nint main(void) { return greet(1) < 0; }\n")
    lib = tmp_path / "libgreet.so"
    run(["clang-14", "-O2", "-fPIC", "-shared", *clang_flags(), tmp_path / "lib.c", "-o", lib])
    exe = tmp_path / "hello"
    run(["clang-14", "-O2", tmp_path / "main.c", f"-L{tmp_path}", "-lgreet",
         f"-Wl,-rpath,{tmp_path}", "-o", exe])
    with Image(lib) as image:
        assert not image.elf.get_section_by_name("__ftpad_sites")["sh_flags"] & 1, "writable"
        (site,) = image.sites()
        assert site.name == "greet" and image.functions()["greet"][0] == site.entry
        check_site(image, site, 0)
    out, lines = record(tmp_path, exe, "greet")
    assert out == "hi 1\n"
    assert re.fullmatch(r"hello-\d+ greet <-main", lines[0]), lines


# A real code base: googletest and googlemock (Debian package googletest),
# about 20 000 lines of C++ with templates, COMDAT, constructors and thunks.
GTEST = pathlib.Path("/usr/src/googletest")
CRT = {"_init", "_fini", "deregister_tm_clones", "register_tm_clones",
       "__do_global_dtors_aux", "frame_dummy"}


# -O2 only: -Os is covered by the C code base below, and this build is the
# slowest of the file.
@pytest.mark.parametrize("opt", ["-O2"])
def test_real_code_base(tmp_path, clang_plugin, opt):
    lib = tmp_path / "libgtest.so"
    run(["clang++-14", opt, "-fPIC", "-shared", "-fcf-protection", *clang_flags(),
         f"-I{GTEST}/googletest/include", f"-I{GTEST}/googletest",
         f"-I{GTEST}/googlemock/include", f"-I{GTEST}/googlemock",
         GTEST / "googletest/src/gtest-all.cc", GTEST / "googlemock/src/gmock-all.cc",
         "-o", lib, "-lpthread"])
    with Image(lib) as image:
        sites = image.sites()
        entries = {s.entry for s in sites}
        assert len(entries) == len(sites), "two records for one function"
        for site in sites:
            check_site(image, site, 0)
        emitted = {addr for name, (addr, _) in image.functions().items() if name not in CRT}
        assert entries == emitted
        assert len(sites) > 500


@pytest.mark.parametrize("linker", ["bfd", "gold", "lld"])
def test_mixed_comdat(tmp_path, plugin, clang_plugin, linker):
    """The same inline functions from g++ and from clang++: the linker keeps
    one COMDAT group, and the record inside it, whichever compiler made it."""
    objs = []
    for compiler, flags, src in (("g++", plugin_flags(), "comdat_a.cc"),
                                 ("clang++-14", clang_flags(), "comdat_b.cc")):
        objs.append(tmp_path / (src + ".o"))
        run([compiler, "-O2", *flags, "-c", SRC / src, "-o", objs[-1]])
    exe = tmp_path / "prog"
    run(["g++", f"-fuse-ld={linker}", *objs, "-o", exe])
    with Image(exe) as image:
        names = [s.name for s in image.sites()]
        assert len(names) == len(set(names)), f"duplicate records: {sorted(names)}"
        assert {"_Z13shared_inlinei", "_Z12shared_twiceIiET_S0_", "_Z6from_ai",
                "_Z6from_bi", "main"} <= set(names)
        funcs = image.functions()
        for site in image.sites():
            assert funcs[site.name][0] == site.entry
    assert run([exe]).stdout.strip() == "13"
    out, lines = record(tmp_path, exe, "*shared*")
    assert SUMMARY.match(lines[-1]).group(3) != "0", lines


def check_against_report(binary, report):
    """Every function of BINARY that the report says was padded has exactly
    one record, at its symbol, with the whole layout; every other function
    the report names has none, and no function escaped the report."""
    decisions = {r["function"]: r["decision"]
                 for r in map(json.loads, report.read_text().splitlines())}
    with Image(binary) as image:
        sites = image.sites()
        funcs = {name: addr for name, (addr, _) in image.functions().items() if name not in CRT}
        assert len({s.entry for s in sites}) == len(sites), "two records for one function"
        for site in sites:
            check_site(image, site, 0)
        own = {n: a for n, a in funcs.items() if n in decisions}
        padded = {a for n, a in own.items() if decisions[n] == "pad"}
        assert {s.entry for s in sites} == padded
    return set(funcs) - set(own)


# A real C code base: this project's own recordmcount-ng and libftpad,
# about 4 800 lines, built by clang with the plugin.
RMC_SOURCES = ["main.c", "mcount.c", "elfobj.c", "arch.c", "arch/x86.c", "arch/arm64.c"]
LIBFTPAD_SOURCES = ["grace.c", "log.c", "module.c", "ops.c", "patch.c", "symbols.c", "text.c",
                    "tracer.c", "dlhooks.c", "arch/x86_64.c", "arch/trampoline_x86_64.S"]


@pytest.mark.parametrize("opt", ["-O2", "-Os"])
def test_real_c_code_base(tmp_path, clang_plugin, opt):
    from ftpadtest import ROOT
    report = tmp_path / "rmc.jsonl"
    rmc = tmp_path / "recordmcount-ng"
    run(["clang-14", opt, "-fcf-protection", *clang_flags(report=report),
         '-DFTPAD_VERSION="test"', *(ROOT / "recordmcount" / s for s in RMC_SOURCES),
         "-lelf", "-o", rmc])
    # Functions from no source of ours: only the C runtime's.
    assert check_against_report(rmc, report) <= {"_start", "_dl_relocate_static_pie"}
    assert run([rmc, "--version"], check=False).returncode == 0

    report = tmp_path / "libftpad.jsonl"
    lib = tmp_path / "libftpad.so"
    run(["clang-14", opt, "-fPIC", "-shared", "-fvisibility=hidden", *clang_flags(report=report),
         f"-I{INCLUDE}", f"-I{ROOT / 'runtime'}", "-Wl,--version-script",
         ROOT / "runtime" / "libftpad.map", *(ROOT / "runtime" / s for s in LIBFTPAD_SOURCES),
         "-o", lib, "-lpthread", "-ldl"])
    # The trampoline is assembly, pthread_atfork comes from libc_nonshared.a.
    assert check_against_report(lib, report) == {"ftpad_trampoline", "pthread_atfork",
                                                 "__pthread_atfork"}
