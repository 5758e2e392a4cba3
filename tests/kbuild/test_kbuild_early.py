# SPDX-License-Identifier: MIT
"""Very early function tracing (kbuild/0006, CONFIG_FTPAD_EARLY_TRACE) on
x86_64 and arm64, booted under QEMU TCG.

The kernels: x86_64 through the patch series with the early tracer (a build
of its own), and the arm64 -Os build of test_kbuild_patches.py, which has
the early tracer on.  Each is also built without the option (a copy of its
folder, kernel.without_early) for the comparisons that the option must not
change anything unless ftpad_early= is on the command line.

Each arch boots four times: the chosen functions; the same with a notrace
glob; no parameter; the kernel without the option."""
import collections
import functools
import pathlib
import re
import subprocess

import pytest

import ftpadtest  # noqa: E402
import kernel  # noqa: E402
import vmlinux  # noqa: E402
from conftest import require_kernel_tools, require_tool  # noqa: E402

# setup_arch() and mm_core_init() run once, from start_kernel(), after the
# early tracer starts and before ftrace_init(); the memblock allocator's
# functions run between them and only while the kernel boots.
CHOSEN = "setup_arch,mm_core_init,memblock_*"
NOTRACE = "memblock_add*"
# (arch, plugin, build variant, cross compiler)
ARCHES = {
    "x86_64": (ftpadtest.PLUGIN, "early", "gcc"),
    "arm64-Os": (ftpadtest.A64_PLUGIN, "patched", "aarch64-linux-gnu-gcc"),
}
EVENT = re.compile(r"^\s*(\S+)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+(\d+)\.(\d+): (\S+) <-(\S+)$")
SUMMARY = re.compile(r": ftpad_early: (\d+) events, (\d+) lost \(the buffer holds (\d+)\)(.*)$")


@functools.lru_cache(maxsize=None)
def host_tsc_khz():
    """tests/kbuild/tsc_khz.c's measure of this host's TSC."""
    exe = pathlib.Path(kernel.CACHE) / "tsc_khz"
    exe.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-O2", "-o", exe, kernel.HERE / "tsc_khz.c"], check=True)
    return int(subprocess.run([exe], capture_output=True, text=True, check=True).stdout)


def boot_args(arch, early_args):
    """The command line for a boot with the early tracer: on x86_64 with
    tsc_early_khz=, since nothing in the guest can calibrate its TSC."""
    if arch == "x86_64":
        return f"{early_args} tsc_early_khz={host_tsc_khz()}"
    return early_args


def early_build(arch):
    plugin, variant, cc = ARCHES[arch]
    require_kernel_tools("patch", cc)
    if not plugin.exists():
        pytest.fail(f"{plugin} is missing: run `make` first")
    return kernel.build(arch, variant, plugin, patched=True, early=True)


@pytest.fixture(scope="module", params=list(ARCHES))
def arch(request):
    return request.param


@pytest.fixture(scope="module")
def builds(arch):
    """(kernel with the early tracer, the same kernel without it)"""
    early = early_build(arch)
    return early, kernel.without_early(arch, early)


class Boots:
    """The boots of one arch, each run once, when a test first asks."""

    def __init__(self, arch, builds, tmp):
        self.arch, self.builds, self.tmp = arch, builds, tmp
        self.done = {}

    def __call__(self, name, append="", without_option=False):
        if name not in self.done:
            require_tool(kernel.ARCHES[self.arch]["qemu"])
            out = self.builds[1] if without_option else self.builds[0]
            text, secs = kernel.boot(self.arch, out, self.tmp / name, append=append)
            print(f"{self.arch} {name}: {secs:.0f} s")
            self.done[name] = text
        return self.done[name]

    def chosen(self):
        return self("chosen", boot_args(self.arch, f"ftpad_early={CHOSEN}"))

    def notrace(self):
        return self("notrace", boot_args(
            self.arch, f"ftpad_early={CHOSEN} ftpad_early_notrace={NOTRACE}"))


@pytest.fixture(scope="module")
def boots(arch, builds, tmp_path_factory):
    return Boots(arch, builds, tmp_path_factory.mktemp(f"early-{arch}"))


def early_trace(console):
    """[(seconds, function, parent)] of the ftpad_early instance's trace,
    and its summary line's (events, lost, capacity)."""
    assert "E2E-EARLY-BEGIN" in console, console[-3000:]
    body = console.split("E2E-EARLY-BEGIN", 1)[1].split("E2E-EARLY-END", 1)[0]
    events, summary = [], None
    for line in body.splitlines():
        line = line.rstrip("\r")
        m = EVENT.match(line)
        if m:
            events.append((int(m.group(5)) + int(m.group(6)) / 1e6, m.group(7), m.group(8)))
        elif SUMMARY.search(line):
            m = SUMMARY.search(line)
            assert not m.group(4), line  # times in ns, not in counter ticks
            summary = tuple(int(g) for g in m.groups()[:3])
    assert summary, body[-2000:]
    return events, summary


