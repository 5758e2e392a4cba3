#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Make the pictures of docs/tracing.md: a recorded run of a small program
as `ftpad flame` draws it (whole, and zoomed on one frame) and as speedscope
shows it, each a screenshot of Debian's headless Chromium cropped to what
matters.

    FTPAD_BUILD=build scripts/doc-pictures.py [--record] [OUTDIR]   (default docs/pictures)

The run is kept in scripts/pictures-run/ (its folded stacks and its Chrome
JSON), so that the pictures are the same bytes each time they are made:
a new recording has other times, pids and paths.  --record records the
program again and replaces them first; the JSON's process name (the
program's temporary path) becomes "words" and its pids and tids 1, which
is all that is changed.

Needs the build (the GCC plugin, libftpad, bin/ftpad), chromium,
python3-websocket and npm (scripts/install-deps.sh)."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import browser  # noqa: E402

BUILD = pathlib.Path(os.environ.get("FTPAD_BUILD", ROOT / "build")).resolve()
RUN = ROOT / "scripts" / "pictures-run"
WIDTH = 900

# A small program with a shape worth looking at: a parse step, a hot loop
# two calls deep, and a report.
PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#define N 64
static unsigned table[N];
__attribute__((noinline)) unsigned hash_word(const char *w)
{
	unsigned h = 5381;
	while (*w)
		h = h * 33 + (unsigned char)*w++;
	return h;
}
__attribute__((noinline)) void count_word(const char *w) { table[hash_word(w) % N]++; }
__attribute__((noinline)) int parse_args(int argc) { return argc > 1 ? 2 : 1; }
__attribute__((noinline)) void count_words(const char *text, int rounds)
{
	char word[32];
	for (int r = 0; r < rounds; r++)
		for (const char *p = text; *p;) {
			size_t n = strcspn(p, " ");
			memcpy(word, p, n);
			word[n] = 0;
			count_word(word);
			p += n + (p[n] == ' ');
		}
}
__attribute__((noinline)) void format_line(int i) { if (table[i]) printf("%2d %u\n", i, table[i]); }
__attribute__((noinline)) void print_report(void) { for (int i = 0; i < N; i++) format_line(i); }
int main(int argc, char **argv)
{
	(void)argv;
	count_words("the quick brown fox jumps over the lazy dog", 4 * parse_args(argc));
	print_report();
	return 0;
}
"""


def record(work):
    """words.c built with the GCC plugin and exit=1, recorded with `ftpad
    record`: the trace directory."""
    (work / "words.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-O2", f"-fplugin={BUILD / 'gcc-plugin' / 'ftpad.so'}",
                    "-fplugin-arg-ftpad-exit=1", work / "words.c", "-o", work / "words"],
                   check=True)
    trace = work / "words.data"
    subprocess.run([BUILD / "bin" / "ftpad", "record", "-o", trace, "--", work / "words"],
                   check=True, stdout=subprocess.DEVNULL)
    return trace


def steady_chrome_json(text):
    """The Chrome JSON of a run without what changes from run to run and
    says nothing: the program's temporary path (speedscope's title) and
    the pids and tids.  Indented, one event a line, for a readable diff."""
    data = json.loads(text)
    for e in data["traceEvents"]:
        e["pid"] = e["tid"] = 1
        if e.get("ph") == "M" and e["name"] == "process_name":
            e["args"]["name"] = "words"
    lines = ",\n".join(json.dumps(e, separators=(",", ":")) for e in data["traceEvents"])
    rest = {k: v for k, v in data.items() if k != "traceEvents"}
    head = json.dumps(rest)[1:-1]
    return "{" + (head + ", " if head else "") + '"traceEvents": [\n' + lines + "\n]}\n"


def record_run(work):
    """Record the program again into RUN: its folded stacks and its steady
    Chrome JSON, each written to a temporary and renamed."""
    trace = record(work)
    ftpad = BUILD / "bin" / "ftpad"
    folded = subprocess.run([ftpad, "dump", "--folded", trace], check=True,
                            capture_output=True, text=True).stdout
    chrome = subprocess.run([ftpad, "dump", "--chrome", trace], check=True,
                            capture_output=True, text=True).stdout
    RUN.mkdir(exist_ok=True)
    for name, text in (("words.folded", folded), ("words.json", steady_chrome_json(chrome))):
        tmp = RUN / (name + ".tmp")
        tmp.write_text(text)
        tmp.rename(RUN / name)


def save(png, path):
    path.write_bytes(png)
    print(f"{path}: {len(png)} bytes")


def flame_pictures(c, work, out):
    svg = work / "words.svg"
    subprocess.run([BUILD / "bin" / "ftpad", "flame", "--folded", RUN / "words.folded",
                    "--width", str(WIDTH), "--title", "words: a recorded run", "-o", svg],
                   check=True)
    c.open(svg.as_uri())
    c.wait_for("typeof window.ftpadZoom === 'function'")
    height = c.eval("+document.documentElement.getAttribute('height')")
    save(c.screenshot(WIDTH, height), out / "flame.png")
    c.eval("ftpadZoom('count_words'); ftpadSearch('hash')")
    save(c.screenshot(WIDTH, height), out / "flame-zoomed.png")


def speedscope_picture(c, work, out):
    site = work / "site"
    shutil.copytree(browser.speedscope_dir(), site)
    shutil.copyfile(RUN / "words.json", site / "words.json")
    with browser.serve(site) as url:
        c.open(f"{url}/index.html#profileURL={url}/words.json")
        c.wait_for("document.title.includes('words.json') && !!document.querySelector('canvas')")
        save(c.screenshot(WIDTH, 260), out / "speedscope.png")


def main():
    args = sys.argv[1:]
    again = "--record" in args
    args = [a for a in args if a != "--record"]
    out = pathlib.Path(args[0] if args else ROOT / "docs" / "pictures")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ftpad-pictures-") as tmp:
        work = pathlib.Path(tmp)
        if again or not (RUN / "words.json").exists():
            record_run(work)
        with browser.Chromium(WIDTH, 600) as c:
            flame_pictures(c, work, out)
            speedscope_picture(c, work, out)


if __name__ == "__main__":
    main()
