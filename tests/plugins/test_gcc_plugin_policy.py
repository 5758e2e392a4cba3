# SPDX-License-Identifier: MIT
"""The GCC plugin's per-function policy: the ftpad attribute, include and
exclude globs, exclude-section, min-insns and the JSON report, checked on
real compiles through the records, the bytes and the report.  The checks
that hold for both plugins (the layout before= and after= give, include
and exclude) are test_plugin_arguments.py's, over every default compiler."""
import json
import re

import pytest

from ftpadtest import A64_PLUGIN, Image, PLUGIN, ROOT, plugin_flags, run
from test_gcc_plugin_x86_64 import check_site

# Functions chosen so each policy has something to bite on: a tiny leaf, a
# loop, an attributed tiny leaf, a function in .init.text, notrace.
SOURCE = r"""
#define KEEP __attribute__((noinline, used))
KEEP int tiny(int x) { return x + 1; }
KEEP __attribute__((ftpad(3, 9))) int attr_tiny(int x) { return x + 2; }
KEEP int loop(int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i] * 3; return s; }
KEEP __attribute__((section(".init.text"))) int init_fn(int x) { return x * 7; }
KEEP __attribute__((section(".noinstr.text"))) int noinstr_fn(int x) { return x * 9; }
KEEP __attribute__((no_instrument_function)) int notrace_fn(int x) { return x * 5; }
KEEP __attribute__((naked)) void naked_fn(void) { __asm__("ret"); }
KEEP __attribute__((patchable_function_entry(0, 0))) int user_pfe(int x) { return x * 11; }
KEEP int helper_a(int x) { return x - 3; }
KEEP int helper_b(int x) { return x - 4; }
int main(int c, char **v) {
    int a[4] = {c, 2, 3, 4};
    (void)v;
    naked_fn();
    return (tiny(c) + attr_tiny(c) + loop(a, 4) + init_fn(c) + noinstr_fn(c)
            + notrace_fn(c) + user_pfe(c) + helper_a(c) + helper_b(c)) & 0;
}
"""
ALL = {"tiny", "attr_tiny", "loop", "init_fn", "noinstr_fn", "helper_a", "helper_b", "main"}


def compile_program(tmp_path, flags=(), source=SOURCE, name="prog", **args):
    """Compile and link SOURCE with the plugin; return (exe, {name: site})."""
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    exe = tmp_path / name
    run(["gcc", "-O2", *flags, *plugin_flags(**args), src, "-o", exe])
    run([exe])
    with Image(exe) as image:
        sites = {s.name: s for s in image.sites()}
        for site in sites.values():
            check_site(image, site, site.before, site.after)
    return exe, sites


def read_report(path):
    return {r["function"]: r for r in map(json.loads, path.read_text().splitlines())}


def layouts(sites):
    return {name: (s.before, s.after) for name, s in sites.items()}


def test_attribute_in_cxx_gcc_only(tmp_path, plugin):
    """What GCC's attribute takes beyond test_plugin_arguments.py's
    test_attribute_in_cxx: a template's arguments, and the C++11 spelling."""
    src = tmp_path / "a.cc"
    src.write_text("__attribute__((noinline, ftpad(4, 6))) int f(int x) { return x + 1; }\n"
                   "template <int N> __attribute__((noinline, ftpad(N, N + 5)))\n"
                   "int t(int x) { return x * N; }\n"
                   "[[gnu::ftpad(1, 7)]] __attribute__((noinline)) int g(int x) { return x * 3; }\n"
                   "int main(int c, char **) { return f(c) + t<2>(c) + g(c); }\n")
    exe = tmp_path / "a"
    run(["g++", "-O2", *plugin_flags(), src, "-o", exe])
    with Image(exe) as image:
        sites = {s.name: s for s in image.sites()}
        check_site(image, sites["_Z1fi"], 4, 6)
        check_site(image, sites["_Z1tILi2EEii"], 2, 7)  # arguments from the instance
        check_site(image, sites["_Z1gi"], 1, 7)
        check_site(image, sites["main"], 0, 5)


@pytest.mark.parametrize("driver", ["gcc", "g++", "aarch64-linux-gnu-gcc-12",
                                      "aarch64-linux-gnu-g++-12"])
@pytest.mark.parametrize("with_plugin", [True, False])
def test_has_attribute(tmp_path, driver, with_plugin, plugin):
    cxx = driver.endswith("g++") or driver.endswith("g++-12")
    src = tmp_path / "h.c"
    src.write_text("static_assert(__has_attribute(ftpad) == EXPECT, \"\");\n" if cxx else
                   "_Static_assert(__has_attribute(ftpad) == EXPECT, \"\");\n")
    plugin_path = A64_PLUGIN if driver.startswith("aarch64") else PLUGIN
    flags = plugin_flags(plugin_path) if with_plugin else []
    lang = ["-x", "c++"] if cxx else []
    run([driver, *lang, *flags, f"-DEXPECT={int(with_plugin)}", "-c", src,
         "-o", tmp_path / "h.o"])


