# SPDX-License-Identifier: MIT
"""x86_64 with ftpad's policy, through the kbuild/ patch series: the same
tinyconfig + function tracer as tests/kbuild/test_kbuild_x86_64.py, with
CONFIG_FTPAD=y and CONFIG_FTPAD_ARGS set to the kernel policy of
docs/kbuild.md (no site in init, noinstr or entry code, and none in small
leaf functions: min-insns).  Built (cached, tests/kbuild/kernel.py) and
booted under QEMU TCG.

What must hold:
- the patch series traces exactly the objects the stock build traces (its
  Makefile.lib change reads the literal `CFLAGS_REMOVE_x.o = -pg` as
  $(CC_FLAGS_FTRACE));
- the sites that are gone from vmlinux are exactly the functions the policy
  excludes, computed without the boot: every stock site in init text, and
  the functions the plugin's report says min-insns skipped; the report of
  the default-policy build (the instruction counts, min-insns applied here by
  hand) predicts the same functions;
- "ftrace: allocating N entries" at boot is the stock count minus those,
  and every self-test still PASSES (kbuild/0004 keeps the self-tests' tiny
  target functions padded).

It also reports (record_property, and printed with -s) the site counts and
text sizes of the stock, default-policy and kernel-policy builds that
docs/kbuild.md lists."""
import collections
import json
import re

import pytest
from elftools.elf.elffile import ELFFile

import kernel  # noqa: E402
import rmcompare  # noqa: E402
import vmlinux  # noqa: E402
from conftest import require_kernel_tools, require_tool  # noqa: E402

MIN_INSNS = 10
EXCLUDED_SECTIONS = (".init.text", ".noinstr.text", ".entry.text")
POLICY = [f"exclude-section={','.join(EXCLUDED_SECTIONS)}", f"min-insns={MIN_INSNS}"]
SELFTEST_FUNCS = ("trace_selftest_dynamic_test_func", "trace_selftest_dynamic_test_func2")


@pytest.fixture(scope="module")
def stock():
    require_kernel_tools("patch")
    return kernel.stock_build("x86_64")


@pytest.fixture(scope="module")
def ftpad(plugin):
    return kernel.build("x86_64", "ftpad", plugin, report=True)


@pytest.fixture(scope="module")
def policy(plugin):
    return kernel.build("x86_64", "patched", plugin, POLICY, patched=True, report=True)


@pytest.fixture(scope="module")
def console(policy, tmp_path_factory):
    require_tool("qemu-system-x86_64")
    text, secs = kernel.boot("x86_64", policy, tmp_path_factory.mktemp("boot-x86_64-policy"))
    print(f"boot: {secs:.0f} s")
    return text


def report(out):
    """The plugin's report lines for the functions of the kernel's objects.
    Kbuild also compiles with the same flags, plugin included, a few probes
    from <stdin> and the sources it turns into assembly for generated
    headers (kernel/bounds.c, asm-offsets.c, ...: a .s file, no object)."""
    src = (out / "source").resolve()
    generated = tuple(f"{src / p.relative_to(out).with_suffix('')}"
                      for p in out.rglob("*.s") if p.relative_to(out).parts[0] != "scripts"
                      or p.name == "devicetable-offsets.s")
    lines = [json.loads(ln) for ln in (out / kernel.REPORT).read_text().splitlines()]
    return [r for r in lines if r["source"] != "<stdin>" and not r["source"].startswith(generated)]


def sites(v):
    """How many table entries point into core text and into init text."""
    core = init = 0
    lo, hi = v.syms["_sinittext"], v.syms["_einittext"]
    for a in v.mcount_loc():
        if a:
            if lo <= a < hi:
                init += 1
            else:
                core += 1
    return core, init


def policy_skips(lines):
    """What the plugin says the policy took away: skipped for an excluded
    section or for min-insns (not for notrace, which stock honours too)."""
    return collections.Counter(
        r["function"] for r in lines
        if r["decision"] == "skip" and ("< min-insns" in r["reason"] or (
            r["reason"].startswith("section '") and r["reason"].endswith("' excluded"))))


def min_insns_skips(lines):
    """What the plugin says min-insns took away (an asm thunk has no count)."""
    return collections.Counter(r["function"] for r in lines if "< min-insns" in r["reason"])


