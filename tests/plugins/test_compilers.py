# SPDX-License-Identifier: MIT
"""Every compiler the build made a plugin for (<build>/ftpad-plugins.txt,
written by CMake: GCC 11 and 12, native and aarch64 cross, clang 13 to 16),
each checked on the same test programs for what the layout contract
(docs/format.md) and the kernel ABI (docs/kbuild.md) require: the user
layout and its records, the policy, COMDAT functions, IPA-RA, and the
kernel ABI against that same compiler's own -pg / -fpatchable-function-entry.

The checks are the shared ones of tests/ftpadtest.py, not the default
compilers' exact bytes: another version may schedule or align code
differently, and only what the contract promises must hold.  aarch64
objects and programs are checked statically; one program per aarch64
compiler (the IPA-RA one) runs under qemu-aarch64 with libftpad.  Each
default compiler (GCC 12, clang 14) is in the list too, under its old path,
so a check that fails for a new version only is the new version's."""
import json

import pytest
from elftools.elf.constants import SH_FLAGS

from ftpadtest import (BUILD, COMPILERS, ENDBR64, FLAG_BTI, FLAG_ENDBR, FLAG_MOV_X9, INCLUDE,
                       NOP5, PLUGIN_LIST, Image, check_records, check_site_aarch64,
                       check_site_x86_64, run, starts_with_pad)
from ftpadtest import TEST_SRC  # noqa: E402

SRC = TEST_SRC
A64_LIB = BUILD / "runtime" / "aarch64" / "libftpad.a"

EVERY = pytest.mark.parametrize("compiler", COMPILERS, ids=[c.id for c in COMPILERS])


@pytest.fixture(scope="session", autouse=True)
def plugin_list():
    if not COMPILERS:
        pytest.fail(f"{PLUGIN_LIST} is missing or empty: run `make` first")


def test_every_debian_compiler_is_built():
    """scripts/install-deps.sh installs every compiler Debian 12 ships; a
    build on such a machine has a plugin for each (CMake skips a missing
    one with a message, which must not go unnoticed here)."""
    got = {(c.kind, c.arch, c.major) for c in COMPILERS}
    want = {("gcc", a, v) for a in ("x86_64", "aarch64") for v in ("11", "12")} | \
        {("clang", a, v) for a in ("x86_64", "aarch64") for v in ("13", "14", "15", "16")}
    assert got == want
    for c in COMPILERS:
        assert c.plugin.exists(), c.plugin
        # By compiler and version: gcc-plugin/gcc-11/, gcc-plugin/aarch64-gcc-11/,
        # clang-pass/clang-13/; the defaults' are links to their old paths.
        name = f"{'' if c.arch == 'x86_64' or c.kind == 'clang' else 'aarch64-'}{c.kind}-{c.major}"
        tree = BUILD / ("gcc-plugin" if c.kind == "gcc" else "clang-pass")
        assert (tree / name / c.plugin.name).resolve() == c.plugin.resolve(), c


def check_site(compiler, image, site, before, after, ops=True):
    """docs/format.md's user layout for one record."""
    if compiler.arch == "x86_64":
        check_site_x86_64(image, site, before, after, ops, nop5=NOP5)
    else:
        check_site_aarch64(image, site, before, after, ops, mov=True)


def padded(compiler):
    """Which functions of layout.c/.cc get a pad: all but the skip_ ones;
    GCC ignores `naked` on aarch64 (with a warning), so there skip_naked is
    an ordinary function."""
    ordinary = {"skip_naked"} if (compiler.kind, compiler.arch) == ("gcc", "aarch64") else set()
    return lambda name: "skip_" not in name or name in ordinary


def build(tmp_path, compiler, source, flags, plugin_args=None):
    obj, exe = tmp_path / (source.stem + ".o"), tmp_path / source.stem
    run([*compiler.driver(source), *flags, "-Wno-attributes",
         *compiler.flags(**(plugin_args or {})), "-c", source, "-o", obj])
    run([*compiler.driver(source), *flags, *compiler.link, obj, "-o", exe])
    return obj, exe


def run_native(compiler, exe):
    """Runs EXE where it runs natively: aarch64 ones are checked statically."""
    if compiler.arch == "x86_64":
        run([exe])