@pytest.mark.parametrize("compiler", ["gcc", "g++"])
@pytest.mark.parametrize("decl,message", [
    ("__attribute__((ftpad(-1, 5))) int bad_fn(void);", "before must be an integer constant from 0 to 255"),
    ("__attribute__((ftpad(256, 5))) int bad_fn(void);", "before must be an integer constant from 0 to 255"),
    ("__attribute__((ftpad(0, 4))) int bad_fn(void);", "after must be an integer constant from 5 to 255"),
    ("__attribute__((ftpad(0, 300))) int bad_fn(void);", "after must be an integer constant from 5 to 255"),
    ("int bad_fn(int x) __attribute__((ftpad(x, 5)));", "before must be an integer constant"),
    ("__attribute__((ftpad(1))) int bad_fn(void);", "wrong number of arguments"),
    ("int bad_var __attribute__((ftpad(1, 5)));", "applies only to functions"),
])
def test_bad_attribute(tmp_path, plugin, compiler, decl, message):
    src = tmp_path / "bad.c"
    src.write_text(decl + "\n")
    lang = ["-x", "c++"] if compiler == "g++" else []
    p = run([compiler, *lang, *plugin_flags(), "-c", src, "-o", tmp_path / "bad.o"], check=False)
    assert p.returncode != 0
    stderr = p.stderr.replace("\u2018", "'").replace("\u2019", "'")
    assert message in stderr, stderr
    if "only to functions" not in message and "wrong number" not in message:
        assert "'ftpad' attribute on '" in stderr and "bad_fn" in stderr, stderr


def test_globs_match_clone_names(tmp_path, plugin):
    """Clones are matched by the name they are emitted under."""
    source = ("__attribute__((noinline)) static int scale(int *p, int k)"
              " { int x = 0; for (int i = 0; i < k; i++) x = x * 3 + p[i]; return x; }\n"
              "__attribute__((noinline)) int f1(int *p) { return scale(p, 5); }\n"
              "__attribute__((noinline)) int f2(int *p, int k) { return scale(p, k); }\n"
              "int main(int c, char **v) { int a[8] = {c}; (void)v;"
              " return (f1(a) + f2(a, c)) & 0; }\n")
    report = tmp_path / "r.json"
    _, sites = compile_program(tmp_path, ["-O3"], source=source, report=report)
    assert "scale.constprop.0" in read_report(report)
    assert {"scale", "scale.constprop.0"} <= set(sites)
    _, sites = compile_program(tmp_path, ["-O3"], source=source, exclude="scale")
    assert "scale" not in sites and "scale.constprop.0" in sites
    _, sites = compile_program(tmp_path, ["-O3"], source=source, exclude="scale*")
    assert not {"scale", "scale.constprop.0"} & set(sites) and "f1" in sites


@pytest.mark.parametrize("globs,gone", [
    (".init.text", {"init_fn"}),
    (".init.text,.noinstr.text", {"init_fn", "noinstr_fn"}),
    (".*i*.text", {"init_fn", "noinstr_fn"}),
    (".text", ALL - {"init_fn", "noinstr_fn"}),
])
def test_exclude_section(tmp_path, plugin, globs, gone):
    _, sites = compile_program(tmp_path, exclude_section=globs)
    assert set(sites) == ALL - gone


def test_exclude_section_ignores_function_sections(tmp_path, plugin):
    """-ffunction-sections names are GCC's, not the user's: still ".text"."""
    _, sites = compile_program(tmp_path, ["-ffunction-sections"], exclude_section=".text.*")
    assert set(sites) == ALL


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_min_insns(tmp_path, plugin, opt):
    report = tmp_path / "r.json"
    _, sites = compile_program(tmp_path, [opt], min_insns=12, report=report)
    assert "tiny" not in sites           # a tiny leaf
    assert "loop" in sites               # a loop, however short
    assert layouts(sites)["attr_tiny"] == (3, 9)  # the attribute wins
    r = read_report(report)
    assert r["tiny"]["decision"] == "skip"
    assert r["tiny"]["reason"].endswith(" insns < min-insns 12, no loop")
    assert int(r["tiny"]["reason"].split()[0]) < 12
    assert r["loop"]["reason"] == "default"
    assert r["attr_tiny"]["reason"] == "ftpad attribute"


def test_min_insns_zero_and_one_pad_everything(tmp_path, plugin):
    for n in (0, 1):
        _, sites = compile_program(tmp_path, min_insns=n)
        assert set(sites) == ALL


