# SPDX-License-Identifier: MIT
"""Read the ftrace call-site table out of a linked vmlinux."""
import bisect
import fnmatch
import functools

from elftools.elf.elffile import ELFFile


class Vmlinux:
    def __init__(self, path):
        self.f = open(path, "rb")
        self.elf = ELFFile(self.f)
        self.syms = {}
        funcs = []
        for s in self.elf.get_section_by_name(".symtab").iter_symbols():
            if s.name and s["st_shndx"] != "SHN_UNDEF":
                self.syms.setdefault(s.name, s["st_value"])
            if s["st_info"]["type"] == "STT_FUNC" and s["st_size"] > 0:
                funcs.append((s["st_value"], s["st_size"], s.name))
        funcs.sort()
        self.funcs = funcs
        self.starts = [f[0] for f in funcs]

    def read(self, addr, size):
        for sec in self.elf.iter_sections():
            a = sec["sh_addr"]
            if a and a <= addr and addr + size <= a + sec["sh_size"] and sec["sh_type"] != "SHT_NOBITS":
                off = sec["sh_offset"] + addr - a
                self.f.seek(off)
                return self.f.read(size)
        raise KeyError(hex(addr))

    def mcount_loc(self):
        """Every entry of __start_mcount_loc..__stop_mcount_loc, zeros included."""
        start, stop = self.syms["__start_mcount_loc"], self.syms["__stop_mcount_loc"]
        raw = self.read(start, stop - start)
        word = self.elf.elfclass // 8
        order = "little" if self.elf.little_endian else "big"
        return [int.from_bytes(raw[i:i + word], order) for i in range(0, len(raw), word)]

    def function_at(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0:
            start, size, name = self.funcs[i]
            if addr < start + size:
                return name, addr - start
        return None, None

    def sites(self, adjust=0):
        """{function name: count} over the non-zero entries; `adjust` is
        added to each entry first (arm64 CALL_OPS records the ops literal,
        8 bytes before the function)."""
        out = {}
        for a in self.mcount_loc():
            if a:
                name, _ = self.function_at(a + adjust)
                out[name] = out.get(name, 0) + 1
        return out

    def in_range(self, addr, lo, hi):
        return self.syms[lo] <= addr < self.syms[hi]

    def section_base(self, elf, index):
        """Where section `index` of relocatable object `elf` (pyelftools)
        landed in this vmlinux, or None if it did not.  Each function of the
        section votes for vmlinux address minus its offset, wherever a
        function of that name and size is; a base is taken when at least half
        of the strong ones agree (an overridden weak function, or a static
        one whose name other objects use too, votes elsewhere)."""
        if not hasattr(self, "_by_name"):
            self._by_name = {}
            for start, size, name in self.funcs:
                self._by_name.setdefault(name, []).append((start, size))
        votes, funcs = {}, 0
        for sym in elf.get_section_by_name(".symtab").iter_symbols():
            if sym["st_info"]["type"] != "STT_FUNC" or sym["st_shndx"] != index \
                    or sym["st_size"] == 0:
                continue
            funcs += sym["st_info"]["bind"] != "STB_WEAK"
            for start, size in self._by_name.get(sym.name, ()):
                if size == sym["st_size"]:
                    base = start - sym["st_value"]
                    votes[base] = votes.get(base, 0) + 1
        if not votes:
            return None
        base, n = max(votes.items(), key=lambda kv: kv[1])
        return base if 2 * n >= max(funcs, 1) else None


@functools.lru_cache(maxsize=None)
def load(path):
    """Vmlinux(path), read once per test session: parsing a symbol table
    takes seconds, and several tests read the same kernels."""
    return Vmlinux(path)


def matching(sites, globs):
    return {n: c for n, c in sites.items() if n and any(fnmatch.fnmatchcase(n, g) for g in globs)}


def object_text(path, nop=None):
    """{section name: bytes} for every executable section of a relocatable
    object, and its number of __mcount_loc records.  With `nop`, the
    `call __fentry__` at each record (an e8 with a relocation, so
    e8 00 00 00 00 in the file) is replaced by those bytes first."""
    with open(path, "rb") as f:
        e = ELFFile(f)
        secs = {i: bytearray(s.data()) for i, s in enumerate(e.iter_sections())
                if s["sh_type"] == "SHT_PROGBITS" and s["sh_flags"] & 4}
        names = {i: e.get_section(i).name for i in secs}
        n = 0
        rela = e.get_section_by_name(".rela__mcount_loc")
        if rela:
            symtab = e.get_section(rela["sh_link"])
            for r in rela.iter_relocations():
                sym = symtab.get_symbol(r["r_info_sym"])
                i, off = sym["st_shndx"], sym["st_value"] + r["r_addend"]
                n += 1
                if nop is not None:
                    assert secs[i][off:off + 5] == b"\xe8\0\0\0\0", (path, names[i], off)
                    secs[i][off:off + 5] = nop
        return {names[i]: bytes(b) for i, b in secs.items()}, n