# --- the user layout ---------------------------------------------------------

@EVERY
@pytest.mark.parametrize("source", ["layout.c", "layout.cc"])
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("landing", [False, True], ids=["plain", "landing-pad"])
def test_default_layout(tmp_path, compiler, source, opt, landing):
    """Every function of layout.c/.cc but the skip_ ones gets a pad and
    one record at its symbol, with the default counts; landing pads
    (ENDBR, BTI) first exactly where the flags ask for them."""
    flags = [opt, *([compiler.landing] if landing else [])]
    obj, exe = build(tmp_path, compiler, SRC / source, flags)
    sites = check_records(
        obj, exe, lambda image, s: check_site(compiler, image, s, 0, compiler.min_after),
        lambda image, addr: starts_with_pad(image, addr, compiler.arch),
        padded(compiler))
    flag = FLAG_ENDBR if compiler.arch == "x86_64" else FLAG_BTI
    assert any(s.flags & flag for s in sites) == landing
    assert all(s.flags & FLAG_MOV_X9 for s in sites) == (compiler.arch == "aarch64")
    run_native(compiler, exe)


@EVERY
@pytest.mark.parametrize("before,extra,ops", [(0, 1, 0), (3, 0, 1), (16, 11, 1)])
def test_counts(tmp_path, compiler, before, extra, ops):
    """Other counts: odd ones move the filler and the alignment around."""
    after = compiler.min_after + extra
    obj, exe = build(tmp_path, compiler, SRC / "layout.c", ["-O2", compiler.landing],
                     dict(before=before, after=after, ops=ops))
    check_records(obj, exe,
                  lambda image, s: check_site(compiler, image, s, before, after, bool(ops)),
                  lambda image, addr: starts_with_pad(image, addr, compiler.arch),
                  padded(compiler))
    run_native(compiler, exe)


# --- the policy --------------------------------------------------------------

@EVERY
def test_policy(tmp_path, compiler):
    """The policy file's first matching rule decides, the ftpad attribute
    wins over it, include/exclude-section apply, notrace and a user's own
    patchable_function_entry keep their functions out, and the report says
    why for each function."""
    from test_plugin_arguments import POLICY  # the policy tests' file
    from test_gcc_plugin_policy import SOURCE
    src, policy, report = tmp_path / "prog.c", tmp_path / "ftpad.policy", tmp_path / "r.jsonl"
    src.write_text(SOURCE)
    policy.write_text(POLICY)
    _, exe = build(tmp_path, compiler, src, ["-O2"],
                   dict(policy=policy, report=report, exclude_section=".noinstr.text"))
    run_native(compiler, exe)
    with Image(exe) as image:
        sites = {s.name: s for s in image.sites()}
        for s in sites.values():
            check_site(compiler, image, s, s.before, s.after)
    got = {n: (s.before, s.after) for n, s in sites.items()}
    lo = compiler.min_after
    # GCC ignores naked on aarch64, with a warning: an ordinary function.
    got.pop("naked_fn", None)
    assert got == {"helper_a": (2, 7), "loop": (0, 9), "tiny": (1, lo), "main": (1, lo),
                   "init_fn": (1, lo), "attr_tiny": (3, 9)}
    rows = {r["function"]: r for r in map(json.loads, report.read_text().splitlines())}
    assert rows["helper_b"]["reason"] == f"excluded by {policy}:2"
    assert rows["helper_a"]["reason"] == f"pad by {policy}:3"
    assert rows["tiny"]["reason"] == f"pad by {policy}:5"
    assert rows["attr_tiny"]["reason"] == "ftpad attribute"
    assert rows["notrace_fn"]["reason"] == "no_instrument_function"
    assert rows["user_pfe"]["decision"] == "skip"
    assert rows["noinstr_fn"]["decision"] == "skip"
    assert {n for n, r in rows.items() if r["decision"] == "pad"} - {"naked_fn"} == set(got)


# --- COMDAT ------------------------------------------------------------------

