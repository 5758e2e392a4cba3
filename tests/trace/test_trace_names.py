# SPDX-License-Identifier: MIT
"""C++ names in the viewers: tests/src/trace/names.cc (methods, a
constructor, an operator, a template of two arguments, namespaces), built
with each plugin and exit=1, recorded, and shown by replay, report, dump
(folded, Chrome JSON) and flame with the names demangled; --raw-names shows
them as the program has them, and binutils' c++filt turns those into the
same demangled names."""
import json
import os
import xml.etree.ElementTree as ET

import pytest

from ftpadtest import DEFAULT_COMPILERS, FTPAD_BIN, TEST_SRC, run
from test_trace_trees import trees

SRC = TEST_SRC / "trace" / "names.cc"
POINT = "geo::Point::Point(long, long)"
PLUS = "geo::operator+(geo::Point const&, geo::Point const&)"
NORM = "geo::Point::norm1() const"
SUM_IL = "long geo::detail::pair_sum<int, long>(int, long)"
SUM_CS = "long geo::detail::pair_sum<char, short>(char, short)"
# One turn of main's loop, as replay shows it: a C++ name has its own
# parameter list, so no "()" is added to it.
TURN = [f"  {POINT};", f"  {POINT};", f"  {PLUS} {{", f"    {POINT};", f"  }} /* {PLUS} */",
        f"  {NORM};", f"  {SUM_IL};"]
TREE = ["main() {", *TURN * 3, f"  {SUM_CS};", "} /* main */", "# 40 events"]
CALLS = {"main": 1, POINT: 9, PLUS: 3, NORM: 3, SUM_IL: 3, SUM_CS: 1}
STACKS = {("main",), ("main", POINT), ("main", PLUS), ("main", PLUS, POINT), ("main", NORM),
          ("main", SUM_IL), ("main", SUM_CS)}


@pytest.fixture(scope="module", params=DEFAULT_COMPILERS,
                ids=[c.name for c in DEFAULT_COMPILERS])
def trace(request, tmp_path_factory):
    """names.cc built with one compiler's plugin and exit=1, recorded."""
    c = request.param
    if not c.plugin.exists() or not FTPAD_BIN.exists():
        pytest.fail(f"{c.plugin} or {FTPAD_BIN} is missing: run `make` first")
    out = tmp_path_factory.mktemp(f"names-{c.name}")
    run([*c.driver(cxx=True), "-O2", "-g0", *c.flags(exit=1), "-o", out / "names", SRC])
    run([FTPAD_BIN, "record", "-o", out / "trace", "--", out / "names"])
    return out / "trace"


def report_calls(trace, *opts):
    """{name: calls} of `ftpad report`."""
    lines = run([FTPAD_BIN, "report", *opts, trace]).stdout.splitlines()
    rows = [line.split(None, 9) for line in lines[2:] if not line.startswith("#")]
    return {row[9]: int(row[8]) for row in rows}


def test_replay_shows_demangled_names(trace):
    [(exe, lines)] = trees(trace)
    assert exe == "names" and lines == TREE


def test_report_shows_demangled_names(trace):
    assert report_calls(trace) == CALLS


def test_raw_names_are_the_mangled_ones(trace):
    raw = report_calls(trace, "--raw-names")
    assert "main" in raw and all(n.startswith("_Z") for n in raw if n != "main"), raw
    # binutils' demangler agrees with the viewers', name by name.
    names = sorted(raw)
    demangled = run(["c++filt"], input="\n".join(names) + "\n").stdout.splitlines()
    assert {d: raw[n] for n, d in zip(names, demangled)} == CALLS
    [(_, lines)] = trees_raw(trace)
    assert lines[0] == "main() {" and lines[1].startswith("  _Z") and lines[1].endswith("();")


def trees_raw(trace):
    p = run([FTPAD_BIN, "replay", "--raw-names", trace])
    return [("names", [line.split("| ", 1)[1] for line in p.stdout.splitlines()
                       if "| " in line])]


def test_folded_stacks_keep_whole_names(trace):
    """Each line is 'frame;frame;... NS': the names' spaces and commas do
    not cut them, since the count is after the last space and frames are
    separated by ';' only."""
    lines = run([FTPAD_BIN, "dump", "--folded", trace]).stdout.splitlines()
    stacks = set()
    for line in lines:
        stack, _, ns = line.rpartition(" ")
        assert int(ns) > 0
        stacks.add(tuple(stack.split(";")))
    assert stacks == STACKS


def test_flame_and_chrome_show_demangled_names(trace, tmp_path):
    svg = tmp_path / "names.svg"
    run([FTPAD_BIN, "flame", trace, "-o", svg])
    texts = {el.text for el in ET.parse(svg).iter() if el.tag.endswith("title") and el.text}
    for name in CALLS:
        assert any(t.startswith(name + " (") for t in texts), (name, sorted(texts))
    data = json.loads(run([FTPAD_BIN, "dump", "--chrome", trace]).stdout)
    events = data["traceEvents"] if isinstance(data, dict) else data
    assert {e["name"] for e in events if e.get("ph") in ("B", "E", "X")} == set(CALLS)


def test_flame_raw_names(trace, tmp_path):
    svg = tmp_path / "raw.svg"
    run([FTPAD_BIN, "flame", "--raw-names", trace, "-o", svg])
    text = svg.read_text()
    assert "_ZN3geo" in text and "geo::Point" not in text
    assert os.path.getsize(svg) > 0
