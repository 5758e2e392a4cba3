# SPDX-License-Identifier: MIT
"""Build Debian's linux-source-6.12 with and without ftpad, boot it under
QEMU (TCG) with a busybox initramfs, and read the console.

The unpacked tree and every build folder live under /var/cache/ftpad/kbuild
(FTPAD_KCACHE overrides it), outside the clone.  A build folder's name carries
a key: the Debian package version of the source, the config fragment, GCC's
version and, where they apply, the SHA-256 of the plugin binary and its
arguments (the plugin is copied into the folder, so the command lines Kbuild
compares do not depend on where ftpad was built), of each patch of
kbuild/series, and of recordmcount-keep.sh with its make variables.  A
changed plugin is a new folder and a full build.  A folder counts as built
only once `make` has succeeded in it (the `.ftpad-built` stamp); an
interrupted or failed build is simply continued by the next run.  Booting is
never cached.

Three options change a build and so its key:
- `report=True` adds the plugin's `report=FILE` (FILE is ftpad-report.jsonl
  in the folder): one JSON line per function the plugin saw, with its
  decision, section and instruction count.
- `rmc=True` makes tests/kbuild/recordmcount-keep.sh the recordmcount
  program, so every object Kbuild hands to recordmcount is also kept, as the
  compiler wrote it, under ftpad-premcount/.  Without a patch the script
  replaces scripts/recordmcount once `make scripts` built it (the reference
  moves to scripts/recordmcount.ref); with `patched`, kbuild/0005's
  CONFIG_FTPAD_RECORDMCOUNT names it.  On x86_64 the make variables
  RMC_X86_VARS also force Kbuild to use recordmcount instead of gcc's
  -mrecord-mcount.  The build's objects are what Linux's recordmcount makes
  of them: recordmcount-ng is never part of a cached build; the tests run it
  on the kept objects each time.
- `early=True` (with `patched`) sets CONFIG_FTPAD_EARLY_TRACE (kbuild/0006);
  without_early() then makes the same kernel without it, from a copy of the
  folder, for the tests that compare the two.

    python3 tests/kbuild/kernel.py build ARCH stock|rmc|ftpad|patched [PLUGIN-ARG...]
    python3 tests/kbuild/kernel.py boot ARCH DIR WORKDIR
"""
import fcntl
import hashlib
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# FTPAD_CACHE moves every cache of the tests (make check cold: an empty one).
CACHE_ROOT = pathlib.Path(os.environ.get("FTPAD_CACHE", "/var/cache/ftpad"))
CACHE = pathlib.Path(os.environ.get("FTPAD_KCACHE", CACHE_ROOT / "kbuild"))
TARBALL = pathlib.Path("/usr/src/linux-source-6.12.tar.xz")
SPECS_SH = ROOT / "kbuild" / "ftpad-specs.sh"
KEEP_SH = HERE / "recordmcount-keep.sh"
# Make variables that turn x86_64's gcc -mrecord-mcount off and Kbuild's
# recordmcount on (docs/kbuild.md): a command-line variable overrides the
# value include/config/auto.conf gives it, in every sub-make.  No C code reads
# either option; Kconfig still chose FTRACE_MCOUNT_USE_CC, so autoconf.h and
# the code are those of the stock build.
RMC_X86_VARS = ["CONFIG_FTRACE_MCOUNT_USE_CC=", "CONFIG_FTRACE_MCOUNT_USE_RECORDMCOUNT=y"]
REPORT = "ftpad-report.jsonl"
EARLY_OPTION = "CONFIG_FTPAD_EARLY_TRACE=y"
KEEP_PROG = "ftpad-recordmcount"
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
# malta, 32-bit big-endian; QEMU loads the ELF vmlinux itself.
ARCHES["mips"] = dict(make=["ARCH=mips", "CROSS_COMPILE=mips-linux-gnu-"],
                      image="vmlinux", target="vmlinux", fragment=HERE / "mips.config",
                      qemu="qemu-system-mips", qemu_args=["-M", "malta", "-m", "256"],
                      console="ttyS0", cc="mips-linux-gnu-gcc", plugin=None)
# clang-built kernels (docs/kbuild.md "Kernels built with clang"): Kbuild's
# LLVM=-14 (clang-14, ld.lld-14, llvm-*-14); `llvm` is the compiler whose
# version goes into the key, `cc` stays the GCC that builds /init.
LLVM = "-14"
for _arch in ("x86_64", "arm64"):
    ARCHES[f"{_arch}-clang"] = dict(ARCHES[_arch], make=[f"ARCH={_arch}", f"LLVM={LLVM}"],
                                    llvm=f"clang{LLVM}", plugin="clang-pass/ftpad-clang.so")


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
    # resolve(): `cp -a` copies a symbolic link as a link, and patch(1)
    # would then write through it into the pristine tree.
    src = source_tree().resolve()
    h = hashlib.sha256("".join(sha256(p) for p in patches()).encode()).hexdigest()[:16]
    dst = CACHE / f"linux-{source_version()}-ftpad-{h}"
    if (dst / "scripts" / "Makefile.ftpad").exists():
        return dst
    tmp = CACHE / f"tmp-patch-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(["cp", "-al", src, tmp], check=True)
    if tmp.is_symlink() or not (tmp / "Makefile").is_file():
        raise RuntimeError(f"{tmp}: not a copy of {src}")
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


