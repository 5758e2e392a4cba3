# SPDX-License-Identifier: MIT
"""Build Debian's linux-source-6.12 with and without ftpad, boot it under
QEMU (TCG) with a busybox initramfs, and read the console.

The unpacked tree and every build folder live under /var/cache/ftpad/kbuild
(FTPAD_KCACHE overrides it), outside the clone.  A build folder's name carries
a key: the Debian package version of the source, the config fragment, the make
variables, and the SHA-256 of the plugin binary (copied into the folder, so
the command lines Kbuild compares do not depend on where ftpad was built).  A
changed plugin is a new folder and a full build.  A folder counts as built
only once `make` has succeeded in it (the `.ftpad-built` stamp); an
interrupted or failed build is simply continued by the next run.  Booting is
never cached.

    python3 tests/kbuild/kernel.py build ARCH stock|ftpad|patched [PLUGIN-ARG...]
    python3 tests/kbuild/kernel.py boot ARCH DIR WORKDIR
"""
import fcntl
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CACHE = pathlib.Path(os.environ.get("FTPAD_KCACHE", "/var/cache/ftpad/kbuild"))
TARBALL = pathlib.Path("/usr/src/linux-source-6.12.tar.xz")
SPECS_SH = ROOT / "kbuild" / "ftpad-specs.sh"
JOBS = os.environ.get("FTPAD_KJOBS", "2")

ARCHES = {
    "x86_64": dict(make=["ARCH=x86_64"], image="arch/x86/boot/bzImage",
                   target="bzImage", fragment=HERE / "x86_64.config",
                   qemu="qemu-system-x86_64", qemu_args=["-m", "256"],
                   # no_timer_check: on a loaded host the TCG guest can
                   # miss the IO-APIC timer check and panic
                   console="ttyS0 no_timer_check", cc="gcc", plugin="ftpad.so"),
    "arm64": dict(make=["ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-"],
                  image="arch/arm64/boot/Image", target="Image",
                  fragment=HERE / "arm64.config", qemu="qemu-system-aarch64",
                  qemu_args=["-M", "virt", "-cpu", "max", "-m", "256"],
                  console="ttyAMA0", cc="aarch64-linux-gnu-gcc",
                  plugin="aarch64/ftpad.so"),
}
# tinyconfig's -Os: CALL_OPS needs kbuild/0003 (and ftpad) there.
ARCHES["arm64-Os"] = dict(ARCHES["arm64"], fragment=HERE / "arm64-Os.config")


def log(msg):
    print(f"[kbuild {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def source_version():
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "linux-source-6.12"],
                         capture_output=True, text=True, check=True).stdout.strip()
    return out


def source_tree():
    """The unpacked kernel tree, unpacked once per Debian package version."""
    src = CACHE / f"linux-{source_version()}"
    if (src / "Makefile").exists():
        return src
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="unpack-", dir=CACHE))
    log(f"unpacking {TARBALL} into {src}")
    subprocess.run(["tar", "xf", TARBALL, "-C", tmp], check=True)
    (top,) = list(tmp.iterdir())
    try:
        os.rename(top, src)  # atomic: a half-unpacked tree is never used
    except OSError:
        if not (src / "Makefile").exists():  # else another run was first
            raise
    shutil.rmtree(tmp)
    return src


