# SPDX-License-Identifier: MIT
"""Linux 6.12 built with clang 14 (Kbuild's LLVM=-14: clang-14, ld.lld-14,
llvm-*-14), on x86_64 and arm64, once stock and once with ftpad-clang.so in
place of the compiler's ftrace flags, with the kernel policy of
tests/kbuild/test_kbuild_policy.py (no site in init, noinstr or entry code, none in
small leaves) and report=FILE, through make variables alone
(tests/kbuild/kernel.py clang_make_vars, docs/kbuild.md "Kernels built with
clang").  Both kernels of each architecture boot under QEMU TCG.

What must hold, on both architectures:
- the plugin is where Kbuild traces, and nowhere else: objects that remove
  -pg or $(CC_FLAGS_FTRACE) have no site, as in the stock build;
- object by object, the plugin build's sites are the stock build's minus
  exactly the functions the plugin's report says the policy skipped, and
  every such skip is a stock site gone (the same check at the vmlinux
  level: no site left in init text);
- an object that lost no site to the policy has the stock object's code,
  byte for byte (the kernel ABI is what clang's own flags give);
- both kernels boot, every ftrace self-test PASSES, the function tracer
  works, and "ftrace: allocating N entries" is the stock count minus the
  sites the policy removed from the linked kernel."""
import collections

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

import ftpadtest  # noqa: E402
import kernel  # noqa: E402
import vmlinux  # noqa: E402
from conftest import require_kernel_tools, require_tool  # noqa: E402
from test_kbuild_policy import POLICY, SELFTEST_FUNCS, policy_skips, report, words  # noqa: E402

# The table each architecture's sites are recorded in, and how far a record
# is before its function's entry (arm64 CALL_OPS: at the ops literal).
RECORDS = {"x86_64": ("__mcount_loc", 0), "arm64": ("__patchable_function_entries", 8)}
LLVM_TOOLS = [f"{t}{kernel.LLVM}" for t in ("clang", "ld.lld", "llvm-nm", "llvm-objcopy",
                                            "llvm-ar", "llvm-strip", "llvm-readelf")]


ARCHES = ["x86_64", "arm64"]


@pytest.fixture(scope="module", params=ARCHES)
def arch(request):
    return request.param


@pytest.fixture(scope="module")
def stock(arch):
    require_kernel_tools(*LLVM_TOOLS)
    return kernel.build(f"{arch}-clang", "stock")


@pytest.fixture(scope="module")
def ftpad(arch, stock):
    if not ftpadtest.CLANG_PLUGIN.exists():
        pytest.fail(f"{ftpadtest.CLANG_PLUGIN} is missing: run `make` (needs libclang-14-dev)")
    return kernel.build(f"{arch}-clang", "ftpad", ftpadtest.CLANG_PLUGIN, POLICY, report=True)


def boot(arch, out, tmp_path_factory, what):
    require_tool(kernel.ARCHES[arch]["qemu"])
    text, secs = kernel.boot(f"{arch}-clang", out, tmp_path_factory.mktemp(f"boot-{arch}-{what}"))
    print(f"{arch} {what} boot: {secs:.0f} s")
    return text


@pytest.fixture(scope="module")
def consoles(arch, stock, ftpad, tmp_path_factory):
    return {what: boot(arch, out, tmp_path_factory, what)
            for what, out in (("stock", stock), ("ftpad", ftpad))}


def kernel_objects(out):
    """Relative paths of the objects compiled from the kernel's sources."""
    for p in sorted(out.rglob("*.o")):
        rel = p.relative_to(out)
        if rel.parts[0] in ("tools", "scripts") or rel.parts[:3] == ("arch", "x86", "boot") \
                or p.name.startswith(("vmlinux", ".tmp_vmlinux", ".vmlinux")):
            continue
        yield rel


def object_sites(path, arch):
    """Counter of the functions (each a sorted tuple of the names of the
    function symbols around it) that the object's records point into."""
    table, adjust = RECORDS[arch]
    out = collections.Counter()
    with open(path, "rb") as f:
        e = ELFFile(f)
        symtab = e.get_section_by_name(".symtab")
        if symtab is None:
            return out
        funcs = collections.defaultdict(list)
        for s in symtab.iter_symbols():
            if s["st_info"]["type"] == "STT_FUNC" and isinstance(s["st_shndx"], int):
                funcs[s["st_shndx"]].append((s["st_value"], s["st_value"] + s["st_size"], s.name))
        for rel in e.iter_sections():
            if not isinstance(rel, RelocationSection) or \
                    e.get_section(rel["sh_info"]).name != table:
                continue
            syms = e.get_section(rel["sh_link"])
            for r in rel.iter_relocations():
                sym = syms.get_symbol(r["r_info_sym"])
                off = sym["st_value"] + r["r_addend"] + adjust
                out[tuple(sorted(n for a, b, n in funcs[sym["st_shndx"]] if a <= off < b))] += 1
    return out


@pytest.fixture(scope="module")
def lost(arch, stock, ftpad):
    """{object: Counter of the functions whose stock site the plugin build
    does not have}, after checking that it has no site stock lacks."""
    out = {}
    for rel in kernel_objects(stock):
        s, p = object_sites(stock / rel, arch), object_sites(ftpad / rel, arch)
        assert not p - s, (rel, p - s)
        if s - p:
            out[rel] = s - p
    return out


def test_config_is_clang(arch, stock, ftpad):
    for out in (stock, ftpad):
        config = (out / ".config").read_text()
        assert "CONFIG_CC_IS_CLANG=y" in config and "CONFIG_CLANG_VERSION=14" in config
        assert "CONFIG_LD_IS_LLD=y" in config
        if arch == "x86_64":
            # clang 14 has no -mrecord-mcount on x86: objtool writes the table
            assert "CONFIG_FTRACE_MCOUNT_USE_OBJTOOL=y" in config
        else:
            assert "CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS=y" in config