@EVERY
def test_comdat_one_record_per_function(tmp_path, compiler):
    """C++ inline and template functions defined in two units: one record
    for each surviving copy, at its symbol, and --gc-sections drops the
    unused function's record with it."""
    exe = tmp_path / "prog"
    run([*compiler.cxx, "-O2", "-ffunction-sections", "-Wl,--gc-sections", *compiler.link,
         *compiler.flags(), SRC / "comdat_a.cc", SRC / "comdat_b.cc", "-o", exe])
    from test_comdat import surviving_functions
    with Image(exe) as image:
        names = [s.name for s in image.sites()]
        funcs = image.functions()
        assert len(names) == len(set(names)), f"duplicate records: {sorted(names)}"
        assert set(names) == surviving_functions(image)
        assert {"_Z13shared_inlinei", "_Z12shared_twiceIiET_S0_"} <= set(names)
        assert "_Z8unused_bi" not in names
        for s in image.sites():
            assert funcs[s.name][0] == s.entry
            check_site(compiler, image, s, 0, compiler.min_after)
    if compiler.arch == "x86_64":
        assert run([exe]).stdout.strip() == "13"


# --- IPA-RA ------------------------------------------------------------------

def build_ipa_ra(tmp_path, compiler, unsafe, extra=(), **args):
    from test_ipa_ra import SRC as IPA_RA_SRC
    exe = tmp_path / f"ipa_ra{unsafe}"
    # clang's IPRA is off unless asked for; GCC's -fipa-ra is on at -O2.
    ipra = ["-mllvm", "-enable-ipra"] if compiler.kind == "clang" else []
    lib = ([f"-L{BUILD / 'runtime'}", "-lftpad", f"-Wl,-rpath,{BUILD / 'runtime'}"]
           if compiler.arch == "x86_64" else ["-static", "-x", "none", A64_LIB, "-lpthread"])
    run([*compiler.cc, "-O2", "-g", *ipra, *extra, f"-I{INCLUDE}",
         *compiler.flags(unsafe_ipa_ra=unsafe, **args), IPA_RA_SRC, "-o", exe, *lib])
    return exe


@EVERY
@pytest.mark.parametrize("unsafe", [0, 1], ids=["plugin", "control"])
def test_ipa_ra_stays_off(tmp_path, compiler, unsafe):
    """A caller that keeps values in call-clobbered registers across a call
    to a traced leaf stays right while libftpad's callback clobbers every
    one of them; the control leaves IPA-RA on and must go wrong.  This is
    the program that runs under qemu-aarch64 for aarch64 compilers."""
    from test_ipa_ra import caller_keeps_values_in
    exe = build_ipa_ra(tmp_path, compiler, unsafe)
    kept = caller_keeps_values_in(exe, compiler.arch)
    p = run([*([] if compiler.arch == "x86_64" else ["qemu-aarch64"]), exe], check=False)
    if unsafe:
        assert kept, "the control no longer exercises IPA-RA"
        assert p.returncode == 1 and p.stdout.startswith("MISMATCH"), p.stdout + p.stderr
    else:
        assert not kept, kept
        assert p.returncode == 0 and p.stdout.startswith("OK"), p.stdout + p.stderr


# --- the kernel ABI ----------------------------------------------------------

KERNEL_FLAGS = {
    "x86_64": ["-fno-pie", "-mcmodel=kernel", "-mno-red-zone", "-ffreestanding",
               "-falign-functions=16"],
    "aarch64": ["-ffreestanding", "-mgeneral-regs-only", "-falign-functions=8"],
}
TRACED = 6  # every function of kernel_like.c but the notrace one


def kernel_pair(tmp_path, compiler, flags, native, **args):
    """kernel_like.c built with the compiler's own NATIVE flags, and with
    the plugin in the kernel ABI."""
    common = [*compiler.cc, *KERNEL_FLAGS[compiler.arch], *flags, "-c", SRC / "kernel_like.c"]
    native_obj, plugin_obj = tmp_path / "native.o", tmp_path / "plugin.o"
    run([*common, *native, "-o", native_obj])
    run([*common, *compiler.flags(abi="kernel", **args), "-o", plugin_obj])
    return native_obj, plugin_obj