def build_dir(arch, variant, plugin=None, plugin_args=(), patched=False, report=False,
              rmc=False, early=False):
    """Where (arch, variant) is built, and the text its key was made from."""
    a = ARCHES[arch]
    key = [f"linux={source_version()}", f"arch={arch}", f"variant={variant}",
           f"fragment={sha256(a['fragment'])}", f"gcc={gcc_version(arch)}"]
    if a.get("llvm"):
        key += [f"clang={version_line(a['llvm'])}"]
    if patched:
        key += [f"patch={sha256(p)}" for p in patches()]
    if plugin is not None:
        key += [f"plugin={sha256(plugin)}", f"specs-sh={sha256(SPECS_SH)}",
                "args=" + " ".join(plugin_args)]
    if report:
        key += [f"report={REPORT}"]
    if rmc:
        key += [f"keep-sh={sha256(KEEP_SH)}", "make=" + " ".join(rmc_vars(arch))]
    if early:
        key += [EARLY_OPTION]
    text = "\n".join(key) + "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return CACHE / "build" / f"{arch}-{variant}-{digest}", text


def gcc_version(arch):
    return version_line(ARCHES[arch]["cc"])


def version_line(cc):
    """The first line of `cc --version`, as the build keys hold it."""
    return subprocess.run([cc, "--version"], capture_output=True, text=True,
                          check=True).stdout.splitlines()[0]


def rmc_vars(arch):
    return RMC_X86_VARS if arch == "x86_64" else []


def make_vars(arch, out, plugin_args):
    """The make variables that put ftpad in place of the compiler's own
    ftrace flags, with no kernel patch (docs/kbuild.md)."""
    if ARCHES[arch].get("llvm"):
        return clang_make_vars(arch, out, plugin_args)
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


def clang_make_vars(arch, out, plugin_args):
    """make_vars() for LLVM=-14 (docs/kbuild.md "Kernels built with clang").
    x86_64: Kbuild's -pg -mfentry stay, the plugin is loaded into every C
    compile and with clang-pg=1 pads exactly what -pg marks, in its place;
    objtool keeps its other jobs but no longer writes __mcount_loc (the
    plugin does; no C code reads the option).  arm64: as with GCC.  The
    dynamic ftrace self-tests' one-line targets keep their site under
    min-insns, as kbuild/0004 does for the patch series."""
    args = ["-fplugin-arg-ftpad-abi=kernel"] + [f"-fplugin-arg-ftpad-{a}" for a in plugin_args]
    selftest = "CFLAGS_trace_selftest_dynamic.o=$(CC_FLAGS_FTRACE) -fplugin-arg-ftpad-min-insns=0"
    if arch == "x86_64-clang":
        return ["CONFIG_FTRACE_MCOUNT_USE_OBJTOOL=",
                "CC_FLAGS_USING=-DCC_USING_FENTRY -DCC_USING_NOP_MCOUNT",
                "KCFLAGS=" + " ".join([f"-fplugin={out}/ftpad.so", *args,
                                       "-fplugin-arg-ftpad-clang-pg=1"]),
                selftest]
    return ["CC_FLAGS_FTRACE=" + " ".join([f"-fplugin={out}/ftpad.so", *args]), selftest]


def build(arch, variant, plugin=None, plugin_args=(), patched=False, config_only=False,
          report=False, rmc=False, early=False):
    """Configure and build; return the build folder.  Cached, see above.
    Without `patched`, the plugin comes in through make variables and a specs
    file (no patch); with it, through kbuild/series and CONFIG_FTPAD.  Two
    runs that want the same folder take turns (a lock file beside it)."""
    out, _ = build_dir(arch, variant, plugin, plugin_args, patched, report, rmc, early)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{out}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(arch, variant, plugin, plugin_args, patched, config_only, report, rmc,
                      early)


def rmc_build(arch):
    """The build whose recordmcount step keeps its objects (`rmc`), shared by
    the tests and bench/recordmcount.py: x86_64 with recordmcount forced and
    no kernel patch (a build of its own: the stock one uses -mrecord-mcount),
    mips through the patch series (kbuild/0005 names the program; nothing
    else in the series applies to mips)."""
    return build(arch, "rmc", patched=arch != "x86_64", rmc=True)