def test_compile_lines(arch, stock, ftpad):
    """The plugin with the policy where Kbuild traces; the self-tests' object
    gets min-insns=0 last.  x86_64 keeps -pg -mfentry (clang-pg=1 takes their
    place) and objtool no longer writes __mcount_loc; arm64's
    -fpatchable-function-entry is gone."""
    w = words(ftpad / "fs" / ".read_write.o.cmd")
    assert w[0].endswith("clang-14"), w[0]
    assert f"-fplugin={ftpad}/ftpad.so" in w and "-fplugin-arg-ftpad-abi=kernel" in w, w
    assert f"-fplugin-arg-ftpad-{POLICY[0]}" in w and f"-fplugin-arg-ftpad-{POLICY[1]}" in w
    sw = words(stock / "fs" / ".read_write.o.cmd")
    if arch == "x86_64":
        assert "-pg" in w and "-mfentry" in w and "-fplugin-arg-ftpad-clang-pg=1" in w, w
        assert "-DCC_USING_NOP_MCOUNT" in w and "-DCC_USING_FENTRY" in w, w
        assert "--mcount" in sw and "--mnop" in sw and "--mcount" not in w, (sw, w)
        assert "./tools/objtool/objtool" in w  # its other jobs stay
    else:
        assert "-fpatchable-function-entry=4,2" in sw
        assert not any(x.startswith("-fpatchable-function-entry") for x in w), w
    w = words(ftpad / "kernel" / "trace" / ".trace_selftest_dynamic.o.cmd")
    last = [x for x in w if x.startswith("-fplugin-arg-ftpad-min-insns=")][-1]
    assert last == "-fplugin-arg-ftpad-min-insns=0", w


def test_untraced_objects_stay_untraced(arch, stock, ftpad):
    """Objects that turn tracing off have no site in either build."""
    untraced = ["kernel/trace/ftrace.o"]  # ccflags-remove-y += $(CC_FLAGS_FTRACE)
    if arch == "x86_64":
        untraced += ["arch/x86/kernel/ftrace.o", "arch/x86/kernel/tsc.o"]  # CFLAGS_REMOVE = -pg
    for rel in untraced:
        for out in (stock, ftpad):
            assert not object_sites(out / rel, arch), (out, rel)
    assert object_sites(ftpad / "fs/read_write.o", arch)


def test_sites_are_stock_minus_the_reports_skips(arch, ftpad, lost):
    """Object by object, the functions that lost their stock site are exactly
    the ones the plugin's report says the policy skipped, every copy."""
    skips = policy_skips(report(ftpad))
    unexplained, gone = [], 0
    for rel, functions in lost.items():
        for names, n in functions.items():
            gone += n
            name = next((x for x in names if skips[x] >= n), None)
            if name is None:
                unexplained.append((str(rel), names, n))
            else:
                skips[name] -= n
    print(f"{arch}: {gone} sites gone in {len(lost)} objects")
    assert gone > 1000
    assert not unexplained, unexplained[:10]
    assert not +skips, +skips  # every skip the report states is a site gone


def test_objects_without_a_skip_are_stock_code(arch, stock, ftpad, lost):
    """The kernel ABI is what clang's own flags give: every object that lost
    no site to the policy has the stock object's executable sections, byte
    for byte (x86_64: after objtool --mnop turned the calls into NOPs)."""
    same, differ = 0, []
    for rel in kernel_objects(stock):
        if rel in lost:
            continue
        a, na = vmlinux.object_text(stock / rel)
        b, nb = vmlinux.object_text(ftpad / rel)
        if a == b:
            same += 1
        else:
            differ.append(str(rel))
    print(f"{arch}: {same} objects the same, {len(lost)} with a policy skip, differ: {differ}")
    assert same > 200
    assert not differ, differ


def test_vmlinux_sites(arch, stock, ftpad):
    """The linked kernels: no site the stock kernel lacks, none in init text,
    and the self-tests' targets keep theirs."""
    adjust = RECORDS[arch][1]
    s, f = vmlinux.load(stock / "vmlinux"), vmlinux.load(ftpad / "vmlinux")
    ssites, fsites = s.sites(adjust=adjust), f.sites(adjust=adjust)
    assert sum(ssites.values()) > 5000
    assert not collections.Counter(fsites) - collections.Counter(ssites)
    init = [a for a in s.mcount_loc() if a and s.in_range(a, "_sinittext", "_einittext")]
    assert len(init) > 100
    assert not [a for a in f.mcount_loc() if a and f.in_range(a, "_sinittext", "_einittext")]
    for name in SELFTEST_FUNCS:
        assert fsites.get(name) == 1, name


def test_boot_both(arch, stock, ftpad, consoles, record_property):
    """Both kernels boot with every self-test PASSED and a working tracer;
    each allocates its own table's non-zero entries, the plugin's being the
    stock ones minus what the policy took away."""
    counts = {}
    for what, out in (("stock", stock), ("ftpad", ftpad)):
        kernel.check_console(consoles[what])
        counts[what] = kernel.entries(consoles[what])
        assert counts[what] == sum(1 for a in vmlinux.load(out / "vmlinux").mcount_loc() if a)
    record_property(f"{arch} allocating: stock, ftpad", (counts["stock"], counts["ftpad"]))
    print(f"{arch}: ftrace allocating stock {counts['stock']}, ftpad {counts['ftpad']}")
    assert 0 < counts["ftpad"] < counts["stock"]
