# SPDX-License-Identifier: MIT
"""Pads smaller than a site (docs/format.md "Pads without a site"): the
kernel ABI without an ops slot takes every count -fpatchable-function-entry
takes, and a pad with fewer units after the entry than a site needs is
still made, and recorded, as its counts ask.  Its ftpad record says it has
no site (FTPAD_SITE_NO_SITE, site_len 0): libftpad skips it with a warning
that names the function, the other functions of the program trace as
before, and recordmcount-ng --check finds nothing wrong with it."""
import re

import pytest

from ftpadtest import A64_PLUGIN, FTPAD_BIN, PLUGIN, RECORDMCOUNT, Image, plugin_flags, run

NO_SITE = 1 << 4
KERNEL = 1 << 3
ENDBR = 1 << 0
BTI = 1 << 1
SOURCE = """\
#include <stdio.h>
__attribute__((noinline)) int small(int x) { return x + 1; }
__attribute__((noinline)) int none(int x) { return x * 5; }
__attribute__((noinline)) int big(int x) { return x * 3; }
int main(void)
{
	int s = 0;
	for (int i = 0; i < 10; i++)
		s += small(i) + big(i) + none(i);
	printf("%d\\n", s);
	return 0;
}
"""
# small: one unit after the entry; none: only two before it; big and main:
# the kernel layout's site.
POLICY = "pad small after=1\npad none before=2 after=0\n"
SUMMARY = re.compile(r"^ftpad: (\d+) sites, (\d+) enabled, (\d+) events", re.M)


def build(tmp_path, cc, plugin_path, *extra, link=True):
    src = tmp_path / "prog.c"
    src.write_text(SOURCE)
    policy = tmp_path / "small.policy"
    policy.write_text(POLICY)
    out = tmp_path / ("prog" if link else "prog.o")
    run([cc, "-O2", *extra, *plugin_flags(plugin_path, abi="kernel", ops=0, record="ftpad",
                                          policy=policy),
         *([] if link else ["-c"]), src, "-o", out])
    return out


@pytest.mark.parametrize("landing", [[], ["-fcf-protection"]], ids=["plain", "endbr"])
def test_records_say_no_site(tmp_path, plugin, landing):
    """The records: NO_SITE and site_len 0 exactly for the pads below the
    site; `site` the first unit behind the landing pad; the pads hold
    GCC's single-byte NOPs."""
    with Image(build(tmp_path, "gcc", PLUGIN, *landing)) as image:
        sites = {s.name: s for s in image.sites()}
        assert set(sites) == {"small", "none", "big", "main"}
        for name, (before, after) in {"small": (0, 1), "none": (2, 0)}.items():
            s = sites[name]
            landing_bytes = 4 if landing else 0
            assert (s.before, s.after, s.site_len) == (before, after, 0), s
            assert s.flags == NO_SITE | KERNEL | (ENDBR if landing else 0), s
            assert s.site == s.entry + landing_bytes, s
            assert image.read(s.entry - before, before) == b"\x90" * before
            assert image.read(s.site, after) == b"\x90" * after
        for name in ("big", "main"):
            s = sites[name]
            assert s.site_len == 5 and not s.flags & NO_SITE, s


def test_libftpad_skips_them_with_a_message(tmp_path, plugin):
    """Run under `ftpad record`: one warning per pad without a site, naming
    its function; the program's output is unchanged, and the functions
    with a site are traced."""
    prog = build(tmp_path, "gcc", PLUGIN)
    plain = run([prog])
    p = run([FTPAD_BIN, "record", "-o", tmp_path / "trace", "--", prog], check=False,
            cwd=tmp_path)
    assert (p.returncode, p.stdout) == (0, plain.stdout), p.stderr
    for name in ("small", "none"):
        assert (f"{prog}: warning: ftpad: {name}: its pad is smaller than a site, as its "
                f"counts asked") in p.stderr, p.stderr
    assert "big: " not in p.stderr and "main: " not in p.stderr, p.stderr
    sites, enabled, events = map(int, SUMMARY.search(p.stderr).groups())
    # main once, big ten times: entries (the kernel ABI has no exit sites)
    assert (sites, enabled, events) == (2, 2, 1 + 10), p.stderr


@pytest.mark.parametrize("cc,plugin_path,flags,landing",
                         [("gcc", PLUGIN, ["-fcf-protection"], ENDBR),
                          ("aarch64-linux-gnu-gcc-12", A64_PLUGIN,
                           ["-mbranch-protection=standard"], BTI)],
                         ids=["x86_64", "aarch64"])
def test_recordmcount_check_accepts_them(tmp_path, plugin, cc, plugin_path, flags, landing):
    """recordmcount-ng --check applies libftpad's rule: a record that says
    it has no site is not a site to check, so the object has no violation
    (an older --check says 'site_len is not 5' and exits 1: docs/format.md)."""
    obj = build(tmp_path, cc, plugin_path, *flags, link=False)
    p = run([RECORDMCOUNT, "--check", obj], check=False)
    assert p.returncode == 0 and f"{obj.name}: 4 sites checked, 0 violations" in p.stdout + \
        p.stderr, p.stdout + p.stderr
