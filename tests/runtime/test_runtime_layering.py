# SPDX-License-Identifier: MIT
"""How the runtime's files depend on each other (docs/design.md, "The
runtime's rooms"): among ops.c, patch.c, module.c, early.c and tracer.c
the references go one way only, patch.c (plans and writes) reaches
neither the API nor the tracers, and both architectures implement the
one write hook, with no weak symbol and no test switch in the library.
The objects are compiled here and read with nm: A refers to B when A.o
has an undefined symbol that B.o defines."""
import shutil
import subprocess

import pytest

from ftpadtest import ROOT, run

RUNTIME = ROOT / "runtime"
ROOMS = {"ops", "patch", "module", "early", "tracer"}
# docs/design.md's layers, top down: each refers only to those below.
LAYER = {"starthook": 0, "early_preinit": 0, "tracer": 1, "early": 2, "ops": 3, "patch": 4,
         "module": 5}
ARCHES = {"x86_64": "gcc", "aarch64": "aarch64-linux-gnu-gcc"}


def objects(tmp_path, arch, cc):
    """The runtime's objects for arch, as runtime/CMakeLists.txt lists them."""
    out = tmp_path / arch
    out.mkdir()
    sources = sorted(RUNTIME.glob("*.c")) + [RUNTIME / "arch" / f"{arch}.c"]
    for src in sources:
        run([cc, "-std=gnu11", "-O2", "-fPIC", "-fvisibility=hidden", f"-I{RUNTIME}",
             f"-I{RUNTIME / 'include'}", f"-I{RUNTIME.parent / 'pad'}", "-c", src,
             "-o", out / (src.stem + ".o")])
    return sorted(out.glob("*.o"))


def references(objs):
    """{(a, b): symbols}: file a refers to what file b defines."""
    defined, undefined, weak = {}, {}, []
    for o in objs:
        out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                undefined.setdefault(o.stem, set()).add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBRVW":
                defined[parts[2]] = o.stem
                if parts[1] in "VW":
                    weak.append((o.stem, parts[2]))
    edges = {}
    for a, syms in undefined.items():
        for s in syms:
            if defined.get(s, a) != a:
                edges.setdefault((a, defined[s]), set()).add(s)
    return edges, weak


def cycles(edges, nodes):
    """The pairs of nodes that reach each other."""
    succ = {n: {b for (a, b) in edges if a == n and b in nodes} for n in nodes}

    def reach(a):
        seen, todo = set(), [a]
        while todo:
            for b in succ[todo.pop()] - seen:
                seen.add(b)
                todo.append(b)
        return seen
    return sorted({tuple(sorted((a, b))) for a in nodes for b in reach(a) if a in reach(b)
                   and a != b})


@pytest.mark.parametrize("arch", ARCHES)
def test_rooms_have_no_cycle(tmp_path, arch):
    cc = ARCHES[arch]
    if not shutil.which(cc):
        pytest.skip(f"{cc} is not installed")
    edges, weak = references(objects(tmp_path, arch, cc))
    assert cycles(edges, ROOMS) == [], {k: v for k, v in edges.items() if set(k) <= ROOMS}
    # patch.c plans and writes: what the ops want is handed to it.
    assert {b for (a, b) in edges if a == "patch"} & {"ops", "early", "tracer"} == set()
    assert "ftpad_arch_batch_write" in edges[("patch", arch)]
    assert weak == []
    upwards = {(a, b): syms for (a, b), syms in edges.items()
               if a in LAYER and b in LAYER and LAYER[a] >= LAYER[b]}
    # The one exception: a name for the archive link, not a call.
    assert upwards in ({}, {("ops", "starthook"): {"ftpad_start_up"}},
                       {("ops", "early_preinit"): {"ftpad_start_up"}}), upwards


def test_no_test_switch_in_the_runtime():
    """Tests get their controls by building variants of their own
    (test_runtime_aarch64.py), not through macros in the library."""
    for src in list(RUNTIME.rglob("*.c")) + list(RUNTIME.rglob("*.h")):
        assert "FTPAD_TEST" not in src.read_text(), src
