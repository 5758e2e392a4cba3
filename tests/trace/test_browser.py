# SPDX-License-Identifier: MIT
"""`ftpad flame` and the trace viewers in a real browser.

The SVG that `ftpad flame` writes is opened in Debian's headless Chromium
(driven over the DevTools protocol, tests/browser.py): it must draw, zoom on
a real mouse click, and highlight search matches.  It must also parse as XML
with exactly the frames its folded input implies.  A Chrome Trace Event
JSON of a real program run opens in speedscope (npm, pinned, cached outside
the clone), whose screenshot is not blank and whose sandwich table lists
the recorded functions."""
import collections
import contextlib
import json
import os
import random
import re
import shutil
import stat
import xml.etree.ElementTree as ET

import pytest

import browser
from ftpadtest import FTPAD_BIN, run

SVG = "{http://www.w3.org/2000/svg}"
WIDTH = 1200
SPAN = WIDTH - 2 * 10  # the frames' full width: the image less its side padding

# Self times in ns.  Names with XML's special characters, a frame under two
# parents (compute), a stack given in two lines that must merge, and a
# long name that is clipped.
FOLDED = """\
main;work;compute 3000
main;work;io_read_with_a_rather_long_name 1000
main;setup 500
main;work 500
other<&>"' 200
main;work;compute 1000
main;setup;compute 800
"""


def folded_totals(text):
    """{stack tuple: total ns} for every prefix of every stack, root ()."""
    totals = {}
    for line in text.splitlines():
        stack, ns = line.rsplit(" ", 1)
        frames = tuple(stack.split(";"))
        for depth in range(len(frames) + 1):
            totals[frames[:depth]] = totals.get(frames[:depth], 0) + int(ns)
    return totals


def expected_frames(text):
    """(depth, name, start, total) of each frame, children in name order
    after their parent's start: what the SVG must hold."""
    totals = folded_totals(text)
    out = []

    def place(stack, start):
        name = stack[-1] if stack else "all"
        out.append((len(stack), name, start, totals[stack]))
        kids = sorted(s for s in totals if len(s) == len(stack) + 1 and s[:-1] == stack)
        for kid in kids:
            place(kid, start)
            start += totals[kid]

    place((), 0)
    return out


def flame(tmp_path, folded, name="f", *args):
    src = tmp_path / f"{name}.folded"
    src.write_text(folded)
    out = tmp_path / f"{name}.svg"
    run([FTPAD_BIN, "flame", "--folded", src, "-o", out, *args])
    return out


def svg_frames(path):
    root = ET.parse(path).getroot()
    for g in root.iter(f"{SVG}g"):
        if g.get("class") == "frame":
            yield g


@pytest.fixture(scope="module")
def chromium():
    try:
        c = browser.Chromium(WIDTH, 700)
    except RuntimeError as e:
        pytest.fail(str(e))
    yield c
    c.close()


# -- (d) the SVG as XML ------------------------------------------------------

def test_svg_parses_with_exactly_the_folded_frames(tmp_path):
    svg = flame(tmp_path, FOLDED)
    got = [(int(g.get("data-d")), g.get("data-name"), int(g.get("data-s")),
            int(g.get("data-t"))) for g in svg_frames(svg)]
    assert got == expected_frames(FOLDED)
    total = folded_totals(FOLDED)[()]
    for g in svg_frames(svg):
        t = int(g.get("data-t"))
        rect = g.find(f"{SVG}rect")
        assert abs(float(rect.get("width")) - SPAN * t / total) <= 0.006, g.get("data-name")
        assert abs(float(rect.get("x")) - 10 - SPAN * int(g.get("data-s")) / total) <= 0.006
        title = g.find(f"{SVG}title").text
        assert title.startswith(g.get("data-name") + " (")
        assert title.endswith(f"{100 * t / total:.2f}%)"), title
        label = g.find(f"{SVG}text").text or ""
        assert label == g.get("data-name") or (label.endswith("..") and
                                               g.get("data-name").startswith(label[:-2]))
    assert any(g.get("data-name") == "other<&>\"'" for g in svg_frames(svg))


