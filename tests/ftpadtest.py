# SPDX-License-Identifier: MIT
"""Shared helpers for ftpad's tests: where the build is, running the real
compilers, and reading ftpad site records out of real ELF files."""
import dataclasses
import os
import pathlib
import re
import shutil
import struct
import subprocess
import tempfile

import pytest
from elftools.elf.elffile import ELFFile

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = pathlib.Path(os.environ.get("FTPAD_BUILD", ROOT / "build")).resolve()
PLUGIN = BUILD / "gcc-plugin" / "ftpad.so"
A64_PLUGIN = BUILD / "gcc-plugin" / "aarch64" / "ftpad.so"
CLANG_PLUGIN = BUILD / "clang-pass" / "ftpad-clang.so"
LIBFTPAD_SO = BUILD / "runtime" / "libftpad.so"
LIBFTPAD_A = BUILD / "runtime" / "libftpad.a"
FTPAD_BIN = BUILD / "bin" / "ftpad"
RECORDMCOUNT = BUILD / "recordmcount" / "recordmcount-ng"
INCLUDE = ROOT / "runtime" / "include"
# The one home of the tests' C programs and sources, whatever folder a test
# file sits in.
TEST_SRC = ROOT / "tests" / "src"
KBUILD_HELPERS = ROOT / "tests" / "kbuild"
# What npm brings for the tests (speedscope, SQLite's sources), outside the
# clone, one folder per package and version.
NPM_CACHE = pathlib.Path(os.environ.get(
    "FTPAD_NPM_CACHE", pathlib.Path(os.environ.get("FTPAD_CACHE", "/var/cache/ftpad")) / "npm"))

# struct ftpad_site_record (pad/ftpad_site.h)
RECORD = struct.Struct("<iiiiBBBBBBH")
assert RECORD.size == 24
SITE_VERSION = 1
ARCH_X86_64, ARCH_AARCH64 = 1, 2
FLAG_ENDBR, FLAG_BTI, FLAG_MOV_X9, FLAG_KERNEL = 1, 2, 4, 8
NOP5 = bytes.fromhex("0f1f440000")
ENDBR64 = bytes.fromhex("f30f1efa")


def run(cmd, check=True, **kw):
    """Run a command, capturing text output; on failure show it all."""
    cmd = [str(c) for c in cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError(
            f"command failed ({p.returncode}): {' '.join(cmd)}\n"
            f"--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}")
    return p


def require_cross(cc, files, tools=("qemu-aarch64",)):
    """What a test of another architecture needs: its compiler and runner,
    which scripts/install-deps.sh installs, and the files the build made
    with them.  Missing, the test fails saying which (never skipped: make
    check installs them)."""
    for tool in (cc, *tools):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: scripts/install-deps.sh installs it")
    for p in files:
        if not p.exists():
            pytest.fail(f"{p} is missing: run `make` with {cc} installed")


def made_once(home, make):
    """HOME, a folder of a cache, made by MAKE(tmp) into a temporary folder
    beside it and renamed, unless it is there: a folder half made is never
    seen, and two workers may ask at once (the second rename fails, and
    HOME is the first's)."""
    if home.exists():
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=home.name + ".", dir=home.parent))
    try:
        make(tmp)
        os.rename(tmp, home)
    except OSError:
        if not home.exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return home


def npm():
    """npm's path, or an error that says how to install it."""
    path = shutil.which("npm")
    if not path:
        raise RuntimeError("npm is missing: run scripts/install-deps.sh")
    return path


def plugin_flags(plugin_path=PLUGIN, **args):
    """-fplugin=... plus -fplugin-arg-ftpad-KEY=VALUE for each keyword."""
    flags = [f"-fplugin={plugin_path}"]
    for key, value in args.items():
        flags.append(f"-fplugin-arg-ftpad-{key.replace('_', '-')}={value}")
    return flags


PLUGIN_LIST = BUILD / "ftpad-plugins.txt"


