# SPDX-License-Identifier: MIT
"""policy=FILE, and how the plugin's pads relate to a user's own
patchable_function_entry attribute and to -fpatchable-function-entry on the
command line (docs/gcc-plugin.md "Which functions get a pad").  The order
of a file's rules, the same for both plugins, is test_plugin_arguments.py's."""
import pytest
from elftools.elf.elffile import ELFFile

from ftpadtest import A64_PLUGIN, PLUGIN, Image, plugin_flags, run
from test_gcc_plugin_policy import SOURCE, compile_program, layouts


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_arguments_given_twice(tmp_path, plugin):
    """The last value counts, except policy=: every file is read, in order."""
    first = write(tmp_path, "first.policy", "pad helper_a after=7\nexclude helper_*\n")
    second = write(tmp_path, "second.policy", "pad helper_b after=8\npad *\n")
    src = write(tmp_path, "prog.c", SOURCE)
    exe = tmp_path / "prog"
    run(["gcc", "-O2", *plugin_flags(), f"-fplugin-arg-ftpad-policy={first}",
         f"-fplugin-arg-ftpad-policy={second}", "-fplugin-arg-ftpad-exclude=loop",
         "-fplugin-arg-ftpad-exclude=tiny", "-fplugin-arg-ftpad-after=9",
         "-fplugin-arg-ftpad-after=5", src, "-o", exe])
    with Image(exe) as image:
        got = {s.name: s.after for s in image.sites()}
    assert got["helper_a"] == 7 and "helper_b" not in got  # first file first
    assert got["main"] == 5 and got["loop"] == 5           # then the second, after=5
    assert "tiny" not in got                                # exclude=tiny, not loop
    assert got["attr_tiny"] == 9                            # its attribute


def test_rules_do_not_override_exclusions(tmp_path, plugin):
    """notrace and exclude-section stay the build's safety switches."""
    policy = write(tmp_path, "p", "pad * after=6\n")
    _, sites = compile_program(tmp_path, policy=policy, exclude_section=".init.text")
    assert "init_fn" not in sites and "notrace_fn" not in sites
    assert layouts(sites)["tiny"] == (0, 6)


def test_aarch64_limits(tmp_path, plugin):
    """after= counts aarch64 units there, from 2 (mov x9, x30 and the site)."""
    policy = write(tmp_path, "a64.policy", "pad f after=1\npad g after=2 before=3\n")
    p = run(["aarch64-linux-gnu-gcc-12", "-c", "-x", "c", "/dev/null", "-o", tmp_path / "x.o",
             *plugin_flags(A64_PLUGIN, policy=policy)], check=False)
    assert p.returncode != 0
    assert f"{policy}:1: 'after=1': expected after=N with N from 2 to 255" in p.stderr
    assert f"{policy}:2" not in p.stderr


def function_bytes(obj, name, before, count):
    """COUNT bytes of OBJ from BEFORE bytes ahead of function NAME."""
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        sym = elf.get_section_by_name(".symtab").get_symbol_by_name(name)[0]
        data = elf.get_section(sym["st_shndx"]).data()
        return data[sym["st_value"] - before:sym["st_value"] - before + count]


def section_names(obj):
    with open(obj, "rb") as f:
        return {s.name for s in ELFFile(f).iter_sections()}


A64_NOP = bytes.fromhex("1f2003d5")


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_user_attribute_beats_ftpad_attribute_with_a_warning(tmp_path, plugin, arch):
    """patchable_function_entry(2, 1) of the user's own: exactly GCC's pad
    (one NOP before the entry, one after) and record, no ftpad site, and a
    warning that the ftpad attribute is ignored."""
    cc, plugin_path, nop = (("gcc", PLUGIN, b"\x90") if arch == "x86_64" else
                            ("aarch64-linux-gnu-gcc-12", A64_PLUGIN, A64_NOP))
    src = write(tmp_path, "both.c", "__attribute__((ftpad(1, 6), patchable_function_entry(2, 1)))\n"
                                    "int both(int x) { return x * 3; }\n")
    obj = tmp_path / "both.o"
    p = run([cc, "-O2", "-c", src, "-o", obj, *plugin_flags(plugin_path)])
    assert "'ftpad' attribute on 'both' ignored" in p.stderr.replace("\u2018", "'").replace(
        "\u2019", "'")
    native = tmp_path / "native.o"
    run([cc, "-O2", "-Wno-attributes", "-c", src, "-o", native])
    assert function_bytes(obj, "both", len(nop), 3 * len(nop)) == \
        function_bytes(native, "both", len(nop), 3 * len(nop))
    assert function_bytes(obj, "both", len(nop), 2 * len(nop)) == nop * 2
    assert "__patchable_function_entries" in section_names(obj)
    assert "__ftpad_sites" not in section_names(obj)


CL_SOURCE = (
    "__attribute__((noinline)) int traced(int x) { return x + 1; }\n"
    "__attribute__((noinline, no_instrument_function)) int untraced(int x)"
    " { return x + 2; }\n"
    "int main(int c, char **v) { (void)v; return traced(c) + untraced(c) - 2 * c - 3; }\n")


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_command_line_patchable_entry(tmp_path, plugin, arch):
    """A padded function gets the plugin's layout instead of
    -fpatchable-function-entry; a function the plugin skips keeps GCC's."""
    if arch == "x86_64":
        cc, plugin_path, runner, nop = ["gcc"], PLUGIN, [], b"\x90"
        site = bytes.fromhex("0f1f440000")
    else:
        cc, plugin_path, runner = ["aarch64-linux-gnu-gcc-12", "-static"], A64_PLUGIN, ["qemu-aarch64"]
        nop, site = A64_NOP, bytes.fromhex("e9031eaa") + A64_NOP  # mov x9, x30; nop
    src = write(tmp_path, "cl.c", CL_SOURCE)
    exe = tmp_path / "cl"
    run([*cc, "-O2", "-fpatchable-function-entry=3,1", *plugin_flags(plugin_path), src, "-o", exe])
    run([*runner, exe])
    with Image(exe) as image:
        funcs = image.functions()
        sites = {s.name: s for s in image.sites()}
        assert set(sites) == {"traced", "main"}
        untraced = funcs["untraced"][0]
        assert image.read(untraced - len(nop), 3 * len(nop)) == nop * 3  # GCC's 3,1
        traced = funcs["traced"][0]
        assert image.read(traced, len(site)) == site
        # the plugin's ops slot ends at the entry, not GCC's NOP
        ops = bytes.fromhex("0f1f840000000000") if arch == "x86_64" else nop * 2
        assert sites["traced"].ops == traced - 8 and image.read(traced - 8, 8) == ops
        with open(exe, "rb") as f:
            pfe = ELFFile(f).get_section_by_name("__patchable_function_entries")
            entries = [int.from_bytes(pfe.data()[i:i + 8], "little")
                       for i in range(0, pfe.data_size, 8)]
        assert entries == [untraced - len(nop)], "only GCC's own pad is in GCC's table"