def min_insns_prediction(lines, sections=EXCLUDED_SECTIONS):
    """What min-insns would take away, from a default-policy report: padded
    functions outside `sections` with fewer instructions and no loop."""
    return collections.Counter(
        r["function"] for r in lines
        if r["decision"] == "pad" and r["section"] not in sections
        and r.get("insns", 0) < MIN_INSNS and not r.get("loop", False))


@pytest.fixture(scope="module")
def excluded(stock, policy):
    """What the policy took away, from the objects alone: each stock object's
    sites whose function has no site in the same object of the policy build,
    {object: [(section, offset, names of the function and its aliases,
    address in the stock vmlinux, or None where the section is not linked
    in)]}."""
    sv = vmlinux.load(stock / "vmlinux")
    out = {}
    for rel in rmcompare.objects_with_mcount_loc(stock):
        with open(policy / rel, "rb") as f:
            pe = ELFFile(f)
            kept = {name for sec, off in rmcompare.mcount_entries(pe)
                    for name in rmcompare.function_names_at(pe, sec, off)}
        with open(stock / rel, "rb") as f:
            se = ELFFile(f)
            index = {s.name: i for i, s in enumerate(se.iter_sections())}
            bases, gone = {}, []
            for sec, off in rmcompare.mcount_entries(se):
                names = rmcompare.function_names_at(se, sec, off)
                if kept & set(names):
                    continue
                if sec not in bases:
                    bases[sec] = sv.section_base(se, index[sec])
                gone.append((sec, off, names, None if bases[sec] is None else bases[sec] + off))
        if gone:
            out[str(rel)] = gone
    return out


def words(cmdfile):
    """The command Kbuild saved for an object ("savedcmd_x.o := gcc ...")."""
    return cmdfile.read_text().splitlines()[0].split(":=", 1)[1].split()


def test_compile_lines(policy):
    """The plugin with the policy, in place of -pg; the self-tests' object
    gets min-insns=0 last."""
    w = words(policy / "fs" / ".read_write.o.cmd")
    assert f"-fplugin={policy}/ftpad.so" in w and "-fplugin-arg-ftpad-abi=kernel" in w, w
    assert f"-fplugin-arg-ftpad-{POLICY[0]}" in w and f"-fplugin-arg-ftpad-{POLICY[1]}" in w
    assert "-pg" not in w and "-mfentry" not in w and "-mrecord-mcount" not in w, w
    assert "-DCC_USING_NOP_MCOUNT" in w and "-DCC_USING_FENTRY" in w, w
    w = words(policy / "kernel" / "trace" / ".trace_selftest_dynamic.o.cmd")
    last = [x for x in w if x.startswith("-fplugin-arg-ftpad-min-insns=")][-1]
    assert last == "-fplugin-arg-ftpad-min-insns=0", w


def test_patch_series_traces_what_stock_traces(stock, policy):
    """Object by object, the patched build loads the plugin exactly where the
    stock build compiles with -pg: kbuild/0002's Makefile.lib reads the
    literal `CFLAGS_REMOVE_x.o = -pg` (arch/x86/kernel/ftrace.o, tsc.o, ...)
    as $(CC_FLAGS_FTRACE) too."""
    traced, untraced = 0, []
    for cmd in sorted(stock.rglob(".*.o.cmd")):
        rel = cmd.relative_to(stock)
        if rel.parts[0] in ("scripts", "tools", "ftpad-premcount"):
            continue
        w = words(cmd)
        if not w[0].endswith("gcc") or "-c" not in w:
            continue
        stock_traced = "-pg" in w
        policy_traced = f"-fplugin={policy}/ftpad.so" in words(policy / rel)
        assert stock_traced == policy_traced, rel
        traced += stock_traced
        if not stock_traced:
            untraced.append(str(rel))
    assert traced > 500, traced
    assert "arch/x86/kernel/.ftrace.o.cmd" in untraced  # CFLAGS_REMOVE_ftrace.o = -pg
    assert "kernel/trace/.ftrace.o.cmd" in untraced      # ccflags-remove-y