def patches():
    series = ROOT / "kbuild" / "series"
    return [ROOT / "kbuild" / ln.strip() for ln in series.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def patched_tree():
    """A copy of the tree (hard links) with kbuild/series applied; patch(1)
    writes each file it changes anew, so the pristine tree is untouched."""
    src = source_tree()
    h = hashlib.sha256("".join(sha256(p) for p in patches()).encode()).hexdigest()[:16]
    dst = CACHE / f"linux-{source_version()}-ftpad-{h}"
    if (dst / "scripts" / "Makefile.ftpad").exists():
        return dst
    tmp = CACHE / f"tmp-patch-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(["cp", "-al", src, tmp], check=True)
    for p in patches():
        with open(p) as f:
            subprocess.run(["patch", "-p1", "-s", "-d", tmp], stdin=f, check=True)
    try:
        os.rename(tmp, dst)
    except OSError:
        if not (dst / "scripts" / "Makefile.ftpad").exists():  # else another run was first
            raise
        shutil.rmtree(tmp)
    return dst


def build_dir(arch, variant, plugin=None, plugin_args=(), patched=False):
    """Where (arch, variant) is built, and the text its key was made from."""
    a = ARCHES[arch]
    key = [f"linux={source_version()}", f"arch={arch}", f"variant={variant}",
           f"fragment={sha256(a['fragment'])}", f"gcc={gcc_version(arch)}"]
    if patched:
        key += [f"patch={sha256(p)}" for p in patches()]
    if plugin is not None:
        key += [f"plugin={sha256(plugin)}", f"specs-sh={sha256(SPECS_SH)}",
                "args=" + " ".join(plugin_args)]
    text = "\n".join(key) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return CACHE / "build" / f"{arch}-{variant}-{digest}", text


def gcc_version(arch):
    return subprocess.run([ARCHES[arch]["cc"], "--version"], capture_output=True, text=True,
                          check=True).stdout.splitlines()[0]


def make_vars(arch, out, plugin_args):
    """The make variables that put ftpad in place of the compiler's own
    ftrace flags, with no kernel patch (docs/kbuild.md)."""
    if arch == "x86_64":
        return ["CC_FLAGS_FTRACE=-pg",
                "CC_FLAGS_USING=-DCC_USING_FENTRY -DCC_USING_NOP_MCOUNT",
                f"KCFLAGS=-specs={out}/ftpad-kernel.specs"]
    # arm64 never had -pg: its Makefile sets CC_FLAGS_FTRACE to
    # -fpatchable-function-entry=4,2 and every object that turns tracing off
    # removes $(CC_FLAGS_FTRACE), so the plugin can simply take its place.
    return ["CC_FLAGS_FTRACE=" + " ".join(
        [f"-fplugin={out}/ftpad.so", "-fplugin-arg-ftpad-abi=kernel"]
        + [f"-fplugin-arg-ftpad-{a}" for a in plugin_args])]


def build(arch, variant, plugin=None, plugin_args=(), patched=False, config_only=False):
    """Configure and build; return the build folder.  Cached, see above.
    Without `patched`, the plugin comes in through make variables and a specs
    file (no patch); with it, through kbuild/series and CONFIG_FTPAD.  Two
    runs that want the same folder take turns (a lock file beside it)."""
    out, _ = build_dir(arch, variant, plugin, plugin_args, patched)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{out}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(arch, variant, plugin, plugin_args, patched, config_only)


def _build(arch, variant, plugin, plugin_args, patched, config_only):
    a = ARCHES[arch]
    src = patched_tree() if patched else source_tree()
    out, keytext = build_dir(arch, variant, plugin, plugin_args, patched)
    stamp = out / ".ftpad-built"
    if stamp.exists() and (out / a["image"]).exists():
        log(f"{out}: cached")
        return out
    if config_only and (out / ".config").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    (out / ".ftpad-key").write_text(keytext)
    extra = list(a["make"])
    fragment = a["fragment"]
    if plugin is not None:
        shutil.copyfile(plugin, out / "ftpad.so")
    if plugin is not None and not patched:
        if arch == "x86_64":
            with open(out / "ftpad-kernel.specs", "w") as f:
                subprocess.run([SPECS_SH, a["cc"], out / "ftpad.so", *plugin_args],
                               stdout=f, check=True)
        extra += make_vars(arch, out, plugin_args)
    if patched:
        fragment = out / "ftpad-fragment.config"
        fragment.write_text(a["fragment"].read_text() + "CONFIG_FTPAD=y\n"
                            f'CONFIG_FTPAD_PLUGIN="{out}/ftpad.so"\n'
                            f'CONFIG_FTPAD_ARGS="{" ".join(plugin_args)}"\n')
    t0 = time.time()
    if not (out / ".config").exists():
        log(f"{out}: tinyconfig + {fragment.name}")
        subprocess.run([HERE / "config-kernel.sh", src, out, fragment, *a["make"]],
                       check=True)
    if config_only:
        return out
    log(f"{out}: make -j{JOBS} {a['target']}")
    with open(out / "ftpad-build.log", "w") as logf:
        p = subprocess.run(["make", "-C", src, f"O={out}", f"-j{JOBS}", *extra,
                            a["target"]], stdout=logf, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        tail = (out / "ftpad-build.log").read_text(errors="replace")[-4000:]
        raise RuntimeError(f"kernel build failed in {out}:\n{tail}")
    (out / ".ftpad-build-seconds").write_text(f"{time.time() - t0:.0f}\n")
    stamp.write_text("ok\n")
    log(f"{out}: built in {time.time() - t0:.0f} s")
    return out


INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
T=/sys/kernel/tracing
echo "E2E: init reached"
echo "E2E: available_tracers: $(cat $T/available_tracers)"
echo "E2E: available_filter_functions: $(wc -l < $T/available_filter_functions)"
echo vfs_read > $T/set_ftrace_filter
echo schedule >> $T/set_ftrace_filter
echo "E2E: set_ftrace_filter: $(cat $T/set_ftrace_filter | tr '\n' ' ')"
echo function > $T/current_tracer
echo "E2E: current_tracer: $(cat $T/current_tracer)"
for i in 1 2 3; do
	read -r L < /proc/version
	sleep 1
done
echo 0 > $T/tracing_on
head -n 30 $T/trace
R=$(grep -c ' vfs_read <-' $T/trace)
S=$(grep -c ' schedule <-' $T/trace)
echo "E2E: vfs_read hits=$R schedule hits=$S"
if [ "$R" -gt 0 ] && [ "$S" -gt 0 ]; then echo "E2E: FTRACE-RESULT PASS"; else echo "E2E: FTRACE-RESULT FAIL"; fi
reboot -f
"""


def initramfs(arch, workdir):
    """An initramfs whose /init exercises the function tracer: busybox-static
    on x86_64, tests/kbuild/init.c (static) on arm64."""
    root = workdir / "root"
    for d in ("bin", "proc", "sys", "dev"):
        (root / d).mkdir(parents=True, exist_ok=True)
    if arch == "x86_64":
        shutil.copy("/bin/busybox", root / "bin" / "busybox")
        (root / "init").write_text(INIT)
    else:
        subprocess.run([ARCHES[arch]["cc"], "-static", "-O2", "-Wall", "-Werror",
                        "-o", root / "init", HERE / "init.c"], check=True)
    (root / "init").chmod(0o755)
    cpio = workdir / "initramfs.cpio.gz"
    subprocess.run(f"cd {root} && find . -print0 | cpio --null -o -H newc --quiet | gzip -1 > {cpio}",
                   shell=True, check=True)
    return cpio


def boot(arch, out, workdir, timeout=400):
    """Boot the image under TCG; return (console text, seconds)."""
    a = ARCHES[arch]
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    cpio = initramfs(arch, workdir)
    cmd = [a["qemu"], "-accel", "tcg", "-nographic", "-no-reboot", *a["qemu_args"],
           "-kernel", out / a["image"], "-initrd", cpio,
           "-append", f"console={a['console']} panic=-1 printk.time=1"]
    t0 = time.time()
    try:
        p = subprocess.run([str(c) for c in cmd], capture_output=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        text = p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")
        text += f"\nQEMU-EXIT: {p.returncode}\n"
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace") + "\nQEMU-EXIT: timeout\n"
    (workdir / "console.log").write_text(text)
    return text, time.time() - t0


SELFTESTS = [
    "Testing tracer function: PASSED",
    "Testing dynamic ftrace: PASSED",
    "Testing dynamic ftrace ops #1: ",
    "Testing dynamic ftrace ops #2: ",
    "Testing ftrace recursion: PASSED",
    "Testing ftrace recursion safe: PASSED",
    "Testing ftrace regs",
    "Testing tracer nop: PASSED",
    "Testing tracer function_graph: PASSED",
]
BAD = ["FAILED", "ftrace bug", "ftrace failed", "WARNING:", "Kernel panic", "BUG:",
       "Oops"]


def check_console(text):
    """Fail on a boot that did not reach /init, on any self-test that did not
    print PASSED, and on any kernel warning."""
    assert "E2E: init reached" in text, text[-3000:]
    lines = [ln.rstrip() for ln in text.splitlines()]

    def verdict(i):
        # The result may come on a later line when other messages cut in
        # before pr_cont ("Testing dynamic ftrace ops #1: " ... "(3 3 5 0 n) PASSED").
        for ln in lines[i:i + 20]:
            if ln.endswith(("PASSED", "FAILED")):
                return ln
        return None

    for want in SELFTESTS:
        at = [i for i, ln in enumerate(lines) if want.rstrip() in ln]
        assert at, f"self-test line {want!r} missing:\n{text[-3000:]}"
        for i in at:
            assert (verdict(i) or "").endswith("PASSED"), lines[i:i + 20]
    for i, ln in enumerate(lines):
        # ("Testing ftrace filter: OK" is an event test, not a tracer's)
        if re.search(r"Testing (tracer |dynamic |ftrace (recursion|regs)|fgraph |multiple fgraph)", ln):
            assert (verdict(i) or "").endswith("PASSED"), lines[i:i + 20]
    for bad in BAD:
        assert bad not in text, [ln for ln in text.splitlines() if bad in ln]
    assert "E2E: FTRACE-RESULT PASS" in text, text[-3000:]
    assert "QEMU-EXIT: 0" in text, text[-500:]


def entries(console):
    m = re.search(r"ftrace: allocating (\d+) entries", console)
    return int(m.group(1)) if m else None


if __name__ == "__main__":
    if sys.argv[1] == "build":
        arch, variant = sys.argv[2], sys.argv[3]
        plugin = None
        if variant != "stock":
            plugin = os.path.join(os.environ.get("FTPAD_BUILD", ROOT / "build"),
                                  "gcc-plugin", ARCHES[arch]["plugin"])
        print(build(arch, variant, plugin, sys.argv[4:], patched=variant.startswith("patched")))
    elif sys.argv[1] == "boot":
        text, secs = boot(sys.argv[2], pathlib.Path(sys.argv[3]), sys.argv[4])
        print(text)
        print(f"boot took {secs:.0f} s", file=sys.stderr)