def test_svg_is_the_same_bytes_for_the_same_stacks(tmp_path):
    """Colours hash the name and children are sorted: input line order and
    repeated runs change nothing."""
    lines = FOLDED.splitlines()
    random.Random(14).shuffle(lines)
    a = flame(tmp_path, FOLDED, "a").read_bytes()
    b = flame(tmp_path, "\n".join(lines) + "\n", "b").read_bytes()
    assert a == b


def test_svg_file_gets_the_usual_permissions(tmp_path):
    """Written through a temporary and a rename, but not left 0600."""
    mask = os.umask(0o022)
    try:
        svg = flame(tmp_path, FOLDED)
    finally:
        os.umask(mask)
    assert svg.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.folded", "f.svg"]


def test_svg_to_a_fifo_keeps_the_fifo(tmp_path):
    """-o names a FIFO (or /dev/stdout, /dev/null): the SVG goes into it; a
    temporary and a rename would have replaced it by a regular file."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    src = tmp_path / "f.folded"
    src.write_text(FOLDED)
    # The read end is open before the writer comes; the SVG (7 KB) fits in
    # the pipe's buffer, so nothing has to read while ftpad writes.
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        p = run([FTPAD_BIN, "flame", "--folded", src, "-o", fifo], check=False)
        got = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(fd, 65536):
                got += chunk
    finally:
        os.close(fd)
    assert p.returncode == 0, p.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got == run([FTPAD_BIN, "flame", "--folded", src, "-o", "-"]).stdout.encode()


def test_folded_from_stdin_with_crlf_and_blank_lines():
    """`--folded -` reads stdin; CRLF, trailing blanks and blank lines are
    the same stacks as clean lines."""
    clean = run([FTPAD_BIN, "flame", "--folded", "-", "-o", "-"], input=FOLDED).stdout
    messy = FOLDED.replace("\n", "  \r\n\n")
    assert run([FTPAD_BIN, "flame", "--folded", "-", "-o", "-"], input=messy).stdout == clean


def test_bad_folded_line_is_an_error_naming_file_and_line(tmp_path):
    src = tmp_path / "bad.folded"
    src.write_text("main;work 10\nmain;;work 5\n")
    p = run([FTPAD_BIN, "flame", "--folded", src, "-o", tmp_path / "o.svg"], check=False)
    assert p.returncode == 1
    assert f"{src}:2: empty frame name" in p.stderr
    assert not list(tmp_path.glob("o.svg*")), "nothing is left behind"


# -- (a) (b) (c) the SVG in Chromium ------------------------------------------

def open_svg(chromium, svg):
    chromium.open(svg.as_uri())
    assert chromium.wait_for("typeof window.ftpadZoom === 'function'"), "the script did not run"


def frame_state(chromium):
    """{name: (rect width, displayed, class)} of every frame, from the DOM."""
    return {k: tuple(v) for k, v in chromium.eval("""
        Object.fromEntries([...document.querySelectorAll('g.frame')].map(g => [
            g.getAttribute('data-name'),
            [+g.querySelector('rect').getAttribute('width'),
             getComputedStyle(g).display !== 'none', g.getAttribute('class')]]))""").items()}


def test_svg_renders_in_chromium(chromium, tmp_path):
    svg = flame(tmp_path, FOLDED)
    open_svg(chromium, svg)
    png = chromium.screenshot(WIDTH, 200)
    colours, drawn = browser.colour_census(png)
    assert colours >= 8 and drawn > 0.05, (colours, drawn)
    # The pixel near the right end of the "work" frame is the frame's own
    # fill: the rect is really drawn where the SVG says.
    g = next(g for g in svg_frames(svg) if g.get("data-name") == "work")
    rect = g.find(f"{SVG}rect")
    x = int(float(rect.get("x")) + float(rect.get("width")) - 3)
    y = int(float(rect.get("y")) + 7)
    _, _, rows = browser.png_pixels(png)
    fill = tuple(int(v) for v in re.findall(r"\d+", rect.get("fill")))
    assert rows[y][x] == fill


def test_width_follows_the_window(chromium, tmp_path):
    """Drawn 1200 px wide, the graph takes the window's width on load and
    follows it when it changes, a zoom kept."""
    svg = flame(tmp_path, FOLDED)
    width_of = """(() => [+document.documentElement.getAttribute('width'),
        +document.getElementById('background').getAttribute('width'),
        [...document.querySelectorAll('g.frame')].find(g => g.getAttribute('data-name')
            === 'all').querySelector('rect').getAttribute('width')])()"""
    try:
        chromium.set_viewport(800, 700)
        open_svg(chromium, svg)
        assert chromium.eval(width_of) == [800, 800, f"{800 - 20:.2f}"]
        chromium.eval("ftpadZoom('work')")
        chromium.set_viewport(1500, 700)
        chromium.eval("new Promise(r => setTimeout(r, 200))")
        assert chromium.eval(width_of) == [1500, 1500, f"{1500 - 20:.2f}"]
        assert frame_state(chromium)["work"][0] == pytest.approx(1500 - 20, abs=0.01)
    finally:
        chromium.set_viewport(WIDTH, 700)


def test_click_on_a_frame_zooms_to_it(chromium, tmp_path):
    svg = flame(tmp_path, FOLDED)
    open_svg(chromium, svg)
    box = chromium.eval("""(() => { const r = [...document.querySelectorAll('g.frame')]
        .find(g => g.getAttribute('data-name') === 'work').querySelector('rect')
        .getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()""")
    chromium.click(*box)
    state = frame_state(chromium)
    assert state["work"][0] == pytest.approx(SPAN, abs=0.01)
    assert state["work"][1]
    # ancestors stay, full width, marked; siblings and cousins go
    assert state["main"][:2] == (pytest.approx(SPAN, abs=0.01), True) and "ancestor" in state["main"][2]
    assert state["all"][1]
    assert not state["setup"][1]
    assert not state["other<&>\"'"][1]
    # children scale with it: compute is 4000 of work's 5500 ns
    assert state["compute"][0] == pytest.approx(SPAN * 4000 / 5500, abs=0.01)
    assert chromium.eval("document.documentElement.getAttribute('data-zoomed')") == "work"
    # the reset link appears; clicking it puts every frame back
    box = chromium.eval("""(() => { const r = document.getElementById('reset')
        .getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()""")
    chromium.click(*box)
    state = frame_state(chromium)
    assert all(shown for _, shown, _ in state.values())
    assert state["work"][0] == pytest.approx(SPAN * 5500 / 7000, abs=0.01)


def test_search_highlights_matching_frames(chromium, tmp_path):
    svg = flame(tmp_path, FOLDED)
    open_svg(chromium, svg)
    pct = chromium.eval("ftpadSearch('^comp|^io_')")
    state = frame_state(chromium)
    hits = {name for name, (_, _, cls) in state.items() if "match" in cls.split()}
    # compute under work and under setup; nested matches counted once
    assert hits == {"compute", "io_read_with_a_rather_long_name"}
    assert pct == pytest.approx(100 * (4000 + 800 + 1000) / 7000)
    assert chromium.eval("document.getElementById('matched').textContent") == \
        f"Matched: {100 * 5800 / 7000:.1f}%"
    fills = chromium.eval("""[...document.querySelectorAll('g.frame.match rect')]
        .map(r => r.getAttribute('fill'))""")
    assert fills and set(fills) == {"rgb(230,0,230)"}
    # text that is not a regular expression is searched for as it is
    chromium.eval("ftpadSearch('other<&>\"\\'')")
    state = frame_state(chromium)
    assert {n for n, (_, _, c) in state.items() if "match" in c} == {"other<&>\"'"}
    chromium.eval("ftpadSearch('(')")
    assert chromium.eval("document.querySelectorAll('g.frame.match').length") == 0


# -- (e) a real program's trace in speedscope ---------------------------------

PROGRAM = r"""
#include <stdio.h>
__attribute__((noinline)) int leaf_square(int x) { return x * x; }
__attribute__((noinline)) int sum_squares(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += leaf_square(i);
	return s;
}
__attribute__((noinline)) int parse_input(const char *s)
{
	int v = 0;
	while (*s)
		v = v * 10 + (*s++ - '0');
	return v;
}
int main(void)
{
	int n = parse_input("30");
	printf("%d\n", sum_squares(n) + sum_squares(n / 2));
	return 0;
}
"""
FUNCTIONS = {"main", "parse_input", "sum_squares", "leaf_square"}


class Recorded:
    """A real run of PROGRAM, built with the GCC plugin and exit=1 and
    recorded with `ftpad record` into a trace directory, and what `ftpad
    dump --folded` and `--chrome` make of it."""

    def __init__(self, plugin, tmp_path):
        (tmp_path / "prog.c").write_text(PROGRAM)
        run(["gcc", "-O2", f"-fplugin={plugin}", "-fplugin-arg-ftpad-exit=1",
             tmp_path / "prog.c", "-o", tmp_path / "prog"])
        self.dir = tmp_path / "trace"
        p = run([FTPAD_BIN, "record", "-o", self.dir, "--", tmp_path / "prog"])
        assert p.stdout == "9570\n" and " 0 dropped" in p.stderr, p.stderr
        self.folded = run([FTPAD_BIN, "dump", "--folded", self.dir]).stdout
        self.chrome = run([FTPAD_BIN, "dump", "--chrome", self.dir]).stdout


@pytest.fixture(scope="module")
def recorded(plugin, libftpad, tmp_path_factory):
    return Recorded(plugin, tmp_path_factory.mktemp("recorded"))


def inclusive_times(folded):
    """{(name, depth): ns} of each frame, summed from folded stacks, with
    "all" at depth 0 (every name in PROGRAM sits at one depth only)."""
    times = collections.Counter()
    for line in folded.splitlines():
        path, ns = line.rsplit(" ", 1)
        times["all", 0] += int(ns)
        for depth, name in enumerate(path.split(";"), 1):
            times[name, depth] += int(ns)
    return times


def test_recorded_run_draws_as_a_flame_graph(recorded, chromium, tmp_path):
    svg = tmp_path / "run.svg"
    run([FTPAD_BIN, "flame", recorded.dir, "-o", svg])
    frames = {(g.get("data-name"), int(g.get("data-d"))): int(g.get("data-t"))
              for g in svg_frames(svg)}
    assert {name for name, _ in frames} == FUNCTIONS | {"all"}
    assert frames == inclusive_times(recorded.folded)
    events = json.loads(recorded.chrome)["traceEvents"]
    leaf = [e for e in events if e["name"] == "leaf_square" and e["ph"] == "B"]
    assert len(leaf) == 45  # 30 + 15 calls
    open_svg(chromium, svg)
    assert chromium.eval("ftpadZoom('sum_squares')")
    assert frame_state(chromium)["sum_squares"][0] == pytest.approx(SPAN, abs=0.01)


@pytest.fixture(scope="module")
def speedscope():
    try:
        return browser.speedscope_dir()
    except (RuntimeError, OSError) as e:
        pytest.fail(f"cannot install speedscope {browser.SPEEDSCOPE_VERSION}: {e}")


def test_speedscope_shows_the_recorded_functions(recorded, speedscope, chromium, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(speedscope, site)
    (site / "trace.json").write_text(recorded.chrome)
    with browser.serve(site) as url:
        chromium.open(f"{url}/index.html#profileURL={url}/trace.json")
        assert chromium.wait_for("!!document.querySelector('canvas') && "
                                 "document.body.innerText.includes('Sandwich')")
        # The flame chart is drawn on a canvas once the profile is loaded.
        assert chromium.wait_for("document.title.includes('trace.json')"), \
            chromium.eval("document.title")
        colours, drawn = browser.colour_census(chromium.screenshot(WIDTH, 300))
        assert colours >= 8 and drawn > 0.05, (colours, drawn)
        # speedscope's canvas has no text to read; its sandwich view is a
        # table of every function, in the DOM.
        box = chromium.eval("""(() => { const e = [...document.querySelectorAll('div')]
            .filter(e => e.textContent.trim().endsWith('Sandwich') && e.children.length <= 1)
            .pop().getBoundingClientRect(); return [e.x + e.width / 2, e.y + e.height / 2]; })()""")
        chromium.click(*box)
        # The table's heading comes before its rows: wait for the names.
        names = json.dumps(sorted(FUNCTIONS))
        chromium.wait_for(f"""(() => {{
            const rows = document.body.innerText.split('Symbol Name')[1] || '';
            return {names}.every(n => rows.split(/\\s+/).includes(n)); }})()""")
        text = chromium.eval("document.body.innerText")
        assert "Symbol Name" in text, text
        table = text.split("Symbol Name", 1)[1].split()
        assert FUNCTIONS <= set(table), text
