# SPDX-License-Identifier: MIT
"""The arguments and the policy file of every compiler's plugin: both
plugins take them from plugin-core (options.c), so each bad one is refused
with the same message, naming the argument, or the file and line; and the
functions they pad, with the layout they give, are the same for both (the
program of test_gcc_plugin_policy.py, checked through its records and
bytes)."""
import json

import pytest

from ftpadtest import Image, TEST_SRC, check_site_aarch64, check_site_x86_64, run
from test_gcc_plugin_policy import ALL, SOURCE

SRC = TEST_SRC


@pytest.mark.parametrize("arg,reason", [
    ("before=-1", "expected an integer from 0 to 255"),
    ("before=256", "expected an integer from 0 to 255"),
    ("before=", "expected an integer from 0 to 255"),
    ("before", "expected an integer from 0 to 255"),
    ("after=abc", "expected an integer from 5 to 255"),
    ("after=4", "expected an integer from 5 to 255"),
    ("after=256", "expected an integer from 5 to 255"),
    ("after", "expected an integer from 5 to 255"),
    ("ops=2", "expected an integer from 0 to 1"),
    ("ops=yes", "expected an integer from 0 to 1"),
    ("abi=linux", "expected user|kernel"),
    ("abi=", "expected user|kernel"),
    ("record=elf", "expected ftpad|mcount|patchable"),
    ("record", "expected ftpad|mcount|patchable"),
    ("unsafe-ipa-ra=2", "expected an integer from 0 to 1"),
    ("min-insns=-1", "expected an integer from 0 to 65535"),
    ("min-insns=abc", "expected an integer from 0 to 65535"),
    ("min-insns=65536", "expected an integer from 0 to 65535"),
    ("min-insns", "expected an integer from 0 to 65535"),
    ("include", "expected =GLOB,..."),
    ("include=a,,b", "empty glob"),
    ("exclude=a,,b", "empty glob"),
    ("exclude-section=.init.text,", "empty glob"),
    ("report=", "expected =FILE"),
    ("report", "expected =FILE"),
    ("report=/nonexistent/dir/r.json", "No such file or directory"),
    ("policy=", "expected =FILE"),
    ("policy", "expected =FILE"),
])
def test_bad_arguments(tmp_path, compiler, arg, reason):
    """Each spelling the plugin accepts is checked the same way; the error
    names the argument as it was written, and there is no object."""
    for spelling in compiler.spellings:
        flag = f"-fplugin-arg-ftpad-{spelling}{arg}"
        obj = tmp_path / "x.o"
        p = run([compiler.cc, "-c", SRC / "layout.c", "-o", obj, f"-fplugin={compiler.plugin}",
                 flag], check=False)
        stderr = p.stderr.replace("\u2018", "").replace("\u2019", "")
        assert p.returncode != 0, stderr
        assert f"ftpad: bad argument {flag}: {reason}" in stderr, stderr
        assert not obj.exists()


@pytest.mark.parametrize("arg", ["bogus=1", "excludes=a", "bogus"])
def test_unknown_arguments(tmp_path, compiler, arg):
    for spelling in compiler.spellings:
        key = arg.split("=")[0]
        p = run([compiler.cc, "-c", SRC / "layout.c", "-o", tmp_path / "x.o",
                 f"-fplugin={compiler.plugin}", f"-fplugin-arg-ftpad-{spelling}{arg}"],
                check=False)
        stderr = p.stderr.replace("\u2018", "").replace("\u2019", "")
        assert p.returncode != 0
        assert f"ftpad: unknown argument -fplugin-arg-ftpad-{spelling}{key}" in stderr, stderr


def test_every_bad_argument_is_named(tmp_path, compiler):
    """All of them, not only the first, and a bad policy file's lines too."""
    policy = tmp_path / "bad.policy"
    policy.write_text("pad\n")
    p = run([compiler.cc, "-c", SRC / "layout.c", "-o", tmp_path / "x.o",
             *compiler.flags(before=300, ops=7, policy=policy)], check=False)
    assert p.returncode != 0
    for what in ("before=300: expected", "ops=7: expected", f"{policy}:1: 'pad' needs a glob"):
        assert what in p.stderr.replace("\u2018", "").replace("\u2019", ""), p.stderr


def test_policy_file_errors(tmp_path, compiler):
    """Every bad line named with FILE:LINE and why; no object."""
    policy = tmp_path / "bad.policy"
    policy.write_text("pad\n# fine\nfoo x\nexclude a b\npad f before=-1\npad g after=4\n"
                      "pad h size=3\n")
    obj = tmp_path / "x.o"
    p = run([compiler.cc, "-c", SRC / "layout.c", "-o", obj, *compiler.flags(policy=policy)],
            check=False)
    assert p.returncode != 0 and not obj.exists()
    for line, reason in [(1, "'pad' needs a glob"),
                         (3, "unknown rule 'foo': expected 'pad' or 'exclude'"),
                         (4, "'exclude' takes only a glob, not 'b'"),
                         (5, "'before=-1': expected before=N with N from 0 to 255"),
                         (6, "'after=4': expected after=N with N from 5 to 255"),
                         (7, "unknown setting 'size=3': expected before=N or after=N")]:
        assert f"ftpad: {policy}:{line}: {reason}" in p.stderr, p.stderr
    assert f"{policy}:2" not in p.stderr