def names(events):
    return collections.Counter(name for _, name, _ in events)


def test_chosen_functions_traced_in_order(arch, boots):
    """setup_arch (x86_64), then what it calls of memblock, then
    mm_core_init: each called from where it is, with times that never go
    back; nothing else."""
    console = boots.chosen()
    kernel.check_console(console)
    events, (recorded, lost, capacity) = early_trace(console)
    assert lost == 0 and recorded == len(events) > 3, (recorded, lost)
    order = [name for _, name, _ in events]
    parents = {name: parent for _, name, parent in events}
    if arch == "x86_64":  # the tracer starts in start_kernel(), before setup_arch()
        assert order[0] == "setup_arch" and order.count("setup_arch") == 1, order[:5]
        assert parents["setup_arch"] == "start_kernel"
    else:  # arm64 starts inside setup_arch(), once it has read the device tree
        assert "setup_arch" not in order and order[0].startswith("memblock_"), order[:5]
    assert order.count("mm_core_init") == 1, order
    assert all(re.fullmatch(r"setup_arch|mm_core_init|memblock_[\w.]+", n) for n in order), \
        set(order)
    assert {"memblock_add", "memblock_reserve"} <= set(order), set(order)
    assert parents["mm_core_init"] == "start_kernel"
    assert order.index("mm_core_init") > order.index("memblock_reserve")
    times = [t for t, _, _ in events]
    assert times == sorted(times) and times[-1] > times[0] > 0, times[:3]
    # Handed back: ftrace took every site as a NOP.
    assert re.search(r"ftpad_early: \d+ sites patched \(3 globs, 0 notrace globs\)", console)
    assert "ftpad_early_copy: ftpad_early:" in console  # the summary in the trace
    assert re.search(rf"ftpad_early: {recorded} events, 0 lost, in \d+ us; \d+ sites back to NOPs",
                     console)


def test_notrace_removes_exactly_its_functions(boots):
    """The same boot with ftpad_early_notrace=memblock_add*: exactly the
    functions the glob matches are gone.  (Sets, not counts: the longer
    command line moves memory around, and memblock_free_pages() then runs
    once more or less.)"""
    chosen, _ = early_trace(boots.chosen())
    console = boots.notrace()
    kernel.check_console(console)
    without, _ = early_trace(console)
    removed = {n for n in names(chosen) if re.fullmatch(r"memblock_add[\w.]*", n)}
    assert "memblock_add" in removed, names(chosen)
    assert set(names(without)) == set(names(chosen)) - removed


# Lines that two boots of one kernel under TCG print or not as the host's
# load has it (calibrations and watchdogs against the emulated timers).
# When the TSC cannot be calibrated against the PIT, the TSC is marked
# unstable and tracing's four-line "Unstable clock detected" message follows.
TIMING = re.compile(r"APIC timer|TSC|tsc|clocksource|input: |hrtimer|sched_clock|"
                    r"timekeeping|jiffies|Calibrating|BogoMIPS|"
                    r"Unstable clock detected|keep using the local clock|"
                    r"\"trace_clock=local\"|^on the kernel command line$")


def normalized(console):
    """The set of the boot log's kernel lines (those with a printk time),
    without times and numbers (addresses, sizes, build date).  The
    self-tests' lines are left out: other messages cut into them at random
    (check_console reads them)."""
    lines = console.split("E2E: init reached", 1)[0].splitlines()
    out = set()
    for line in lines:
        m = re.match(r"^.*?\[\s*\d+\.\d+\]\s?(.*)$", line.rstrip("\r"))
        if m and "Testing " not in line and not line.endswith("PASSED"):
            out.add(re.sub(r"(0x)?[0-9a-f]{6,}|\d+", "N", m.group(1)))
    return out


def test_without_parameter_nothing_changes(arch, builds, boots):
    """Without ftpad_early=, the kernel with the option boots like the same
    kernel without it: the same log lines (but those that depend on TCG's
    timing, see TIMING) and the same number of sites, and no ftpad_early
    instance."""
    plain = boots("no-parameter")
    other = boots("without-option", without_option=True)
    for console in (plain, other):
        kernel.check_console(console)
        assert "ftpad_early" not in console and "E2E-EARLY-BEGIN" not in console
    assert kernel.entries(plain) == kernel.entries(other) > 5000
    differ = normalized(plain) ^ normalized(other)
    assert all(TIMING.search(line) for line in differ), sorted(differ)


def test_same_sites_with_and_without_option(arch, builds):
    """The early tracer adds no site and removes none (its code is in
    kernel/trace/, built without the plugin)."""
    adjust = 8 if arch.startswith("arm64") else 0
    with_opt, without = (vmlinux.load(b / "vmlinux").sites(adjust=adjust) for b in builds)
    assert None not in with_opt and with_opt == without
