# SPDX-License-Identifier: MIT
"""GCC's own tests for patchable function entries, taken from Debian's
gcc-12-source at test time (never copied here) and run through the plugin.

Through the plugin, with equal counts: every patchable_function_entry
attribute of a test becomes an ftpad attribute and -fpatchable-function-entry
becomes before=/after= arguments, so that the plugin makes every pad.
 - Where the plugin can give the very same counts (aarch64's kernel layout,
   whose pad after the entry is at least two NOPs), the test's own dg-final
   checks must pass unchanged, and the object must be GCC's byte for byte.
 - The tests of ENDBR and BTI placement (pr93492-1, pr92424-1) pad one NOP
   or none after the entry, below the plugin's fixed-size site (one 5-byte
   NOP on x86_64; mov x9, x30 and a NOP, or two NOPs, on aarch64).  There
   GCC's NOPs after the entry are replaced by the plugin's site, and every
   function body must otherwise be what the test requires: the landing pad
   first, per-function target and cf_check attributes honoured.
With the plugin loaded and the tests unchanged:
 - Where every function carries its own patchable_function_entry attribute,
   the user's attribute wins (docs/gcc-plugin.md), so the test's dg-final
   checks must still pass: the plugin hands such functions back to GCC's
   hook before and after the label, ENDBR and BTI included.
 - Where a test pads through -fpatchable-function-entry alone, the plugin's
   layout replaces GCC's for the functions it pads."""
import os
import pathlib
import re
import shlex
import subprocess

import pytest

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from ftpadtest import A64_PLUGIN, PLUGIN, plugin_flags, run

TARBALL = pathlib.Path("/usr/src/gcc-12/gcc-12.2.0-dfsg.tar.xz")
CACHE = pathlib.Path(os.environ.get("FTPAD_CACHE", "/var/cache/ftpad")) / "gcc-12.2.0-testsuite"
MEMBERS = ["c-c++-common/patchable_function_entry-*.c", "gcc.target/aarch64/pr92424-*.c",
           "gcc.target/i386/pr93492-*.c"]
X86 = ("gcc", PLUGIN)
A64 = ("aarch64-linux-gnu-gcc-12", A64_PLUGIN)
# Tests in which no function relies on the command line alone.
ATTRIBUTED = [("c-c++-common/patchable_function_entry-decl.c", X86),
              ("c-c++-common/patchable_function_entry-definition.c", X86),
              ("c-c++-common/patchable_function_entry-decl.c", A64),
              ("c-c++-common/patchable_function_entry-definition.c", A64),
              ("gcc.target/i386/pr93492-1.c", X86), ("gcc.target/i386/pr93492-2.c", X86),
              ("gcc.target/i386/pr93492-3.c", X86),
              ("gcc.target/aarch64/pr92424-1.c", A64), ("gcc.target/aarch64/pr92424-2.c", A64),
              ("gcc.target/aarch64/pr92424-3.c", A64)]
COMMAND_LINE_ONLY = [("c-c++-common/patchable_function_entry-default.c", X86, "f3"),
                     ("c-c++-common/patchable_function_entry-default.c", A64, "f3"),
                     ("gcc.target/i386/pr93492-4.c", X86, "foo")]
# -pg -mfentry wants the first instruction too: a function the plugin would
# pad is an error, one with its own attribute is left to GCC (pr93492-3).
CONFLICTS = [("gcc.target/i386/pr93492-5.c", "-pg -mfentry puts a call first")]
ERRORS = ["c-c++-common/patchable_function_entry-error-1.c",
          "c-c++-common/patchable_function_entry-error-2.c",
          "c-c++-common/patchable_function_entry-error-3.c"]


@pytest.fixture(scope="module")
def testsuite():
    """The test files, unpacked once per GCC version."""
    done = CACHE / ".complete"
    if not done.exists():
        if not TARBALL.exists():
            pytest.fail(f"{TARBALL} is missing: scripts/install-deps.sh installs gcc-12-source")
        CACHE.mkdir(parents=True, exist_ok=True)
        prefix = "gcc-12.2.0/gcc/testsuite/"
        subprocess.run(["tar", "xf", TARBALL, "-C", CACHE, "--strip-components=3",
                        "--wildcards", *[prefix + m for m in MEMBERS]], check=True)
        done.touch()
    return CACHE


def dg_options(source):
    m = re.search(r'dg-options "([^"]*)"', source)
    options = shlex.split(m.group(1)) if m else []
    # Debian's gcc makes PIE by default, where -pg calls __fentry__ through
    # the GOT; the tests expect the direct call of a non-PIE build.
    return options + ["-fno-pie"] if "-pg" in options else options


def tcl_string(s):
    """A Tcl double-quoted string's backslash escapes."""
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n"}.get(m.group(1), m.group(1)), s)


