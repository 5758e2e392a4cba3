# SPDX-License-Identifier: MIT
"""SQLite's shell, a second real program for the tests and benchmarks:
its sources, a build of it, and a workload for it.

The sources are the amalgamation (sqlite3.c, shell.c) that npm's `sqlite3`
package bundles as deps/sqlite-autoconf-*.tar.gz: npm fetches the pinned
package once (`npm pack`, which runs none of its scripts), its digest is
checked, and the amalgamation is unpacked into
NPM_CACHE/sqlite3-VERSION/, keyed by the version, outside the clone.
Only sources are cached: a build made with the plugin under test is made
afresh by whoever needs it.

    from sqlite import sqlite_sources, build_shells, workload
"""
import base64
import concurrent.futures
import functools
import hashlib
import os
import pathlib
import shutil
import subprocess
import tarfile
import tempfile

from browser import NPM_CACHE

# npm's `sqlite3`, pinned with its registry digest: a new SQLite is a
# deliberate change here, and what the tests count depends on it.
SQLITE3_NPM_VERSION = "6.0.1"
SQLITE3_NPM_INTEGRITY = ("sha512-X0czUUMG2tmSqJpEQa3tCuZSHKIx8PwM53vLZzKp/o6Rpy25fiVfjdbnZ988M8"
                         "+O3ZWR1ih0K255VumCb3MAnQ==")
# As sqlite.org's "How To Compile SQLite" builds the shell: both files, no
# options, and the libraries the amalgamation calls into.
LIBS = ["-lpthread", "-ldl", "-lm"]


def _unpack_amalgamation(tgz, into):
    """deps/sqlite-autoconf-*.tar.gz of the npm tarball TGZ, unpacked into
    INTO; the folder that holds sqlite3.c."""
    with tarfile.open(tgz) as npm:
        [inner] = [m for m in npm.getmembers()
                   if m.name.startswith("package/deps/sqlite-autoconf-")
                   and m.name.endswith(".tar.gz")]
        with tarfile.open(fileobj=npm.extractfile(inner)) as autoconf:
            autoconf.extractall(into)  # pinned by its digest above
    [tree] = into.glob("sqlite-autoconf-*/sqlite3.c")
    return tree.parent


@functools.lru_cache(maxsize=None)
def sqlite_sources():
    """The folder holding sqlite3.c, sqlite3.h and shell.c (the autoconf
    tree npm's package bundles), fetched and unpacked once into
    NPM_CACHE/sqlite3-VERSION; the unpacking goes into a temporary beside
    it and is renamed, so two workers may ask at once."""
    home = NPM_CACHE / f"sqlite3-{SQLITE3_NPM_VERSION}"
    found = list(home.glob("sqlite-autoconf-*/shell.c"))
    if found:
        return found[0].parent
    npm = shutil.which("npm")
    if not npm:
        raise RuntimeError("npm is missing: run scripts/install-deps.sh")
    NPM_CACHE.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=home.name + ".", dir=NPM_CACHE))
    try:
        subprocess.run([npm, "pack", "--ignore-scripts", "--pack-destination", str(tmp),
                        f"sqlite3@{SQLITE3_NPM_VERSION}"], check=True, capture_output=True,
                       text=True, cwd=tmp)
        tgz = tmp / f"sqlite3-{SQLITE3_NPM_VERSION}.tgz"
        digest = "sha512-" + base64.b64encode(hashlib.sha512(tgz.read_bytes()).digest()).decode()
        if digest != SQLITE3_NPM_INTEGRITY:
            raise RuntimeError(f"{tgz.name}: digest {digest}, pinned {SQLITE3_NPM_INTEGRITY}")
        _unpack_amalgamation(tgz, tmp)
        tgz.unlink()
        os.rename(tmp, home)
    except OSError:
        if not list(home.glob("sqlite-autoconf-*/shell.c")):
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return next(home.glob("sqlite-autoconf-*/shell.c")).parent


