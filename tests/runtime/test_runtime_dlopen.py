# SPDX-License-Identifier: MIT
"""Modules loaded with dlopen while an ops is registered are patched at
once, even when linked without libftpad, whether libftpad is linked in or
preloaded; modules removed with dlclose are forgotten (nothing is written
where they were, their names are gone) and a reload is traced again."""

import pytest

from ftpadtest import BUILD, FTPAD_BIN, INCLUDE, TEST_SRC, run

SRC = TEST_SRC / "runtime"
LIBDIR = BUILD / "runtime"
# Knows nothing of libftpad: `ftpad record` preloads it.
PLAIN = r'''
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv)
{
	void *h = dlopen(argv[1], RTLD_NOW);
	long (*square)(long) = h ? (long (*)(long))dlsym(h, "lib_square") : 0;
	if (!square)
		return 1;
	printf("%ld\n", square(7));
	return dlclose(h);
}
'''


# Also knows nothing of libftpad, but asks the preloaded one how many sites
# it sees (dlsym: it is not linked against it).
PLAIN_STATS = r'''
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
struct stats { size_t sz; unsigned long modules, sites, enabled, traps; };
int main(int argc, char **argv)
{
	int (*get_stats)(struct stats *) = (int (*)(struct stats *))dlsym(RTLD_DEFAULT, "ftpad_get_stats");
	const char *(*name)(unsigned long) =
		(const char *(*)(unsigned long))dlsym(RTLD_DEFAULT, "ftpad_lookup_name");
	struct stats st = { sizeof(st) };
	if (argc < 2 || !get_stats || !name)
		return 2;
	for (int round = 0; round < 2; round++) {
		void *h = dlopen(argv[1], RTLD_NOW);
		long (*square)(long) = h ? (long (*)(long))dlsym(h, "lib_square") : 0;
		unsigned long ip = (unsigned long)square;
		if (!square)
			return 1;
		get_stats(&st);
		printf("loaded: sites=%lu enabled=%lu square=%ld name=%s\n", st.sites, st.enabled,
		       square(round + 7), name(ip));
		dlclose(h);
		get_stats(&st);
		printf("closed: sites=%lu enabled=%lu name=%s\n", st.sites, st.enabled,
		       name(ip) ? "found" : "none");
	}
	return 0;
}
'''


@pytest.fixture(scope="module")
def dl(plugin, libftpad, tmp_path_factory):
    d = tmp_path_factory.mktemp("dl")
    run(["gcc", "-O2", f"-fplugin={plugin}", "-shared", "-fPIC", SRC / "dl_lib.c",
         "-o", d / "libdl_lib.so"])
    run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", SRC / "dl.c",
         f"-L{LIBDIR}", "-lftpad", f"-Wl,-rpath,{LIBDIR}", "-o", d / "dl"])
    (d / "plain.c").write_text(PLAIN)
    run(["gcc", "-O2", d / "plain.c", "-o", d / "dl_plain"])
    (d / "plain_stats.c").write_text(PLAIN_STATS)
    run(["gcc", "-O2", d / "plain_stats.c", "-o", d / "dl_plain_stats"])
    return d


def test_dlopen_dlclose_while_registered(dl):
    p = run([dl / "dl", dl / "libdl_lib.so"])
    assert p.stdout.splitlines() == [
        "before: modules=0 sites=0 enabled=0",
        "loaded: modules=1 sites=1 enabled=1",
        "square(7)=49 calls=1 arg=7",
        "closed: modules=0 sites=0 enabled=0",
        "name after dlclose: none",
        "square(8)=64 calls=2 arg=8",
        "unregister: 0",
        "square(9)=81 calls=2",
        "end: modules=0 sites=0 enabled=0",
    ]


def test_dlopen_under_preload(dl, tmp_path):
    """`ftpad record` preloads libftpad into a program that never calls it:
    its dlopen is interposed, so the library's function is traced."""
    out = tmp_path / "trace.txt"
    p = run([FTPAD_BIN, "record", "--text", "-f", "lib_*", "-o", out, "--",
             dl / "dl_plain", dl / "libdl_lib.so"])
    assert p.stdout == "49\n"
    lines = out.read_text().splitlines()
    assert len(lines) == 2 and lines[0].endswith(" lib_square <-main"), lines
    assert lines[1] == "ftpad: 0 sites found, 0 sites enabled, 1 calls seen"


def test_dlopen_dlclose_under_preload(dl, tmp_path):
    """Preloaded into a program that does not know it, libftpad also sees
    the dlclose (its interposed dlclose rescans at once): the library's
    site is gone and so is its name; loaded again, it is patched again."""
    out = tmp_path / "trace.txt"
    p = run([FTPAD_BIN, "record", "--text", "-f", "lib_*", "-o", out, "--",
             dl / "dl_plain_stats", dl / "libdl_lib.so"])
    assert p.stdout.splitlines() == [
        "loaded: sites=1 enabled=1 square=49 name=lib_square",
        "closed: sites=0 enabled=0 name=none",
        "loaded: sites=1 enabled=1 square=64 name=lib_square",
        "closed: sites=0 enabled=0 name=none",
    ]
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and all(x.endswith(" lib_square <-main") for x in lines[:2]), lines
    assert lines[2] == "ftpad: 0 sites found, 0 sites enabled, 2 calls seen"