def stock_build(arch):
    """The stock build every test of `arch` shares.  mips always runs
    recordmcount, and its recordmcount build is the stock one."""
    return rmc_build(arch) if arch == "mips" else build(arch, "stock")


def make_log(src, out, args, what):
    """Run make in `out`, its output appended to ftpad-build.log."""
    with open(out / "ftpad-build.log", "a") as logf:
        p = subprocess.run(["make", "-C", src, f"O={out}", f"-j{JOBS}", *args],
                           stdout=logf, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        tail = (out / "ftpad-build.log").read_text(errors="replace")[-4000:]
        raise RuntimeError(f"kernel {what} failed in {out}:\n{tail}")


def install_keep_wrapper(src, out, extra):
    """scripts/recordmcount becomes recordmcount-keep.sh, Linux's own one
    scripts/recordmcount.ref.  Kbuild builds the binary in `make scripts` and
    then leaves it alone (its objects depend on recordmcount.c, not on the
    binary), so a wrapper put there afterwards stays in place."""
    scripts = out / "scripts"
    ref = scripts / "recordmcount.ref"
    if not ref.exists():
        make_log(src, out, [*extra, "scripts"], "make scripts")
        if not (scripts / "recordmcount").exists():
            raise RuntimeError(f"{out}: make scripts built no scripts/recordmcount")
        os.rename(scripts / "recordmcount", ref)
    tmp = scripts / "recordmcount.tmp"
    shutil.copyfile(KEEP_SH, tmp)
    tmp.chmod(0o755)
    os.rename(tmp, scripts / "recordmcount")


def _build(arch, variant, plugin, plugin_args, patched, config_only, report, rmc, early):
    a = ARCHES[arch]
    src = patched_tree() if patched else source_tree()
    out, keytext = build_dir(arch, variant, plugin, plugin_args, patched, report, rmc, early)
    stamp = out / ".ftpad-built"
    if stamp.exists() and (out / a["image"]).exists():
        log(f"{out}: cached")
        return out
    if config_only and (out / ".config").exists():
        return out
    if report and out.exists() and not config_only:
        # An interrupted build would append some functions to the report twice.
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / ".ftpad-key").write_text(keytext)
    extra = list(a["make"])
    fragment = a["fragment"]
    if report:
        plugin_args = [*plugin_args, f"report={out}/{REPORT}"]
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
        text = a["fragment"].read_text()
        if plugin is not None:
            text += ("CONFIG_FTPAD=y\n" f'CONFIG_FTPAD_PLUGIN="{out}/ftpad.so"\n'
                     f'CONFIG_FTPAD_ARGS="{" ".join(plugin_args)}"\n')
        if rmc:
            # kbuild/0005: Kbuild runs this program instead of
            # scripts/recordmcount (relative to the build folder, so that a
            # copy of the folder runs its own).
            # (Objects depend on it: copied once, or a resumed build would
            # compile them all again.)
            text += f'CONFIG_FTPAD_RECORDMCOUNT="{KEEP_PROG}"\n'
            if not (out / KEEP_PROG).exists():
                shutil.copyfile(KEEP_SH, out / f"{KEEP_PROG}.tmp")
                (out / f"{KEEP_PROG}.tmp").chmod(0o755)
                os.rename(out / f"{KEEP_PROG}.tmp", out / KEEP_PROG)
        if early:
            text += EARLY_OPTION + "\n"
        fragment.write_text(text)
    if rmc:
        extra += rmc_vars(arch)
    t0 = time.time()
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0 = cpu0.ru_utime + cpu0.ru_stime
    if not (out / ".config").exists():
        log(f"{out}: tinyconfig + {fragment.name}")
        subprocess.run([HERE / "config-kernel.sh", src, out, fragment, *a["make"]],
                       check=True)
    if config_only:
        return out
    if rmc and not patched:
        install_keep_wrapper(src, out, extra)
    log(f"{out}: make -j{JOBS} {a['target']}")
    make_log(src, out, [*extra, a["target"]], "build")
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = cpu.ru_utime + cpu.ru_stime - cpu0
    # wall seconds, then CPU seconds of everything make ran (the wall time
    # depends on what else the host runs; the CPU time much less)
    (out / ".ftpad-build-seconds").write_text(f"{time.time() - t0:.0f} {cpu:.0f}\n")
    stamp.write_text("ok\n")
    log(f"{out}: built in {time.time() - t0:.0f} s ({cpu:.0f} CPU-s)")
    return out