def build_shells(out, variants, jobs=2):
    """{name: the sqlite3 shell} for each name: compiler command (a list:
    the compiler and its flags) of VARIANTS, built in OUT/NAME.  Its
    compiles run JOBS at a time, the largest (sqlite3.c, 270,000 lines)
    first; a failure raises with the compiler's output."""
    src = sqlite_sources()
    compiles = []
    for name, cc in variants.items():
        (out / name).mkdir(parents=True, exist_ok=True)
        for unit in ("sqlite3.c", "shell.c"):
            obj = out / name / unit.replace(".c", ".o")
            compiles.append([*cc, "-I", src, "-c", src / unit, "-o", obj])

    def compile_one(cmd):
        p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{p.stderr[-4000:]}")

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(compile_one, sorted(compiles, key=lambda c: c[-3].name == "shell.c")))
    shells = {}
    for name, cc in variants.items():
        exe = out / name / "sqlite3"
        p = subprocess.run([str(c) for c in [*cc, "-o", exe, out / name / "shell.o",
                                             out / name / "sqlite3.o", *LIBS]],
                           capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"linking {exe} failed:\n{p.stderr[-4000:]}")
        shells[name] = exe
    return shells


def _compiler_key(cc):
    """What a build by the compiler command CC depends on besides the
    sources: the command, the compiler's version and its cc1 (by size and
    time, so that an upgrade of the same version is a new key)."""
    version = subprocess.run([cc[0], "--version"], capture_output=True, text=True,
                             check=True).stdout.splitlines()[0]
    cc1 = pathlib.Path(subprocess.run([cc[0], "-print-prog-name=cc1"], capture_output=True,
                                      text=True, check=True).stdout.strip())
    st = cc1.stat() if cc1.is_absolute() and cc1.exists() else None
    what = [*map(str, cc), *LIBS, version, str(cc1), str(st and (st.st_size, st.st_mtime_ns))]
    return hashlib.sha256("\0".join(what).encode()).hexdigest()[:16]


def cached_shell(name, cc):
    """The shell built by the compiler command CC (a list) with no plugin
    of ftpad's, such as the -pg build uftrace records: built once into
    NPM_CACHE/sqlite3-VERSION/builds/NAME-KEY, the key naming the compiler
    and its flags.  A build made with the plugin under test is never
    cached: it is what the tests test."""
    assert not any("ftpad" in str(c) for c in cc), cc
    home = sqlite_sources().parent / "builds" / f"{name}-{_compiler_key(cc)}"
    exe = home / name / "sqlite3"
    if exe.exists():
        return exe
    home.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=home.name + ".", dir=home.parent))
    try:
        build_shells(tmp, {name: cc})
        os.rename(tmp, home)
    except OSError:
        if not exe.exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return exe


def workload(rows):
    """SQL for the shell's standard input: a table of ROWS orders and one
    of ROWS/10 customers filled in one transaction, two indexes, a join
    with aggregates, an update, a delete, and a last aggregate.  Every
    value is computed, nothing is random, so that two runs make the same
    calls; the last line printed is `ROWS*4/5|...`."""
    customers = max(rows // 10, 1)
    return f"""\
CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT, city TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, customer INTEGER, amount REAL, note TEXT);
BEGIN;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {customers})
INSERT INTO customer SELECT i, 'customer' || i, 'city' || (i % 97) FROM c;
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {rows})
INSERT INTO orders SELECT i, 1 + (i * 7919) % {customers}, (i * 31) % 1000 / 10.0,
                          printf('order %d', i) FROM c;
COMMIT;
CREATE INDEX orders_customer ON orders(customer);
CREATE INDEX customer_city ON customer(city);
SELECT city, count(*), sum(amount), avg(amount) FROM orders
  JOIN customer ON customer.id = orders.customer
  GROUP BY city ORDER BY sum(amount) DESC LIMIT 5;
SELECT customer.name, count(*) AS n FROM customer
  JOIN orders ON orders.customer = customer.id
  WHERE customer.city = 'city7' GROUP BY customer.id ORDER BY n DESC, customer.name LIMIT 3;
UPDATE orders SET amount = amount * 1.1 WHERE customer % 3 = 0;
DELETE FROM orders WHERE id % 5 = 0;
SELECT count(*), round(sum(amount), 2), max(amount), min(note) FROM orders;
"""