def test_excluded_functions_are_the_reports(policy, excluded):
    """Object by object, the functions that lost their site are exactly the
    ones the plugin's report says the policy skipped, every copy (a static
    inline function is compiled in many objects)."""
    skips = policy_skips(report(policy))
    unexplained, gone = [], 0
    for rel, sites_ in excluded.items():
        for sec, off, names, _ in sites_:
            gone += 1
            # The report names a function once, by its assembler name; the
            # object may also have aliases for it (SYSCALL_DEFINE0, ...).
            name = next((n for n in names if skips[n] > 0), None)
            if name is None:
                unexplained.append((rel, sec, off, names))
            else:
                skips[name] -= 1
    assert gone > 1000
    assert not unexplained, unexplained[:10]
    assert not +skips, +skips     # every skip the report states is a site gone


def test_default_report_predicts_min_insns(ftpad, policy):
    """The default-policy build's instruction counts, min-insns applied by
    hand, predict the functions min-insns skipped, but for the self-tests'
    two, which kbuild/0004 keeps padded."""
    skipped = min_insns_skips(report(policy))
    predicted = min_insns_prediction(report(ftpad))
    assert predicted - skipped == collections.Counter(SELFTEST_FUNCS)
    assert not skipped - predicted, skipped - predicted
    v = vmlinux.load(policy / "vmlinux")
    for name in SELFTEST_FUNCS:
        assert v.syms[name] in v.mcount_loc(), name


def linked_exclusions(stock, excluded):
    """The excluded sites the stock kernel's table lists: those of objects
    linked in, and not of a weak function another object overrides."""
    table = {a for a in vmlinux.load(stock / "vmlinux").mcount_loc() if a}
    return [addr for sites_ in excluded.values() for _, _, _, addr in sites_ if addr in table]


def test_boot_selftests_and_entries(stock, policy, excluded, console, record_property):
    """Every self-test PASSES, the function tracer records calls, and
    "ftrace: allocating N entries" is the stock count minus exactly the
    excluded sites the stock kernel has, which include all its init sites."""
    kernel.check_console(console)
    hits = re.search(r"E2E: vfs_read hits=(\d+) schedule hits=(\d+)", console)
    assert int(hits.group(1)) > 0 and int(hits.group(2)) > 0
    s = vmlinux.load(stock / "vmlinux")
    linked = linked_exclusions(stock, excluded)
    init = [a for a in linked if s.in_range(a, "_sinittext", "_einittext")]
    s_core, s_init = sites(s)
    assert len(init) == s_init > 500
    stock_n = s_core + s_init
    n = kernel.entries(console)
    record_property("allocating: stock, excluded (init), policy",
                    (stock_n, len(linked), len(init), n))
    assert n == stock_n - len(linked), (n, stock_n, len(linked))
    assert n == sum(sites(vmlinux.load(policy / "vmlinux")))


def text_sizes(v):
    """Bytes of functions (their symbols' sizes) in core text and in init
    text.  The sections themselves are padded to a large alignment, and so
    are _stext.._etext."""
    core = init = 0
    for start, size, _ in v.funcs:
        if v.in_range(start, "_sinittext", "_einittext"):
            init += size
        elif v.in_range(start, "_stext", "_etext"):
            core += size
    return core, init


def test_site_counts_and_text_sizes(stock, ftpad, policy, excluded, record_property):
    """The numbers docs/kbuild.md lists (printed with -s); nothing is timed.
    exclude-section only touches init text, so the core-text columns of the
    policy build are what min-insns alone gives."""
    rows = []
    for name, out in (("stock", stock), ("ftpad, default policy", ftpad),
                      (f"ftpad, {' '.join(POLICY)}", policy)):
        v = vmlinux.load(out / "vmlinux")
        rows.append((name, *sites(v), *text_sizes(v)))
        record_property(f"{name}: sites in core, init text; function bytes in core, init text",
                        rows[-1][1:])
    s = vmlinux.load(stock / "vmlinux")
    linked = linked_exclusions(stock, excluded)
    init = sum(1 for a in linked if s.in_range(a, "_sinittext", "_einittext"))
    print()
    print("| build | sites in core text | sites in init text | function bytes, core text | function bytes, init text |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} |")
    print(f"excluded: {len(linked) - init} core sites (min-insns), {init} init sites "
          f"(exclude-section, and min-insns)")
    assert rows[0][1:3] == rows[1][1:3]          # default policy: the stock sites
    assert rows[2][1] == rows[0][1] - (len(linked) - init) and rows[2][2] == 0
    assert rows[2][3] < rows[1][3]                # fewer NOPs, less text