def without_early(arch, out):
    """The kernel of build folder `out` (built with `early`) without
    CONFIG_FTPAD_EARLY_TRACE: a copy of the folder, the option turned off and
    make run again, so that only what reads the option is compiled anew.
    Cached beside `out`."""
    a = ARCHES[arch]
    dest = out.parent / f"{out.name}-without-early"
    with open(f"{dest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / ".ftpad-built").exists() and (dest / a["image"]).exists():
            log(f"{dest}: cached")
            return dest
        shutil.rmtree(dest, ignore_errors=True)
        subprocess.run(["cp", "-a", out, dest], check=True)
        (dest / ".ftpad-built").unlink()
        src = (dest / "source").resolve()
        subprocess.run([src / "scripts" / "config", "--file", dest / ".config",
                        "-d", "FTPAD_EARLY_TRACE"], check=True)
        make_log(src, dest, [*a["make"], "olddefconfig"], "olddefconfig")
        log(f"{dest}: make -j{JOBS} {a['target']}")
        make_log(src, dest, [*a["make"], a["target"]], "build without the early tracer")
        (dest / ".ftpad-built").write_text("ok\n")
        return dest


def relink(arch, dest):
    """Run make again in `dest`, a copy of a finished build folder whose
    objects were changed after the build (recordmcount-ng's output in place of
    Linux's recordmcount's): the archives and vmlinux are made anew from them.
    Returns make's output; the caller checks that nothing was recompiled."""
    a = ARCHES[arch]
    # The tree the folder was built from, patched or not (Kbuild's link).
    src = (pathlib.Path(dest) / "source").resolve()
    p = subprocess.run(["make", "-C", src, f"O={dest}", f"-j{JOBS}", *a["make"],
                        a["target"]], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"relink failed in {dest}:\n{(p.stdout + p.stderr)[-4000:]}")
    return p.stdout + p.stderr


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
if [ -d $T/instances/ftpad_early ]; then
	echo "E2E-EARLY-BEGIN"
	cat $T/instances/ftpad_early/trace
	echo "E2E-EARLY-END"
fi
if [ "$R" -gt 0 ] && [ "$S" -gt 0 ]; then echo "E2E: FTRACE-RESULT PASS"; else echo "E2E: FTRACE-RESULT FAIL"; fi
reboot -f
"""


def initramfs(arch, workdir):
    """An initramfs whose /init exercises the function tracer: busybox-static
    on x86_64, tests/kbuild/init.c (static) on arm64 and mips."""
    root = workdir / "root"
    for d in ("bin", "proc", "sys", "dev"):
        (root / d).mkdir(parents=True, exist_ok=True)
    if arch.split("-")[0] == "x86_64":  # x86_64-clang too: init.c's power-off halts there
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


def boot(arch, out, workdir, timeout=400, append="", qemu_extra=(), cpio=None):
    """Boot the image under TCG, with `append` added to the kernel command
    line and `qemu_extra` to QEMU's; return (console text, seconds).  The
    initramfs is initramfs()'s unless `cpio` names another."""
    a = ARCHES[arch]
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    cpio = cpio or initramfs(arch, workdir)
    cmd = [a["qemu"], "-accel", "tcg", "-nographic", "-no-reboot", *a["qemu_args"], *qemu_extra,
           "-kernel", out / a["image"], "-initrd", cpio,
           "-append", f"console={a['console']} panic=-1 printk.time=1 {append}".rstrip()]
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


# Each must be there and end in PASSED (check_console).
SELFTESTS = [
    "Testing tracer function:",
    "Testing dynamic ftrace:",
    "Testing dynamic ftrace ops #1:",
    "Testing dynamic ftrace ops #2:",
    "Testing ftrace recursion:",
    "Testing ftrace recursion safe:",
    "Testing ftrace regs",
    "Testing tracer nop:",
    "Testing tracer function_graph:",
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
        # before pr_cont ("Testing dynamic ftrace ops #1: " ... "(3 3 5 0 n) PASSED"),
        # but before the next test starts.
        if lines[i].endswith(("PASSED", "FAILED")):
            return lines[i]
        for ln in lines[i + 1:i + 30]:
            if "Testing " in ln:
                return None
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
        if variant not in ("stock", "rmc"):
            plugin = os.path.join(os.environ.get("FTPAD_BUILD", ROOT / "build"),
                                  "" if ARCHES[arch].get("llvm") else "gcc-plugin",
                                  ARCHES[arch]["plugin"])
        if variant == "stock":
            print(stock_build(arch))
        elif variant == "rmc":
            print(rmc_build(arch))
        else:
            print(build(arch, variant, plugin, sys.argv[4:], patched=variant.startswith("patched")))
    elif sys.argv[1] == "boot":
        text, secs = boot(sys.argv[2], pathlib.Path(sys.argv[3]), sys.argv[4])
        print(text)
        print(f"boot took {secs:.0f} s", file=sys.stderr)