def function_bodies(asm):
    """{name: [instruction lines]} as GCC's check-function-bodies sees them:
    directives, local labels, comments and our inline asm markers are fluff."""
    bodies, name = {}, None
    for line in asm.splitlines():
        m = re.match(r"^([a-zA-Z_]\S+):$", line)
        if m:
            name = m.group(1)
            bodies[name] = []
        elif re.match(r"^\s*\.size", line):
            name = None
        elif name and not re.match(r"^\s*(?:\.|//|@|#|$)", line):
            bodies[name].append(line)
    return bodies


def expected_bodies(source):
    out = {}
    for block in re.findall(r"/\*\n(\*\*.*?)\*/", source, re.S):
        lines = [l[2:] for l in block.splitlines() if l.startswith("**")]
        out[lines[0].rstrip(":")] = lines[1:]
    return out


def check_dg_final(source, asm):
    """The test's dg-final directives that apply to our targets."""
    checked = 0
    for directive in re.findall(r"dg-final \{ (.*) \} \*/", source):
        if "alpha*-*-*" in directive and "!" not in directive:
            continue
        m = re.match(r'scan-assembler-times "(.*?)" (\d+)', directive)
        if m:
            count = len(re.findall(tcl_string(m.group(1)), asm))
            assert count == int(m.group(2)), f"{directive}: {count} matches"
        elif (m := re.match(r'scan-assembler "(.*)"', directive)):
            assert re.search(tcl_string(m.group(1)), asm, re.S), directive
        elif directive.startswith("check-function-bodies"):
            bodies = function_bodies(asm)
            for name, want in expected_bodies(source).items():
                got = bodies.get(name)
                assert got is not None and len(got) == len(want) and all(
                    re.fullmatch(w, g) for w, g in zip(want, got)), f"{name}: {got} != {want}"
        else:
            raise AssertionError(f"unhandled directive: {directive}")
        checked += 1
    assert checked, "no dg-final directive applied"


def compile_asm(tmp_path, path, target, with_plugin):
    cc, plugin = target
    out = tmp_path / (path.stem + (".plugin.s" if with_plugin else ".s"))
    flags = [f"-fplugin={plugin}"] if with_plugin else []
    run([cc, *dg_options(path.read_text()), *flags, "-S", path, "-o", out])
    return out.read_text()


@pytest.mark.parametrize("name,target", ATTRIBUTED,
                         ids=[f"{n}-{t[0].split('-')[0]}" for n, t in ATTRIBUTED])
def test_user_attributes_keep_gcc_semantics(tmp_path, plugin, testsuite, name, target):
    path = testsuite / name
    source = path.read_text()
    check_dg_final(source, compile_asm(tmp_path, path, target, False))
    asm = compile_asm(tmp_path, path, target, True)
    check_dg_final(source, asm)
    assert "__ftpad_sites" not in asm, "the user's attribute must win"


@pytest.mark.parametrize("name,target,function", COMMAND_LINE_ONLY,
                         ids=[f"{n}-{t[0].split('-')[0]}" for n, t, _ in COMMAND_LINE_ONLY])
def test_plugin_layout_replaces_command_line(tmp_path, plugin, testsuite, name, target, function):
    path = testsuite / name
    source = path.read_text()
    check_dg_final(source, compile_asm(tmp_path, path, target, False))
    asm = compile_asm(tmp_path, path, target, True)
    assert re.search(r"\.pushsection __ftpad_sites,.*," + function + r",", asm)
    assert "__patchable_function_entries" not in asm, "GCC's own pad is still there"


@pytest.mark.parametrize("name", ERRORS)
def test_bad_command_line_still_rejected(tmp_path, plugin, testsuite, name):
    """GCC's own argument errors are untouched by the plugin."""
    path = testsuite / name
    args = [*dg_options(path.read_text()), "-S", path, "-o", tmp_path / "x.s"]
    native = run(["gcc", *args], check=False)
    with_plugin = run(["gcc", f"-fplugin={PLUGIN}", *args], check=False)
    assert (native.returncode != 0) == (with_plugin.returncode != 0)
    if native.returncode:
        assert native.stderr.splitlines()[-1] in with_plugin.stderr


@pytest.mark.parametrize("name,message", CONFLICTS)
def test_conflicting_options(tmp_path, plugin, testsuite, name, message):
    path = testsuite / name
    p = run(["gcc", *dg_options(path.read_text()), f"-fplugin={PLUGIN}", "-S", path,
             "-o", tmp_path / "x.s"], check=False)
    assert p.returncode != 0 and message in p.stderr, p.stderr


# -- Through the plugin, with equal counts ----------------------------------

