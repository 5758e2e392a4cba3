# SPDX-License-Identifier: MIT
"""Shared helpers for ftpad's tests: where the build is, running the real
compilers, and reading ftpad site records out of real ELF files."""
import os
import pathlib
import struct
import subprocess

from elftools.elf.elffile import ELFFile

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = pathlib.Path(os.environ.get("FTPAD_BUILD", ROOT / "build")).resolve()
PLUGIN = BUILD / "gcc-plugin" / "ftpad.so"
A64_PLUGIN = BUILD / "gcc-plugin" / "aarch64" / "ftpad.so"
LIBFTPAD_SO = BUILD / "runtime" / "libftpad.so"
LIBFTPAD_A = BUILD / "runtime" / "libftpad.a"
FTPAD_BIN = BUILD / "bin" / "ftpad"
RECORDMCOUNT = BUILD / "recordmcount" / "recordmcount-ng"
INCLUDE = ROOT / "runtime" / "include"

# struct ftpad_site_record (runtime/include/ftpad_site.h)
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


def plugin_flags(plugin_path=PLUGIN, **args):
    """-fplugin=... plus -fplugin-arg-ftpad-KEY=VALUE for each keyword."""
    flags = [f"-fplugin={plugin_path}"]
    for key, value in args.items():
        flags.append(f"-fplugin-arg-ftpad-{key.replace('_', '-')}={value}")
    return flags


def object_functions(obj):
    """Names of the functions an object defines, .cold fragments excepted."""
    with open(obj, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        return {s.name for s in symtab.iter_symbols()
                if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF"
                and not s.name.endswith(".cold")}


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
         self.arch, self.before, self.after, self.site_len, self.reserved,
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