def test_long_line_is_one_line(tmp_path, compiler):
    """A line longer than any buffer is still one line: the error names it
    and the reason, and the next line keeps its own number."""
    policy = tmp_path / "long.policy"
    policy.write_text("pad " + "x" * 5000 + " after=4\nbogus\n")
    p = run([compiler.cc, "-c", "-x", "c", "/dev/null", "-o", tmp_path / "x.o",
             *compiler.flags(policy=policy)], check=False)
    assert p.returncode != 0
    assert f"{policy}:1: 'after=4': expected after=N" in p.stderr, p.stderr
    assert f"{policy}:2: unknown rule 'bogus'" in p.stderr, p.stderr
    assert f"{policy}:3" not in p.stderr


def test_missing_policy_file(tmp_path, compiler):
    p = run([compiler.cc, "-c", "-x", "c", "/dev/null", "-o", tmp_path / "x.o",
             *compiler.flags(policy=tmp_path / "nope")], check=False)
    assert p.returncode != 0
    assert f"ftpad: {tmp_path / 'nope'}: cannot read the policy file" in p.stderr, p.stderr


def test_report_appends_across_units(tmp_path, compiler):
    """Several compiles (make -j) share one report: each appends."""
    report = tmp_path / "r.json"
    report.write_text('{"function": "earlier"}\n')
    for i in range(3):
        src = tmp_path / f"u{i}.c"
        src.write_text(f"int unit{i}(int x) {{ return x + {i}; }}\n")
        run([compiler.cc, "-O2", *compiler.flags(report=report), "-c", src,
             "-o", tmp_path / f"u{i}.o"])
    names = [json.loads(line)["function"] for line in report.read_text().splitlines()]
    assert names == ["earlier", "unit0", "unit1", "unit2"]


# --- which functions get a pad, and which layout ---------------------------

ARCH = pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
LANDING = pytest.mark.parametrize("landing", [False, True], ids=["plain", "landing-pad"])


def padded_layouts(tmp_path, compiler, arch="x86_64", flags=(), **args):
    """SOURCE built with COMPILER's plugin for ARCH and run (aarch64 under
    qemu-aarch64, linked statically); {name: (before, after)} of its
    records, each checked against the user layout."""
    src, exe = tmp_path / "prog.c", tmp_path / "prog"
    src.write_text(SOURCE)
    target = compiler.targets[arch]
    run([*compiler.driver(arch), "-O2", *flags, *target.link, *compiler.flags(arch, **args),
         src, "-o", exe])
    run([*([] if arch == "x86_64" else ["qemu-aarch64"]), exe])
    with Image(exe) as image:
        sites = image.sites()
        for s in sites:
            if arch == "x86_64":
                check_site_x86_64(image, s, s.before, s.after, s.ops != 0)
            else:
                check_site_aarch64(image, s, s.before, s.after, s.ops != 0)
    return {s.name: (s.before, s.after) for s in sites}


@ARCH
@LANDING
@pytest.mark.parametrize("before,after", [(0, None), (2, None), (2, 7)],
                         ids=["0-least", "2-least", "2-7"])
def test_arguments_set_one_layout(tmp_path, compiler, arch, landing, before, after):
    """before= and after= (after= left out: the least the machine allows)
    give every padded function one layout; the ftpad attribute's wins."""
    target = compiler.targets[arch]
    args = dict(before=before, **({} if after is None else dict(after=after)))
    want = dict.fromkeys(ALL, (before, after or target.min_after))
    if (compiler.name, arch) == ("gcc", "aarch64"):
        # GCC ignores naked on aarch64, with a warning: an ordinary function.
        want["naked_fn"] = want["main"]
    want["attr_tiny"] = (3, 9)
    flags = [target.landing] if landing else []
    assert padded_layouts(tmp_path, compiler, arch, flags, **args) == want