@dataclasses.dataclass(frozen=True)
class Compiler:
    """One compiler and its plugin, for one target architecture: a line of
    the build's plugin list (a clang line serves both targets)."""
    kind: str       # gcc or clang
    arch: str       # the target: x86_64 or aarch64
    major: str
    cc: tuple       # the C driver, with its target flags
    cxx: tuple
    plugin: pathlib.Path

    @property
    def id(self):
        return f"{self.kind}-{self.major}-{self.arch}"

    @property
    def min_after(self):
        return 5 if self.arch == "x86_64" else 2

    @property
    def landing(self):
        return "-fcf-protection" if self.arch == "x86_64" else "-mbranch-protection=standard"

    @property
    def link(self):
        # static on aarch64: qemu-aarch64 needs no sysroot
        return [] if self.arch == "x86_64" else ["-static"]

    @property
    def spellings(self):
        """How -fplugin-arg-ftpad-KEY=VALUE is spelled: the first is the
        compiler's own, the others are accepted too.  clang cuts a plugin
        argument at its first dash after the plugin's name, so its own
        spelling is -fplugin-arg-ftpad-clang-KEY."""
        return ("",) if self.kind == "gcc" else ("clang-", "")

    def flags(self, **args):
        """-fplugin= and the plugin's arguments: GCC names them after the
        plugin's basename, clang after the name up to its first dash."""
        prefix = f"ftpad-{self.spellings[0]}"
        args = [f"{prefix}{k.replace('_', '-')}={v}" for k, v in args.items()]
        if self.kind == "clang" and int(self.major) < 14:
            # clang 13's driver has no -fplugin-arg-: its frontend's
            # spelling, for the plugin registered as "ftpad"
            return [f"-fplugin={self.plugin}", *(
                f for a in args for f in ("-Xclang", "-plugin-arg-ftpad", "-Xclang", a[6:]))]
        return [f"-fplugin={self.plugin}", *(f"-fplugin-arg-{a}" for a in args)]

    def driver(self, source):
        return list(self.cxx if pathlib.Path(source).suffix == ".cc" else self.cc)


def listed_compilers():
    """Every (compiler, target) of the build's plugin list, written by
    CMake: GCC 11 and 12, native and aarch64 cross, clang 13 to 16."""
    if not PLUGIN_LIST.exists():
        return []
    out = []
    for line in PLUGIN_LIST.read_text().splitlines():
        if not line.strip():
            continue
        kind, arch, major, driver, path, _ = line.split("|")
        if kind == "gcc":
            name = pathlib.Path(driver).name
            cxx = str(pathlib.Path(driver).with_name(name[::-1].replace("ccg", "++g", 1)[::-1]))
            out.append(Compiler(kind, arch, major, (driver,), (cxx,), pathlib.Path(path)))
            continue
        cxx = re.sub(r"clang-(\d+)$", r"clang++-\1", driver)
        for target in ("x86_64", "aarch64"):
            flags = () if target == "x86_64" else ("--target=aarch64-linux-gnu",)
            out.append(Compiler(kind, target, major, (driver, *flags), (cxx, *flags),
                                pathlib.Path(path)))
    return out


# Every compiler the plugins serve, for each target: the one list.  The
# tests of tests/plugins/test_compilers.py run over all of it; the others over
# DEFAULT_COMPILERS, drawn from it.
COMPILERS = listed_compilers()


@dataclasses.dataclass(frozen=True)
class DefaultCompiler:
    """A default compiler (GCC 12, clang 14: the plugins under their old
    paths) for both targets, as the tests that take the `compiler`
    fixture of conftest.py see it: its entries of COMPILERS."""
    name: str                # the test id
    plugin: pathlib.Path     # the x86_64 plugin, where the build puts it
    targets: dict            # {arch: its Compiler of COMPILERS}

    @property
    def cc(self):
        return self.targets["x86_64"].cc[0]

    @property
    def spellings(self):
        return self.targets["x86_64"].spellings

    def driver(self, arch="x86_64", cxx=False):
        """The command that compiles C (C++ with CXX) for ARCH."""
        c = self.targets[arch]
        return list(c.cxx if cxx else c.cc)

    def flags(self, arch="x86_64", **args):
        """-fplugin= for ARCH plus each keyword as an argument of the plugin."""
        return self.targets[arch].flags(**args)


def _default(name, plugins):
    """NAME's entries of COMPILERS whose plugin is PLUGINS[arch]."""
    targets = {c.arch: c for c in COMPILERS
               if c.kind == name and c.plugin.resolve() == plugins[c.arch].resolve()}
    return DefaultCompiler(name, plugins["x86_64"], targets)


# Add a default here and every test that takes the `compiler` fixture runs
# with it.
DEFAULT_COMPILERS = [
    _default("gcc", {"x86_64": PLUGIN, "aarch64": A64_PLUGIN}),
    _default("clang", {"x86_64": CLANG_PLUGIN, "aarch64": CLANG_PLUGIN}),
]


