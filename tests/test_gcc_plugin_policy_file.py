# SPDX-License-Identifier: MIT
"""policy=FILE, and how the plugin's pads relate to a user's own
patchable_function_entry attribute and to -fpatchable-function-entry on the
command line (docs/gcc-plugin.md "Which functions get a pad")."""
from elftools.elf.elffile import ELFFile

from ftpadtest import Image, plugin_flags, run
from test_gcc_plugin_policy import compile_program, layouts, read_report

POLICY = """\
# Handlers get a bigger pad; helpers none.
exclude  helper_b          # the first matching rule decides
pad      helper_*   before=2 after=7
pad      loop       after=9
pad      *          before=1
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_rules_in_order(tmp_path, plugin):
    policy = write(tmp_path, "ftpad.policy", POLICY)
    report = tmp_path / "report.jsonl"
    _, sites = compile_program(tmp_path, policy=policy, report=report)
    got = layouts(sites)
    assert "helper_b" not in got
    assert got["helper_a"] == (2, 7)
    assert got["loop"] == (0, 9), "a rule without before= keeps the global before"
    assert got["tiny"] == (1, 5) and got["main"] == (1, 5)
    # The attribute is more specific than any file: it still wins.
    assert got["attr_tiny"] == (3, 9)
    rows = read_report(report)
    assert rows["helper_b"]["reason"] == f"excluded by {policy}:2"
    assert rows["helper_a"]["reason"] == f"pad by {policy}:3"
    assert rows["tiny"]["reason"] == f"pad by {policy}:5"
    assert rows["attr_tiny"]["reason"] == "ftpad attribute"


def test_rules_do_not_override_exclusions(tmp_path, plugin):
    """notrace and exclude-section stay the build's safety switches."""
    policy = write(tmp_path, "p", "pad * after=6\n")
    _, sites = compile_program(tmp_path, policy=policy, exclude_section=".init.text")
    assert "init_fn" not in sites and "notrace_fn" not in sites
    assert layouts(sites)["tiny"] == (0, 6)


def test_parse_errors_name_file_line_and_reason(tmp_path, plugin):
    policy = write(tmp_path, "bad.policy",
                   "pad\n# fine\nfoo x\nexclude a b\npad f before=-1\npad g after=4\npad h size=3\n")
    p = run(["gcc", "-c", "-x", "c", "/dev/null", "-o", tmp_path / "x.o",
             *plugin_flags(policy=policy)], check=False)
    assert p.returncode != 0
    for line, reason in [(1, "'pad' needs a glob"),
                         (3, "unknown rule 'foo': expected 'pad' or 'exclude'"),
                         (4, "'exclude' takes only a glob, not 'b'"),
                         (5, "'before=-1': expected before=N with N from 0 to 255"),
                         (6, "'after=4': expected after=N with N from 5 to 255"),
                         (7, "unknown setting 'size=3': expected before=N or after=N")]:
        assert f"{policy}:{line}: {reason}" in p.stderr, p.stderr
    assert f"{policy}:2" not in p.stderr


def test_missing_policy_file(tmp_path, plugin):
    p = run(["gcc", "-c", "-x", "c", "/dev/null", "-o", tmp_path / "x.o",
             *plugin_flags(policy=tmp_path / "nope")], check=False)
    assert p.returncode != 0
    assert f"{tmp_path / 'nope'}: cannot read the policy file" in p.stderr


def test_user_attribute_beats_ftpad_attribute_with_a_warning(tmp_path, plugin):
    src = write(tmp_path, "both.c", "__attribute__((ftpad(1, 6), patchable_function_entry(2, 1)))\n"
                                    "int both(int x) { return x; }\n")
    p = run(["gcc", "-O2", "-c", src, "-o", tmp_path / "both.o", *plugin_flags()])
    assert "'ftpad' attribute on 'both' ignored" in p.stderr.replace("\u2018", "'").replace(
        "\u2019", "'")


def test_command_line_patchable_entry(tmp_path, plugin):
    """A padded function gets the plugin's layout instead of
    -fpatchable-function-entry; a function the plugin skips keeps GCC's."""
    src = write(tmp_path, "cl.c",
                "__attribute__((noinline)) int traced(int x) { return x + 1; }\n"
                "__attribute__((noinline, no_instrument_function)) int untraced(int x)"
                " { return x + 2; }\n"
                "int main(int c, char **v) { (void)v; return traced(c) + untraced(c) - 2 * c - 3; }\n")
    exe = tmp_path / "cl"
    run(["gcc", "-O2", "-fpatchable-function-entry=3,1", *plugin_flags(), src, "-o", exe])
    run([exe])
    with Image(exe) as image:
        funcs = image.functions()
        sites = {s.name: s for s in image.sites()}
        assert set(sites) == {"traced", "main"}
        untraced = funcs["untraced"][0]
        assert image.read(untraced - 1, 3) == b"\x90\x90\x90"  # GCC's 3,1
        traced = funcs["traced"][0]
        assert image.read(traced, 5) == bytes.fromhex("0f1f440000")
        with open(exe, "rb") as f:
            pfe = ELFFile(f).get_section_by_name("__patchable_function_entries")
            entries = [int.from_bytes(pfe.data()[i:i + 8], "little")
                       for i in range(0, pfe.data_size, 8)]
        assert entries == [untraced - 1], "only GCC's own pad is in GCC's table"