def test_attribute_in_cxx(tmp_path, compiler):
    """The attribute on C++ functions, a template's instances and a
    constructor (its C2 symbol, the one that is emitted); notrace keeps
    its function out."""
    src, exe = tmp_path / "a.cc", tmp_path / "a"
    src.write_text("__attribute__((noinline, ftpad(4, 6))) int f(int x) { return x + 1; }\n"
                   "template <int N> __attribute__((noinline, ftpad(6, 5)))\n"
                   "int t(int x) { return x * N; }\n"
                   "struct S { __attribute__((noinline, ftpad(7, 5))) S(int x); int v; };\n"
                   "S::S(int x) : v(x) {}\n"
                   "__attribute__((no_instrument_function)) int quiet(int x) { return x; }\n"
                   "int main(int c, char **) { return f(c) + t<2>(c) + t<3>(c) + S(c).v"
                   " + quiet(c); }\n")
    run([*compiler.driver(cxx=True), "-O2", *compiler.flags(), src, "-o", exe])
    with Image(exe) as image:
        sites = image.sites()
        for s in sites:
            check_site_x86_64(image, s, s.before, s.after, s.ops != 0)
    assert {s.name: (s.before, s.after) for s in sites} == {
        "_Z1fi": (4, 6), "_Z1tILi2EEii": (6, 5), "_Z1tILi3EEii": (6, 5), "_ZN1SC2Ei": (7, 5),
        "main": (0, 5)}


POLICY = """\
# Handlers get a bigger pad; helpers none.
exclude  helper_b          # the first matching rule decides
pad      helper_*   before=2 after=7
pad      loop       after=9
pad      *          before=1
"""


@ARCH
def test_policy_rules_in_order(tmp_path, compiler, arch):
    """policy=FILE: the first matching rule decides, the attribute, more
    specific than any file, still wins, the report names FILE:LINE."""
    policy = tmp_path / "ftpad.policy"
    policy.write_text(POLICY)
    report = tmp_path / "report.jsonl"
    got = padded_layouts(tmp_path, compiler, arch, policy=policy, report=report)
    lo = compiler.targets[arch].min_after
    assert "helper_b" not in got
    assert got["helper_a"] == (2, 7)
    assert got["loop"] == (0, 9), "a rule without before= keeps the global before"
    assert got["tiny"] == (1, lo) and got["main"] == (1, lo)
    assert got["attr_tiny"] == (3, 9)
    rows = {r["function"]: r for r in map(json.loads, report.read_text().splitlines())}
    assert rows["helper_b"]["reason"] == f"excluded by {policy}:2"
    assert rows["helper_a"]["reason"] == f"pad by {policy}:3"
    assert rows["tiny"]["reason"] == f"pad by {policy}:5"
    assert rows["attr_tiny"]["reason"] == "ftpad attribute"


@pytest.mark.parametrize("args,padded", [
    (dict(include="helper_*"), {"helper_a", "helper_b"}),
    (dict(include="helper_a,loop"), {"helper_a", "loop"}),
    (dict(include=""), ALL),
    (dict(exclude="helper_*,main"), ALL - {"helper_a", "helper_b", "main"}),
    # exclude wins over include
    (dict(include="helper_*", exclude="helper_b"), {"helper_a"}),
    (dict(exclude_section=".init.text,.noinstr.text"), ALL - {"init_fn", "noinstr_fn"}),
    # The section rule does not see -ffunction-sections' .text.* names.
    (dict(exclude_section=".text.*"), ALL),
    # The build's switches win over the attribute.
    (dict(exclude="attr_*"), ALL - {"attr_tiny"}),
])
def test_include_exclude(tmp_path, compiler, args, padded):
    layouts = padded_layouts(tmp_path, compiler, flags=["-ffunction-sections"], **args)
    assert set(layouts) == padded


# --- pads smaller than a site: the kernel ABI without an ops slot ----------

# GCC's -fpatchable-function-entry=N,M as (before, after) = (M, N - M):
# every count below the site, on its own and with NOPs before the entry.
COUNTS = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 1), (3, 0)]
BELOW_SITE = [("x86_64", b, a) for b, a in COUNTS + [(0, 4), (2, 3)]] + \
             [("aarch64", b, a) for b, a in COUNTS]
SMALL_SOURCE = """\
int leaf(int x) { return x + 1; }
__attribute__((noinline)) static int helper(int x) { return leaf(x) * 2; }
int caller(int n) { int s = 0; for (int i = 0; i < n; i++) s += helper(i); return s; }
"""


def compile_twice(tmp_path, compiler, arch, source, native_flags, plugin_args, extra=()):
    """SOURCE compiled by the compiler alone with NATIVE_FLAGS and through
    the plugin with PLUGIN_ARGS, from the same path (the file name is in
    the object): the two objects' bytes."""
    src = tmp_path / "pfe.c"
    src.write_text(source)
    objs = []
    for name, flags in (("native", native_flags),
                        ("plugin", compiler.flags(arch, **plugin_args))):
        obj = tmp_path / f"{name}.o"
        run([*compiler.driver(arch), "-O2", *extra, *flags, "-c", src, "-o", obj],
            cwd=tmp_path)
        objs.append(obj.read_bytes())
    return objs