def test_report(tmp_path, plugin):
    report = tmp_path / "r.json"
    compile_program(tmp_path, exclude="helper_b", exclude_section=".noinstr.text",
                    include="*", before=1, after=6, report=report)
    lines = report.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert all(set(r) == {"function", "source", "section", "decision", "reason",
                          "before", "after", "insns", "loop"} for r in records)
    r = {x["function"]: x for x in records}
    assert len(r) == len(records), "one line per function"
    expect = {
        "tiny": ("pad", "default", 1, 6),
        "attr_tiny": ("pad", "ftpad attribute", 3, 9),
        "main": ("pad", "default", 1, 6),
        "helper_a": ("pad", "default", 1, 6),
        "helper_b": ("skip", "excluded by 'helper_b'", 0, 0),
        "noinstr_fn": ("skip", "section '.noinstr.text' excluded", 0, 0),
        "notrace_fn": ("skip", "no_instrument_function", 0, 0),
        "naked_fn": ("skip", "naked", 0, 0),
        "user_pfe": ("skip", "user patchable_function_entry", 0, 0),
    }
    for name, (decision, reason, before, after) in expect.items():
        got = r[name]
        assert (got["decision"], got["reason"], got["before"], got["after"]) == \
            (decision, reason, before, after), got
    assert r["init_fn"]["section"] == ".init.text"
    assert r["tiny"]["section"] == ".text"
    assert r["tiny"]["source"].endswith("prog.c")


def test_report_not_included(tmp_path, plugin):
    report = tmp_path / "r.json"
    compile_program(tmp_path, include="main", report=report)
    r = read_report(report)
    assert r["main"]["decision"] == "pad"
    assert r["tiny"]["decision"] == "skip" and r["tiny"]["reason"] == "not included"


def test_report_predicts_min_insns(tmp_path, plugin):
    """The report gives each function's instruction count and whether it
    has a loop, the inputs of min-insns: a build without the threshold says
    exactly what a build with it would skip."""
    full, cut = tmp_path / "full.jsonl", tmp_path / "cut.jsonl"
    compile_program(tmp_path, ["-O2"], name="full", report=full)
    compile_program(tmp_path, ["-O2"], name="cut", report=cut, min_insns=6)
    before, after = read_report(full), read_report(cut)
    predicted = {n for n, r in before.items() if r["decision"] == "pad"
                 and r["reason"] == "default" and r["insns"] < 6 and not r["loop"]}
    skipped = {n for n, r in after.items() if r["reason"].endswith("< min-insns 6, no loop")}
    assert predicted and predicted == skipped
    assert before["loop"]["loop"] is True and before["tiny"]["loop"] is False


def test_report_with_lto_comes_from_the_link(tmp_path, plugin):
    """With -flto the RTL passes, and so the decisions, run in lto1: the
    compile step reports nothing, the link step one line per function."""
    src = tmp_path / "prog.c"
    src.write_text(SOURCE)
    obj, exe = tmp_path / "prog.o", tmp_path / "prog"
    compile_report, link_report = tmp_path / "compile.jsonl", tmp_path / "link.jsonl"
    run(["gcc", "-O2", "-flto", *plugin_flags(report=compile_report), "-c", src, "-o", obj])
    assert compile_report.read_text() == ""
    run(["gcc", "-O2", "-flto", *plugin_flags(report=link_report, min_insns=12), obj, "-o", exe])
    rows = read_report(link_report)
    assert rows["notrace_fn"]["reason"] == "no_instrument_function"
    assert rows["loop"]["decision"] == "pad"
    with Image(exe) as image:
        padded = {s.name for s in image.sites()}
    assert padded == {n for n, r in rows.items() if r["decision"] == "pad"}


def test_every_argument_is_documented():
    """docs/gcc-plugin.md's table names exactly the arguments the plugin
    core parses (its table of keys), and the GCC plugin's --help text names
    each of them too."""
    root = ROOT
    core = (root / "plugin-core" / "options.c").read_text()
    table = re.search(r"\} keys\[\] = \{(.*?)\};", core, re.S)
    parsed = set(re.findall(r'\{"([a-z-]+)", parse_', table.group(1)))
    assert len(parsed) == 13, table.group(1)
    code = (root / "gcc-plugin" / "ftpad.cc").read_text()
    docs = (root / "docs" / "gcc-plugin.md").read_text()
    documented = set(re.findall(r"^\| `([a-z-]+)=", docs, re.M))
    assert parsed == documented
    helped = set(re.findall(r"-fplugin-arg-ftpad-([a-z-]+)=", code))
    helped |= set(re.findall(r", ([a-z-]+)=GLOBS", code))
    assert parsed - {"unsafe-ipa-ra"} == helped