@EVERY
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("landing", [False, True], ids=["plain", "landing-pad"])
def test_kernel_abi_is_the_compilers_own(tmp_path, compiler, opt, landing):
    """x86_64: GCC's -pg -mfentry -mrecord-mcount -mnop-mcount, or clang's
    -pg -mfentry with each call to __fentry__ a 5-byte NOP, and those sites
    in __mcount_loc; arm64: -fpatchable-function-entry=4,2 (CALL_OPS), with
    one record section per function.  Byte for byte the same compiler's."""
    from test_clang_pass_kernel import code_sections, fentry_calls, mcount_sites
    from test_gcc_plugin_kernel import records
    landing_flag = {"x86_64": "-fcf-protection=branch",
                    "aarch64": "-mbranch-protection=standard"}[compiler.arch]
    flags = [opt, *([landing_flag] if landing else [])]
    if compiler.arch == "aarch64":
        native_obj, plugin_obj = kernel_pair(tmp_path, compiler, flags,
                                             ["-fpatchable-function-entry=4,2"], ops=1)
        assert code_sections(plugin_obj) == code_sections(native_obj)
        want, _ = records(native_obj, "__patchable_function_entries")
        got, ours = records(plugin_obj, "__patchable_function_entries")
        assert got == want and len(got) == TRACED
        assert len(ours) == TRACED
        assert all(f & SH_FLAGS.SHF_LINK_ORDER and align == 8 for f, align in ours)
        return
    native = ["-pg", "-mfentry"]
    if compiler.kind == "gcc":
        native += ["-mrecord-mcount", "-mnop-mcount"]
    if compiler.kind == "clang" and int(compiler.major) < 14 and landing:
        check_kernel_layout_alone(tmp_path, compiler, flags, native)
        return
    native_obj, plugin_obj = kernel_pair(tmp_path, compiler, flags, native)
    want, got = code_sections(native_obj), code_sections(plugin_obj)
    calls = fentry_calls(native_obj)
    assert len(calls) == (0 if compiler.kind == "gcc" else TRACED)
    for sec, off in calls:  # clang: what objtool --mcount --mnop makes of them
        assert want[sec][off] == 0xe8
        want[sec][off:off + 5] = NOP5
    assert want == got
    sites = mcount_sites(plugin_obj)
    assert len(sites) == TRACED
    if compiler.kind == "gcc":
        assert records(plugin_obj, "__mcount_loc")[0] == records(native_obj, "__mcount_loc")[0]
    else:
        assert sites == calls
    assert records(plugin_obj, "__ftpad_sites") == ([], [])


def check_kernel_layout_alone(tmp_path, compiler, flags, native):
    """clang 13 crashes on its own -pg -mfentry with IBT (fixed in clang 14),
    so there is nothing to compare with: the plugin's object must still
    have, at every traced function's entry, the 5-byte NOP that
    __mcount_loc records, behind ENDBR where the function has one (a
    static function only called directly has none)."""
    from test_clang_pass_kernel import code_sections, mcount_sites
    from test_gcc_plugin_kernel import records
    p = run([*compiler.cc, *KERNEL_FLAGS["x86_64"], *flags, *native, "-c", SRC / "kernel_like.c",
             "-o", tmp_path / "native.o"], check=False)
    assert p.returncode != 0, "clang 13 compiles -pg -mfentry with IBT now: compare with it"
    plugin_obj = tmp_path / "plugin.o"
    run([*compiler.cc, *KERNEL_FLAGS["x86_64"], *flags, "-c", SRC / "kernel_like.c",
         *compiler.flags(abi="kernel"), "-o", plugin_obj])
    code = code_sections(plugin_obj)
    with Image(plugin_obj) as image:
        entries = {(image.elf.get_section(sym["st_shndx"]).name, sym["st_value"])
                   for sym in image.elf.get_section_by_name(".symtab").iter_symbols()
                   if sym["st_info"]["type"] == "STT_FUNC"}
    sites = mcount_sites(plugin_obj)
    assert len(sites) == TRACED
    behind_endbr = 0
    for sec, off in sites:
        assert code[sec][off:off + 5] == NOP5, (sec, off)
        if (sec, off) not in entries:
            assert (sec, off - 4) in entries and code[sec][off - 4:off] == ENDBR64, (sec, off)
            behind_endbr += 1
    assert behind_endbr, "no landing pad with -fcf-protection=branch"
    assert records(plugin_obj, "__ftpad_sites") == ([], [])