@pytest.mark.parametrize("landing", [False, True], ids=["plain", "landing-pad"])
@pytest.mark.parametrize("arch,before,after", BELOW_SITE)
def test_below_site_pads_are_the_compilers_own(tmp_path, compiler, arch, before, after,
                                               landing):
    """abi=kernel ops=0 record=patchable before=B after=A, with A below the
    site (5 bytes on x86_64, 2 instructions on aarch64), is the compiler's
    own -fpatchable-function-entry=B+A,B: the object byte for byte, code,
    records (__patchable_function_entries: flags, link order, relocations)
    and all.  (Functions the policy skips, such as notrace ones, get no
    pad from the plugin.)  The plugin turns IPA-RA off for the whole compile,
    as GCC does for any -fpatchable-function-entry but =0, which pads
    nothing (docs/gcc-plugin.md)."""
    kernel_only = ["-fno-pie"] if arch == "x86_64" else []
    extra = [*kernel_only, *([compiler.targets[arch].landing] if landing else [])]
    native, plugin = compile_twice(
        tmp_path, compiler, arch, SMALL_SOURCE,
        [f"-fpatchable-function-entry={before + after},{before}",
         *(["-fno-ipa-ra"] if before + after == 0 and compiler.name == "gcc" else [])],
        dict(abi="kernel", ops=0, record="patchable", before=before, after=after), extra)
    assert plugin == native


@ARCH
def test_below_site_per_function(tmp_path, compiler, arch):
    """The same through the per-function policy: a policy file's counts
    for each function give the object that the compiler's own
    patchable_function_entry attributes give."""
    counts = {"one": (0, 1), "two": (1, 0), "three": (2, 1)}
    body = "".join(f"int {f}(int x) {{ return x * {i + 3}; }}\n"
                   for i, f in enumerate(counts))
    attributed = "".join(
        f"__attribute__((patchable_function_entry({b + a}, {b}))) int {f}(int x);\n"
        for f, (b, a) in counts.items())
    policy = tmp_path / "pfe.policy"
    policy.write_text("".join(f"pad {f} before={b} after={a}\n" for f, (b, a) in counts.items())
                      + "exclude *\n")
    kernel_only = ["-fno-pie"] if arch == "x86_64" else []
    src = tmp_path / "pfe.c"
    objs = []
    for name, text, flags in (
            ("native", attributed + body, []),
            ("plugin", body, compiler.flags(arch, abi="kernel", ops=0, record="patchable",
                                            policy=policy))):
        src.write_text(text)
        obj = tmp_path / f"{name}.o"
        run([*compiler.driver(arch), "-O2", *kernel_only, *flags, "-c", src, "-o", obj],
            cwd=tmp_path)
        objs.append(obj.read_bytes())
    assert objs[0] == objs[1]


@pytest.mark.parametrize("arch,args,reason", [
    ("aarch64", dict(abi="kernel", after=1),
     "a pad of fewer than 2 units has no site, and the ops slot needs one (ops=0 allows it)"),
    ("x86_64", dict(abi="kernel", after=4),
     "a pad of fewer than 5 units has no site, and record=mcount needs one "
     "(record=patchable or record=ftpad allows it)"),
    ("aarch64", dict(abi="kernel", ops=0, record="mcount", after=0),
     "a pad of fewer than 2 units has no site, and record=mcount needs one"),
])
def test_below_site_refused_where_a_site_is_needed(tmp_path, compiler, arch, args, reason):
    """Only a pad nothing needs a site of may be smaller than one: not
    with the ops slot (it serves a site), nor in __mcount_loc (it lists
    call sites).  The error names the after= argument, whatever the order."""
    for order in (args, dict(reversed(list(args.items())))):
        obj = tmp_path / "x.o"
        p = run([*compiler.driver(arch), "-c", SRC / "layout.c", "-o", obj,
                 *compiler.flags(arch, **order)], check=False)
        stderr = p.stderr.replace("\u2018", "").replace("\u2019", "")
        assert p.returncode != 0 and not obj.exists(), stderr
        assert f"after={args['after']}: {reason}" in stderr, stderr


def test_below_site_policy_rule_limits(tmp_path, compiler):
    """A policy rule's after=N goes as low as the compile allows: 0 in
    the kernel ABI with ops=0, the site's 2 with the ops slot."""
    policy = tmp_path / "k.policy"
    policy.write_text("pad leaf after=0\n")
    for ops, ok in ((0, True), (1, False)):
        p = run([*compiler.driver("aarch64"), "-c", SRC / "layout.c", "-o", tmp_path / "x.o",
                 *compiler.flags("aarch64", abi="kernel", ops=ops, policy=policy)], check=False)
        assert (p.returncode == 0) == ok, p.stderr
        if not ok:
            assert f"{policy}:1: 'after=0': expected after=N with N from 2 to 255" in p.stderr
