# SPDX-License-Identifier: MIT
"""The tree's own shape, as docs/design.md describes it: comments and docs
say the behaviour they stand for rather than cite a tracker's numbers
(a reader of the code has no issue tracker), and no file of libftpad grows
past the size where it starts to hold several jobs."""
import re
import subprocess

from ftpadtest import ROOT

# A tracker's word (issue, defect, seed, stop) and its number: numbers only a
# tracker knows.
TRACKER = re.compile(r"\b(issues?|defects?|seeds?|stops?) #?0*\d+\b", re.IGNORECASE)
# The changelog is history, written in the tracker's terms on purpose.
HISTORY = {"debian/changelog"}
TEXT_SUFFIXES = {".c", ".h", ".cc", ".S", ".py", ".sh", ".cmake", ".txt", ".md", ".in",
                 ".map", ".js", ".1", ".3", ".7", ""}
RUNTIME_MAX_LINES = 900


def tracked_files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return [ROOT / p for p in out.splitlines() if p not in HISTORY]


def test_no_comment_cites_a_tracker_number():
    found = []
    for path in tracked_files():
        if path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if TRACKER.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "say the behaviour, not the tracker's number:\n" + "\n".join(found)


def test_no_runtime_file_holds_several_jobs():
    sources = [p for p in tracked_files()
               if p.relative_to(ROOT).parts[0] == "runtime" and p.suffix in {".c", ".h", ".S"}]
    assert sources
    big = {str(p.relative_to(ROOT)): n for p in sources
           if (n := len(p.read_text().splitlines())) > RUNTIME_MAX_LINES}
    assert not big, f"split at their seams (at most {RUNTIME_MAX_LINES} lines): {big}"