PFE_ATTRIBUTE = re.compile(r"patchable_function_entry\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
PFE_OPTION = re.compile(r"-fpatchable-function-entry=(\d+)(?:,(\d+))?")
MIN_AFTER = {"gcc": 5, "aarch64-linux-gnu-gcc-12": 2}


def through_plugin(source, options, min_after):
    """The test with the plugin making every pad: attributes become ftpad
    attributes, the option becomes before=/after= arguments.  GCC's
    (total, before the entry) is the plugin's (before, total - before),
    raised to the plugin's minimum after.  Returns the new source, options
    and plugin arguments, and {function: GCC's count after the entry}."""
    def counts(m):
        total, entry = int(m.group(1)), int(m.group(2) or 0)
        return entry, total - entry

    gcc_after = {}

    def attribute(m):
        before, after = counts(m)
        name = re.search(r"^\s*(\w+)\s*\(", source[m.end():], re.M).group(1)
        gcc_after[name] = after
        return f"ftpad ({before}, {max(after, min_after)})"

    new_source = PFE_ATTRIBUTE.sub(attribute, source)
    args, new_options = {}, []
    for option in options:
        m = PFE_OPTION.fullmatch(option)
        if m:
            before, after = counts(m)
            args = dict(before=before, after=max(after, min_after))
        else:
            new_options.append(option)
    return new_source, new_options, args, gcc_after


def compile_through_plugin(tmp_path, path, target, abi, extra_args=None):
    cc, plugin_path = target
    source = path.read_text()
    new_source, options, args, gcc_after = through_plugin(source, dg_options(source),
                                                          MIN_AFTER[cc])
    assert "patchable_function_entry" not in new_source
    src = tmp_path / ("plugin-" + path.name)
    src.write_text(new_source)
    asm, obj = src.with_suffix(".s"), src.with_suffix(".o")
    flags = [*options, *plugin_flags(plugin_path, abi=abi, **args, **(extra_args or {}))]
    run([cc, *flags, "-S", src, "-o", asm])
    run([cc, *flags, "-c", src, "-o", obj])
    return asm.read_text(), obj, gcc_after


def code(obj):
    with open(obj, "rb") as f:
        return [(s.name, s.data()) for s in ELFFile(f).iter_sections()
                if s["sh_flags"] & SH_FLAGS.SHF_EXECINSTR]


def patchable_records(obj):
    """Offsets GCC's __patchable_function_entries holds, by target section."""
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        symtab = elf.get_section_by_name(".symtab")
        return sorted((elf.get_section(symtab.get_symbol(r["r_info_sym"])["st_shndx"]).name,
                       symtab.get_symbol(r["r_info_sym"])["st_value"] + r["r_addend"])
                      for sec in elf.iter_sections()
                      if sec.name == ".rela__patchable_function_entries"
                      for r in sec.iter_relocations())


@pytest.mark.parametrize("name", ["c-c++-common/patchable_function_entry-default.c",
                                  "c-c++-common/patchable_function_entry-decl.c"])
def test_equal_counts_through_the_plugin(tmp_path, plugin, testsuite, name):
    """aarch64, kernel ABI without the ops literal: -fpatchable-function-entry
    =3,1 is before=1 after=2, patchable_function_entry(2) is ftpad(0, 2).
    The test's own checks pass on the plugin's assembly, and the object is
    GCC's, code and records."""
    path = testsuite / name
    source = path.read_text()
    asm, obj, gcc_after = compile_through_plugin(tmp_path, path, A64, "kernel", {"ops": 0})
    assert all(after >= 2 for after in gcc_after.values()), "not an equal-count test"
    check_dg_final(source, asm)
    native = tmp_path / "native.o"
    run([A64[0], *dg_options(source), "-c", path, "-o", native])
    assert code(obj) == code(native)
    assert patchable_records(obj) == patchable_records(native) != []


def disassembled_bodies(obj, objdump):
    """{function: [instruction]} from the object's code, spaces normalised,
    as check-function-bodies reads a function's instructions."""
    out = run([objdump, "-d", "--no-show-raw-insn", obj]).stdout
    bodies, name = {}, None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(\S+)>:$", line)
        if m:
            name = m.group(1)
            bodies[name] = []
        elif name and (m := re.match(r"^\s*[0-9a-f]+:\s+(.*)$", line)):
            bodies[name].append(" ".join(m.group(1).split("//")[0].split()))
    return bodies


# GCC's spelling in the tests' expected bodies -> objdump's.
SPELLING = {"hint 34 // bti c": "bti c", "hint 25 // paciasp": "paciasp",
            "hint 29 // autiasp": "autiasp"}
LANDING = re.compile(r"endbr|bti c")
SITE = {("gcc", "user"): ["nopl 0x0\\(%rax,%rax,1\\)"],
        ("gcc", "kernel"): ["nopl 0x0\\(%rax,%rax,1\\)"],
        ("aarch64-linux-gnu-gcc-12", "user"): ["mov x9, x30", "nop"],
        ("aarch64-linux-gnu-gcc-12", "kernel"): ["nop", "nop"]}


def with_site(want, gcc_after, site):
    """GCC's expected body with its AFTER NOPs behind the landing pad
    replaced by the plugin's site.  Where GCC has no pad behind the entry
    and lets PACIASP serve as the landing pad, a pad behind it needs a
    bti c first: GCC's own rule, which its f10_pac and f21_pac show."""
    want = [SPELLING.get(" ".join(line.split()), " ".join(line.split())) for line in want]
    landing = 1 if want and LANDING.match(want[0]) else 0
    rest = want[landing:]
    assert rest[:gcc_after] == ["nop"] * gcc_after, want
    head = want[:landing]
    if not head and rest[gcc_after:gcc_after + 1] == ["paciasp"]:
        head = ["bti c"]
    return head + site + rest[gcc_after:]


@pytest.mark.parametrize("abi", ["user", "kernel"])
@pytest.mark.parametrize("name,target", [("gcc.target/i386/pr93492-1.c", X86),
                                         ("gcc.target/aarch64/pr92424-1.c", A64)],
                         ids=["pr93492-1", "pr92424-1"])
def test_landing_pads_through_the_plugin(tmp_path, plugin, testsuite, name, target, abi):
    """Every function of GCC's ENDBR/BTI placement tests padded by the
    plugin: the landing pad stays first, the site follows it, and the rest
    of each body is what the test requires (x86: -mmanual-endbr with
    cf_check and nocf_check; aarch64: per-function branch protection)."""
    path = testsuite / name
    source = path.read_text()
    _, obj, gcc_after = compile_through_plugin(tmp_path, path, target, abi)
    objdump = "objdump" if target is X86 else "aarch64-linux-gnu-objdump"
    got = disassembled_bodies(obj, objdump)
    expected = expected_bodies(source)
    assert expected and set(expected) == set(gcc_after)
    for function, want in expected.items():
        want = with_site(want, gcc_after[function], SITE[target[0], abi])
        body = got[function][:len(want)]
        assert len(body) == len(want) and all(
            re.fullmatch(w, g) for w, g in zip(want, body)), f"{function}: {body} != {want}"


def attributes_to_policy(source):
    """SOURCE with every patchable_function_entry(N, M) attribute taken
    out, and the policy file lines that give each function the same counts
    through the plugin: `pad F before=M after=N-M`."""
    attribute = PFE_ATTRIBUTE.pattern
    # Alone in its __attribute__, after another one, or before another one.
    spellings = [re.compile(r"__attribute__\s*\(\(\s*" + attribute + r"\s*\)\)"),
                 re.compile(r"\s*,\s*" + attribute), re.compile(attribute + r"\s*,\s*")]
    rules = []
    for spelling in spellings:
        while m := spelling.search(source):
            total, entry = int(m.group(1)), int(m.group(2) or 0)
            name = re.search(r"^\s*(\w+)\s*\(", source[m.end():], re.M).group(1)
            rules.append(f"pad {name} before={entry} after={total - entry}\n")
            source = source[:m.start()] + source[m.end():]
    assert "patchable_function_entry" not in source and rules
    return source, "".join(rules) + "exclude *\n"


@pytest.mark.parametrize("name,target", [("gcc.target/aarch64/pr92424-1.c", A64),
                                         ("gcc.target/i386/pr93492-1.c", X86)],
                         ids=["pr92424-1", "pr93492-1"])
def test_kernel_pads_below_the_site_are_gccs_object(tmp_path, plugin, testsuite, name, target):
    """A true drop-in: GCC's BTI/ENDBR placement tests pad one NOP or none
    after the entry, below any site.  With each attribute taken out and its
    counts given through a policy file, abi=kernel ops=0 record=patchable
    gives GCC's object byte for byte: the same NOPs around the same landing
    pads, and the same __patchable_function_entries (one section, its flags,
    link order and relocations).  Both compile a file of the same name, as
    the object holds it."""
    cc, plugin_path = target
    path = testsuite / name
    source = path.read_text()
    new_source, rules = attributes_to_policy(source)
    policy = tmp_path / "pfe.policy"
    policy.write_text(rules)
    objs = []
    for where, text, flags in (
            ("native", source, []),
            ("plugin", new_source, plugin_flags(plugin_path, abi="kernel", ops=0,
                                                record="patchable", policy=policy))):
        (tmp_path / where).mkdir()
        (tmp_path / where / path.name).write_text(text)
        run([cc, *dg_options(source), *flags, "-c", path.name, "-o", "out.o"],
            cwd=tmp_path / where)
        objs.append((tmp_path / where / "out.o").read_bytes())
    assert patchable_records(tmp_path / "native" / "out.o")
    assert objs[1] == objs[0]
