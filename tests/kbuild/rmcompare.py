# SPDX-License-Identifier: MIT
"""recordmcount-ng against Linux's scripts/recordmcount over the objects of a
real kernel build.

A build made with `kernel.build(..., rmc=True)` keeps every object Kbuild
handed to recordmcount, as the compiler wrote it, under ftpad-premcount/
(tests/kbuild/recordmcount-keep.sh), and the object in the build folder is
what Linux's recordmcount made of it.
Here recordmcount-ng processes copies of the kept objects, and each result is
compared with the reference's: the __mcount_loc entries resolved to (section
name, offset), and every section's header fields that do not depend on file
layout, and its bytes (which covers every NOP fixup and relocation rewrite).
The two tools lay the file out differently (Linux appends a new section
header table and leaves the old one as dead bytes), so whole files are not
compared.

Both results are also checked against what each tool's rule predicts from the
relocations of the kept object (`expected_entries`).  The rules differ on
purpose in one place (docs/recordmcount-ng.md, "Where we differ on purpose"):
on mips, Linux's MIPS_is_fake_mcount keeps the offset of the previous
_mcount relocation in a static variable, across sections, and so drops a real
call site 4 bytes after the last one of the previous traced section;
recordmcount-ng looks within one section.  Those sites are the only allowed
difference, and they are returned, so that a test can follow them into the
linked kernel.

    python3 tests/kbuild/rmcompare.py RECORDMCOUNT-NG BUILD-FOLDER
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

KEEP = "ftpad-premcount"
BATCH = 100  # objects per recordmcount-ng run (it takes many, as Linux's does)
# scripts/recordmcount.c is_mcounted_section_name(): these and .text*
TRACED = (".init.text", ".ref.text", ".sched.text", ".spinlock.text", ".irqentry.text",
          ".softirqentry.text", ".kprobes.text", ".cpuidle.text")
MCOUNT_NAMES = ("mcount", "_mcount", "__fentry__")
TABLE = ("__mcount_loc", ".rel__mcount_loc", ".rela__mcount_loc")
FAILURES = "ftpad-recordmcount-failures"
SHF_EXECINSTR = 4


def kept_objects(out):
    """The relative paths of the objects kept under out/ftpad-premcount."""
    root = pathlib.Path(out) / KEEP
    return sorted(p.relative_to(root) for p in root.rglob("*.o"))


def run_ng(ng, out, dest):
    """Copy every kept object to dest (same relative paths) and run
    recordmcount-ng on the copies.  Returns (relative paths, [(objects of a
    failed run, its stderr)])."""
    out, dest = pathlib.Path(out), pathlib.Path(dest)
    rels = kept_objects(out)
    for rel in rels:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / KEEP / rel, dest / rel)
    failures = []
    for i in range(0, len(rels), BATCH):
        chunk = [str(r) for r in rels[i:i + BATCH]]
        p = subprocess.run([str(pathlib.Path(ng).resolve()), *chunk], cwd=dest,
                           capture_output=True, text=True)
        if p.returncode != 0:
            failures.append((chunk, p.stderr))
    return rels, failures


def _word(elf, data, at):
    size = elf.elfclass // 8
    return int.from_bytes(data[at:at + size], "little" if elf.little_endian else "big")


def mcount_entries(elf):
    """__mcount_loc entries as (section name, offset), in order."""
    table = elf.get_section_by_name("__mcount_loc")
    if table is None:
        return []
    rels = [s for s in elf.iter_sections() if isinstance(s, RelocationSection)
            and elf.get_section(s["sh_info"]).name == "__mcount_loc"]
    if len(rels) != 1:
        return [("relocation sections for __mcount_loc", len(rels))]
    rel = rels[0]
    symtab = elf.get_section(rel["sh_link"])
    data = table.data()
    out = []
    for r in rel.iter_relocations():
        sym = symtab.get_symbol(r["r_info_sym"])
        addend = r["r_addend"] if r.is_RELA() else _word(elf, data, r["r_offset"])
        shndx = sym["st_shndx"]
        where = elf.get_section(shndx).name if isinstance(shndx, int) else shndx
        out.append((where, (sym["st_value"] + addend) % (1 << elf.elfclass)))
    return out


def is_traced(name):
    return name.startswith(".text") or name in TRACED


def expected_entries(elf):
    """The __mcount_loc entries each tool's rule gives a kept object, as
    (section name, offset) in order: (Linux's, recordmcount-ng's).  None for
    a machine this model does not cover (then the results are only compared
    with each other).  Every relocation against the mcount symbol in a
    traced executable section is a call site, on x86 one byte before the
    relocated rel32; on mips a relocation 4 bytes after the previous one is
    a long call's second word, where "previous" is the previous one in the
    whole file for Linux (a static variable), in the same section for
    recordmcount-ng."""
    machine = elf["e_machine"]
    if machine not in ("EM_X86_64", "EM_MIPS"):
        return None
    adjust = -1 if machine == "EM_X86_64" else 0
    linux, ng = [], []
    prev_in_file = None
    for rel in elf.iter_sections():
        if not isinstance(rel, RelocationSection) or rel["sh_info"] == 0:
            continue
        target = elf.get_section(rel["sh_info"])
        if target["sh_type"] != "SHT_PROGBITS" or not target["sh_flags"] & SHF_EXECINSTR \
                or not is_traced(target.name):
            continue
        symtab = elf.get_section(rel["sh_link"])
        prev_in_section = None
        for r in rel.iter_relocations():
            if symtab.get_symbol(r["r_info_sym"]).name not in MCOUNT_NAMES:
                continue
            off = r["r_offset"]
            entry = (target.name, off + adjust)
            if machine != "EM_MIPS" or prev_in_file is None or off - prev_in_file != 4:
                linux.append(entry)
            if machine != "EM_MIPS" or prev_in_section is None or off - prev_in_section != 4:
                ng.append(entry)
            prev_in_file = prev_in_section = off
    return linux, ng


def function_at(elf, section, offset):
    """(name, offset in it) of the function of `section` that contains
    `offset`, as vmlinux.Vmlinux.function_at gives it for a linked kernel."""
    index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == section)
    for sym in elf.get_section_by_name(".symtab").iter_symbols():
        if sym["st_info"]["type"] == "STT_FUNC" and sym["st_shndx"] == index \
                and sym["st_value"] <= offset < sym["st_value"] + sym["st_size"]:
            return sym.name, offset - sym["st_value"]
    return None, None


def function_names_at(elf, section, offset):
    """The names of every function symbol of `section` that contains
    `offset`, sorted: a function and its aliases."""
    index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == section)
    return tuple(sorted(
        sym.name for sym in elf.get_section_by_name(".symtab").iter_symbols()
        if sym["st_info"]["type"] == "STT_FUNC" and sym["st_shndx"] == index
        and sym["st_value"] <= offset < sym["st_value"] + sym["st_size"]))


def section_facts(elf):
    """Every section by index: the header fields that do not depend on file
    layout, and its bytes."""
    out = []
    for s in elf.iter_sections():
        h = s.header
        out.append((s.name, h["sh_type"], h["sh_flags"], h["sh_size"], h["sh_link"],
                    h["sh_info"], h["sh_addralign"], h["sh_entsize"],
                    b"" if h["sh_type"] == "SHT_NOBITS" else s.data()))
    return out


def facts(path):
    with open(path, "rb") as f:
        elf = ELFFile(f)
        return mcount_entries(elf), section_facts(elf)


def compare_object(kept, ref_path, ng_path):
    """(what differs or None, the sites only recordmcount-ng records, as
    [(section, offset, (function, offset in it))]) for one object."""
    with open(kept, "rb") as f:
        elf = ELFFile(f)
        expected = expected_entries(elf)
        extra = []
        if expected is not None:
            extra = [(sec, off, function_at(elf, sec, off))
                     for sec, off in expected[1] if (sec, off) not in expected[0]]
    (ref_entries, ref_secs), (ng_entries, ng_secs) = facts(ref_path), facts(ng_path)
    if expected is not None and ref_entries != expected[0]:
        return (f"Linux's __mcount_loc is not what its rule predicts: {len(ref_entries)} "
                f"entries, {len(expected[0])} predicted"), extra
    if expected is not None and ng_entries != expected[1]:
        unexpected = [e for e in ng_entries if e not in expected[1]][:5]
        missing = [e for e in expected[1] if e not in ng_entries][:5]
        return (f"recordmcount-ng's __mcount_loc: {len(ng_entries)} entries, "
                f"{len(expected[1])} predicted; unexpected {unexpected}, missing {missing}"), extra
    if expected is None and ref_entries != ng_entries:
        return (f"__mcount_loc: {len(ref_entries)} entries from Linux, {len(ng_entries)} "
                "from recordmcount-ng"), extra
    if len(ref_secs) != len(ng_secs):
        return (f"{len(ref_secs)} sections from Linux, {len(ng_secs)} from recordmcount-ng: "
                f"{[s[0] for s in ref_secs]} / {[s[0] for s in ng_secs]}"), extra
    fields = ("name", "type", "flags", "size", "link", "info", "addralign", "entsize", "bytes")
    for a, b in zip(ref_secs, ng_secs):
        if extra and a[0] in TABLE and b[0] == a[0]:
            # Longer by the extra entries (checked above); the header the same.
            a, b = a[:3] + a[4:8], b[:3] + b[4:8]
            fields_here = fields[:3] + fields[4:8]
        else:
            fields_here = fields
        if a != b:
            diff = [f for f, x, y in zip(fields_here, a, b) if x != y]
            return f"section {a[0]}: {', '.join(diff)} differ", extra
    return None, extra


def linux_failures(out):
    """{object: messages} for the objects Linux's recordmcount failed on
    (logged by recordmcount-keep.sh, which leaves them as gcc wrote them)."""
    log = pathlib.Path(out) / FAILURES
    if not log.exists():
        return {}
    return dict(ln.split("\t", 1) for ln in log.read_text().splitlines() if ln)


def compare_where_linux_failed(kept, ng_path):
    """Where Linux's recordmcount gave up, recordmcount-ng's entries must be
    what the rule predicts, and no executable byte may have changed."""
    with open(kept, "rb") as f:
        elf = ELFFile(f)
        expected = expected_entries(elf)
        code = {s.name: s.data() for s in elf.iter_sections()
                if s["sh_type"] == "SHT_PROGBITS" and s["sh_flags"] & SHF_EXECINSTR}
    with open(ng_path, "rb") as f:
        elf = ELFFile(f)
        entries = mcount_entries(elf)
        after = {s.name: s.data() for s in elf.iter_sections()
                 if s["sh_type"] == "SHT_PROGBITS" and s["sh_flags"] & SHF_EXECINSTR}
    if expected is None:
        return "no rule for this machine to check recordmcount-ng against"
    if not entries or entries != expected[1]:
        missing = [e for e in expected[1] if e not in entries][:5]
        return (f"recordmcount-ng's __mcount_loc: {len(entries)} entries, "
                f"{len(expected[1])} predicted; missing {missing}")
    if after != code:
        return "recordmcount-ng changed executable bytes"
    return None


def compare_build(ng, out, dest):
    """Run recordmcount-ng over every kept object of build folder `out` (in
    `dest`) and compare each result with the reference's.  Returns a dict:
    objects, entries (__mcount_loc entries Linux wrote, in all), failures
    (failed recordmcount-ng runs), differences ([(path, what)]), extra
    ({path: [(section, offset, (function, offset in it))]}: the sites only
    recordmcount-ng records, by the rule above) and linux_failed ({path:
    Linux's messages}: objects Linux's recordmcount failed on, where
    recordmcount-ng's records are checked against the rule alone)."""
    out, dest = pathlib.Path(out), pathlib.Path(dest)
    rels, failures = run_ng(ng, out, dest)
    linux_failed = linux_failures(out)
    differences, extra, entries = [], {}, 0
    for rel in rels:
        ref = out / rel
        if str(rel) in linux_failed:
            what = compare_where_linux_failed(out / KEEP / rel, dest / rel)
            more = None
        else:
            what, more = compare_object(out / KEEP / rel, ref, dest / rel)
        if what:
            differences.append((str(rel), what))
        if more:
            extra[str(rel)] = more
        with open(ref, "rb") as f:
            entries += len(mcount_entries(ELFFile(f)))
    return dict(objects=len(rels), entries=entries, failures=failures,
                differences=differences, extra=extra, linux_failed=linux_failed)


def objects_with_mcount_loc(out):
    """Relative paths of the objects in a build folder that have __mcount_loc
    (the kept copies and host tools excepted)."""
    out = pathlib.Path(out)
    found = []
    for p in out.rglob("*.o"):
        rel = p.relative_to(out)
        if rel.parts[0] in (KEEP, "scripts", "tools") or p.name.startswith(
                ("vmlinux", ".tmp_vmlinux", ".vmlinux")):
            continue
        with open(p, "rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
            f.seek(0)
            if ELFFile(f).get_section_by_name("__mcount_loc") is not None:
                found.append(rel)
    return sorted(found)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        r = compare_build(sys.argv[1], sys.argv[2], d)
    print(f"{r['objects']} objects, {r['entries']} entries, {len(r['failures'])} failed runs, "
          f"{len(r['differences'])} differences")
    for chunk, err in r["failures"][:3]:
        print(err[:2000])
    for rel, what in r["differences"][:20]:
        print(f"{rel}: {what}")
    for rel, sites in r["extra"].items():
        print(f"{rel}: only recordmcount-ng records {sites}")
    for rel, why in r["linux_failed"].items():
        print(f"{rel}: Linux's recordmcount failed: {why}")
    sys.exit(1 if r["failures"] or r["differences"] else 0)