def object_functions(obj):
    """Names of the functions an object defines, .cold fragments excepted."""
    with open(obj, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        return {s.name for s in symtab.iter_symbols()
                if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF"
                and not s.name.endswith(".cold")}


COLD_SOURCE = """\
__attribute__((cold, noinline)) int c1(int x) { return x * 7 - 3; }
__attribute__((cold, noinline)) int c2(int x, int y) { return x / (y | 1); }
__attribute__((cold, noinline)) long c3(long x) { return x ^ (x >> 3); }
__attribute__((cold, noinline)) long c4(long x, long y) { return x * y + (x >> 7); }
int main(int c, char **v) { (void)v; return (c1(c) + c2(c, 3) + (int)c3(c) + (int)c4(c, 5)) & 0; }
"""


def cold_source(tmp_path, cc, opt):
    """COLD_SOURCE in TMP_PATH/cold.c, once CC at OPT without the plugin is
    seen to pack some of its cold functions into .text.unlikely off an
    8-byte boundary (the control for the plugin's cold-function tests)."""
    src, native = tmp_path / "cold.c", tmp_path / "native.o"
    src.write_text(COLD_SOURCE)
    run([cc, opt, "-c", src, "-o", native])
    with open(native, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        assert any(symtab.get_symbol_by_name(n)[0]["st_value"] % 8 for n in ("c2", "c3", "c4"))
    return src


def check_records(obj, exe, check_site, has_pad, padded):
    """The records of program EXE built from object OBJ: exactly one per
    function of OBJ that padded(name) accepts, each at its symbol and
    passing check_site(image, site); the other functions have no record and
    has_pad(image, address) is false for them.  Returns the records."""
    defined = object_functions(obj)
    expected = {n for n in defined if padded(n)}
    with Image(exe) as image:
        funcs = image.functions()
        sites = image.sites()
        assert sites, f"{exe}: no __ftpad_sites"
        by_entry = {}
        for site in sites:
            assert site.entry not in by_entry, f"two records for {site.name}"
            by_entry[site.entry] = site
            assert funcs[site.name][0] == site.entry, f"{site.name}: entry is not its symbol"
            check_site(image, site)
        assert set(by_entry) == {funcs[n][0] for n in expected}, (
            f"records {sorted(s.name for s in sites)} != functions {sorted(expected)}")
        for name in defined - expected:
            addr = funcs[name][0]
            assert addr not in by_entry, f"{name} must not have a record"
            assert not has_pad(image, addr), f"{name} must not have a pad"
    return sites


class Site:
    """One decoded record, with absolute addresses."""

    def __init__(self, addr, fields, name):
        (self.entry, self.site, self.ops, self.name_addr, self.version,
         self.arch, self.before, self.after, self.site_len, self.kind,
         self.flags) = fields
        self.addr = addr
        self.name = name

    def __repr__(self):
        return (f"Site({self.name} entry={self.entry:#x} site={self.site:#x} "
                f"ops={self.ops:#x} before={self.before} after={self.after} "
                f"flags={self.flags:#x})")


class Image:
    """A linked executable or shared object, read with pyelftools."""

    def __init__(self, path):
        self.path = pathlib.Path(path)
        self._f = open(self.path, "rb")
        self.elf = ELFFile(self._f)

    def close(self):
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def read(self, addr, size, partial=False):
        """Bytes at a virtual address, from the file.  With partial, fewer
        than size when the segment ends first (at least one byte)."""
        for seg in self.elf.iter_segments():
            if seg["p_type"] != "PT_LOAD":
                continue
            start, end = seg["p_vaddr"], seg["p_vaddr"] + seg["p_filesz"]
            if start <= addr < end and (partial or addr + size <= end):
                self._f.seek(seg["p_offset"] + addr - start)
                return self._f.read(min(size, end - addr))
        raise KeyError(f"{self.path}: address {addr:#x} is not in the file")

    def cstring(self, addr):
        out = bytearray()
        while True:
            b = self.read(addr + len(out), 1)
            if b == b"\0":
                return out.decode()
            out += b

    def function_symbols(self):
        """(name, address, size) of every defined FUNC symbol; static
        functions of different files may share a name."""
        symtab = self.elf.get_section_by_name(".symtab")
        return [(sym.name, sym["st_value"], sym["st_size"]) for sym in symtab.iter_symbols()
                if sym["st_info"]["type"] == "STT_FUNC" and sym["st_shndx"] != "SHN_UNDEF"]

    def functions(self):
        """{name: (address, size)} for every defined FUNC symbol (one of
        them where static functions share a name)."""
        return {name: (addr, size) for name, addr, size in self.function_symbols()}

    def sites(self):
        """Every record of the module's __ftpad_sites table, decoded."""
        sec = self.elf.get_section_by_name("__ftpad_sites")
        if sec is None:
            return []
        data = sec.data()
        base = sec["sh_addr"]
        assert len(data) % RECORD.size == 0, f"{self.path}: table size {len(data)}"
        out = []
        for off in range(0, len(data), RECORD.size):
            fields = list(RECORD.unpack_from(data, off))
            addr = base + off
            if fields[4] == 0:  # filler
                continue
            for i in range(4):
                if fields[i]:
                    fields[i] = addr + 4 * i + fields[i]
            name = self.cstring(fields[3]) if fields[3] else None
            out.append(Site(addr, fields, name))
        return out


# Layout checks of the user ABI for one architecture, shared by the tests of
# every producer (tests/plugins/test_clang_pass*.py so far): each asserts everything
# docs/format.md promises about one record of an image.
CACHE_LINE = 64
X86_OPS_SLOT = bytes.fromhex("0f1f840000000000")   # an 8-byte NOP until used
A64_NOP = bytes.fromhex("1f2003d5")                # d503201f
A64_BTI_C = bytes.fromhex("5f2403d5")              # d503245f, hint 34
A64_MOV_X9_X30 = bytes.fromhex("e9031eaa")         # aa1e03e9


def check_site_x86_64(image, site, before, after, ops=True, nop5=NOP5, exact_after=True):
    """The x86_64 user layout: [before 0x90s][ops slot] entry: [endbr64]
    [the 5-byte NOP nop5][after-5 bytes of NOPs].  With exact_after false,
    NOPs of the function's own may follow (an aligned loop at its start)."""
    import capstone
    assert site.version == SITE_VERSION and site.arch == ARCH_X86_64 and site.site_len == 5
    assert (site.before, site.after) == (before, after), site
    head = image.read(site.entry, 4)
    if site.flags & FLAG_ENDBR:
        assert head == ENDBR64, f"{site.name}: flag ENDBR but entry has {head.hex()}"
        assert site.site == site.entry + 4
        assert site.entry % 16 == 0, f"{site.name}: entry behind ENDBR not 16-aligned"
    else:
        assert head != ENDBR64, f"{site.name}: ENDBR at entry but not in the record"
        assert site.site == site.entry
    assert image.read(site.site, 5) == nop5, f"{site.name}: site is not the 5-byte NOP"
    assert site.site // CACHE_LINE == (site.site + 4) // CACHE_LINE, \
        f"{site.name}: site at {site.site:#x} straddles a cache line"
    rest = image.read(site.site + 5, after - 5 + 16, partial=True)
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    nop_bytes = 0
    for insn in md.disasm(rest, site.site + 5):
        if insn.mnemonic != "nop":
            break
        nop_bytes += insn.size
    assert nop_bytes == after - 5 or (not exact_after and nop_bytes > after - 5), \
        f"{site.name}: {nop_bytes} NOP bytes after the site"
    check_before_entry(image, site, before, ops, 1, b"\x90", X86_OPS_SLOT)


def check_site_aarch64(image, site, before, after, ops=True, mov=True):
    """The aarch64 user layout: [before NOPs][ops slot: 2 NOPs] entry:
    [bti c] then `mov x9, x30` (mov, flag MOV_X9) or a NOP the runtime
    writes it into (not mov), the NOP site, and the rest of after."""
    assert site.version == SITE_VERSION and site.arch == ARCH_AARCH64 and site.site_len == 4
    assert (site.before, site.after) == (before, after), site
    assert bool(site.flags & FLAG_MOV_X9) == mov, f"{site.name}: flags {site.flags:#x}"
    assert site.entry % 4 == 0
    first = site.entry
    if site.flags & FLAG_BTI:
        assert image.read(first, 4) == A64_BTI_C, f"{site.name}: flag BTI but no bti c"
        first += 4
    else:
        assert image.read(first, 4) != A64_BTI_C, f"{site.name}: bti c but no flag BTI"
    want = A64_MOV_X9_X30 if mov else A64_NOP
    assert image.read(first, 4) == want, f"{site.name}: {image.read(first, 4).hex()} at {first:#x}"
    assert site.site == first + 4, f"{site.name}: site is not the second unit"
    rest = image.read(site.site, 4 * (after - 1))
    assert rest == A64_NOP * (after - 1), f"{site.name}: after is {rest.hex()}"
    check_before_entry(image, site, before, ops, 4, A64_NOP, A64_NOP * 2)


def check_before_entry(image, site, before, ops, unit, nop, slot):
    """Before the entry: `before` NOP units, then the 8-aligned ops slot
    that ends at the entry, or none."""
    if ops:
        assert site.ops % 8 == 0, f"{site.name}: ops slot {site.ops:#x} not 8-aligned"
        assert site.ops + 8 == site.entry, f"{site.name}: ops slot does not end at the entry"
        assert image.read(site.ops - unit * before, unit * before + 8) == nop * before + slot
    else:
        assert site.ops == 0
        assert image.read(site.entry - unit * before, unit * before) == nop * before


def starts_with_pad(image, addr, arch, first=None):
    """Does the function at ADDR start, behind its landing pad, with the
    first unit of a pad (FIRST: by default the 5-byte NOP on x86_64 and
    `mov x9, x30` on aarch64)?"""
    code = image.read(addr, 9, partial=True)
    if arch == "x86_64":
        code = code[4:] if code.startswith(ENDBR64) else code
        return code.startswith(first or NOP5)
    code = code[4:] if code.startswith(A64_BTI_C) else code
    return code.startswith(first or A64_MOV_X9_X30)


# Events files (<ftpad_trace.h>, docs/format.md "The trace directory"):
# the 64-byte header, then version 1's 16-byte events or version 2's blocks.
EVENTS_HEADER = struct.Struct("<8sHHHHII16s24x")
EVENT = struct.Struct("<QII")
BLOCK = struct.Struct("<4sB3xIIIIIIQ")  # struct ftpad_trace_block
BLOCK_ZSTD = 1
# A program statically linked with libftpad.a links libzstd too (ftpad.pc's
# Libs.private).
LIBFTPAD_A_LIBS = ["-lzstd"]


def _zstd():
    import ctypes
    lib = ctypes.CDLL("libzstd.so.1")
    lib.ZSTD_decompress.restype = ctypes.c_size_t
    lib.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                    ctypes.c_size_t]
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    return lib, ctypes


def zstd_decompress(frame, size):
    """One zstd frame of SIZE bytes once decompressed (libzstd through ctypes:
    Debian's python3 has no zstd module)."""
    lib, ctypes = _zstd()
    out = ctypes.create_string_buffer(size)
    n = lib.ZSTD_decompress(out, size, frame, len(frame))
    assert not lib.ZSTD_isError(n) and n == size, f"bad zstd frame ({n}, want {size})"
    return out.raw[:size]


def _varints(data):
    out, v, shift = [], 0, 0
    for b in data:
        v |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            out.append(v)
            v, shift = 0, 0
    assert shift == 0, "a varint cut short"
    return out


def decode_blocks(body):
    """(events as (time, what, sp), bytes of whole blocks) of a version 2
    body; asserts on what a recorder never writes."""
    events, at = [], 0
    while len(body) - at >= BLOCK.size:
        magic, coding, size, n, raw_size, time_size, what_size, _, first = \
            BLOCK.unpack_from(body, at)
        assert magic == b"FBLK", f"no block at byte {at}"
        if at + BLOCK.size + size > len(body):
            break
        data = body[at + BLOCK.size:at + BLOCK.size + size]
        raw = zstd_decompress(data, raw_size) if coding == BLOCK_ZSTD else data
        assert len(raw) == raw_size
        times = _varints(raw[:time_size])
        whats = _varints(raw[time_size:time_size + what_size])
        sps = _varints(raw[time_size + what_size:])
        assert len(times) == len(whats) == len(sps) == n
        t, sp = first, 0
        for dt, w, dsp in zip(times, whats, sps):
            t = (t + ((dt >> 1) ^ -(dt & 1))) % 2**64
            sp = (sp + ((dsp >> 1) ^ -(dsp & 1))) % 2**32
            events.append((t, (w >> 4 | w << 28) & 0xffffffff, sp))
        at += BLOCK.size + size
    return events, at


def read_events_file(data):
    """(header fields, [(time, what, sp)...], stray bytes at the end) of an
    events file of either version."""
    header = EVENTS_HEADER.unpack_from(data)
    body = data[64:]
    if header[1] == 1:
        whole = len(body) // EVENT.size * EVENT.size
        return header, list(EVENT.iter_unpack(body[:whole])), len(body) - whole
    events, whole = decode_blocks(body)
    return header, events, len(body) - whole
