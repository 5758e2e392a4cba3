# SPDX-License-Identifier: MIT
"""How the runtime's files depend on each other (docs/design.md, "The
runtime's rooms"): among the start-up, fork.c, tracer.c, attach.c, the
recorder (record*.c), early.c, ops.c, symbols.c, patch.c, module.c,
symtab.c and lock.c the references go one way only, patch.c (plans and
writes) reaches neither the API nor the tracers, and both architectures
implement the one write hook, with no weak symbol and no test switch in
the library.  The objects are compiled here and read with nm: A refers to
B when A.o has an undefined symbol that B.o defines; the recorder's files
count as one room."""
import shutil
import subprocess

import pytest

from ftpadtest import ROOT, run

RUNTIME = ROOT / "runtime"
# docs/design.md's layers, top down: each refers only to those below.
LAYER = {"starthook": 0, "early_preinit": 0, "fork": 1, "tracer": 1, "attach": 1, "record": 2,
         "early": 3, "ops": 4, "symbols": 5, "patch": 5, "module": 6, "symtab": 7, "lock": 8,
         "thread": 8}
ROOMS = set(LAYER) - {"starthook", "early_preinit"}
ARCHES = {"x86_64": "gcc", "aarch64": "aarch64-linux-gnu-gcc"}


def objects(tmp_path, arch, cc):
    """The runtime's objects for arch, as runtime/CMakeLists.txt lists them."""
    out = tmp_path / arch
    out.mkdir()
    sources = (sorted(RUNTIME.glob("*.c")) + sorted(RUNTIME.glob("interpose/*.c")) +
               sorted(RUNTIME.glob(f"arch/{arch}*.c")))
    for src in sources:
        run([cc, "-std=gnu11", "-O2", "-fPIC", "-fvisibility=hidden", f"-I{RUNTIME}",
             f"-I{RUNTIME / 'include'}", f"-I{RUNTIME.parent / 'pad'}", "-c", src,
             "-o", out / (src.stem + ".o")])
    return sorted(out.glob("*.o"))


def room(obj):
    """The room of an object: its file's name, record for record*.c."""
    return "record" if obj.stem.startswith("record") else obj.stem


def references(objs):
    """{(a, b): symbols}: room a refers to what room b defines."""
    defined, undefined, weak = {}, {}, []
    for o in objs:
        out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                undefined.setdefault(room(o), set()).add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBRVW":
                defined[parts[2]] = room(o)
                if parts[1] in "VW":
                    weak.append((room(o), parts[2]))
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
