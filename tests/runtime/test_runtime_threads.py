# SPDX-License-Identifier: MIT
"""libftpad patching while other threads run the sites (x86_64: the int3
protocol with membarrier SYNC_CORE), the grace period of unregistering, and
the SIGTRAP handler that must leave other traps to the program.

The programs are in tests/runtime/ and are compiled with the GCC plugin;
each checks its own calls (ip, arguments, results) and prints what it saw."""
import re
import signal

import pytest

from ftpadtest import BUILD, INCLUDE, TEST_SRC, run

SRC = TEST_SRC / "runtime"
LIBDIR = BUILD / "runtime"


def build(plugin, tmp_path, name, *extra):
    exe = tmp_path / name
    run(["gcc", "-O2", "-g", "-Wall", "-Wextra", "-Werror", f"-fplugin={plugin}",
         "-pthread", f"-I{INCLUDE}", SRC / f"{name}.c", *extra, f"-L{LIBDIR}", "-lftpad",
         f"-Wl,-rpath,{LIBDIR}", "-o", exe])
    return exe


@pytest.fixture(scope="module")
def stress(plugin, libftpad, tmp_path_factory):
    return build(plugin, tmp_path_factory.mktemp("stress"), "stress")


@pytest.mark.parametrize("method", ["procmem", "mprotect"])
def test_toggling_under_running_threads(stress, method):
    """Four threads call three traced functions in tight loops while the
    main thread registers, refilters and unregisters ops 10,000 times, and
    frees each ops as soon as unregistering returns.  Every callback checks
    ip and the arguments, every call its result; a callback running after
    its ops was unregistered is counted as late.  Some calls must have hit
    a site mid-patch and been emulated by the SIGTRAP handler, or the test
    did not exercise the int3 protocol at all."""
    toggles = 10000 if method == "procmem" else 2000
    p = run([stress, "race", "4", str(toggles)], env={"FTPAD_TEXT_WRITE": method})
    m = re.fullmatch(r"ok traps=(\d+)\n", p.stdout)
    assert m, p.stdout
    assert int(m.group(1)) > 0


def test_sigprof_handlers_calling_traced_functions_while_toggling(stress):
    """The same race, with a SIGPROF timer (every 200 us of CPU time) whose
    handler calls traced functions and checks their results: it lands in
    pads mid-patch, and in libftpad's own SIGTRAP handler.  (A SIGTRAP
    handler that other signals could interrupt got this process killed.)"""
    p = run([stress, "signals", "4", "3000"])
    assert re.fullmatch(r"ok traps=\d+\n", p.stdout), p.stdout


def test_fork_while_patching(stress):
    """A thread forks 100 times while the main thread toggles sites and
    four threads run them; each child registers its own ops, counts its
    calls exactly and unregisters.  Without libftpad's fork handlers a child
    inherits the lock held by a thread it does not have and hangs (the
    timeout only turns a hang into a failure; nothing is timed)."""
    p = run([stress, "fork", "4", "100"], timeout=600)
    assert re.fullmatch(r"ok traps=\d+\n", p.stdout), p.stdout


def test_fork_from_a_callback_while_patching(stress):
    """A thread forks from inside a callback, 100 times, while the main
    thread toggles sites and four threads run them.  The fork handlers cannot
    wait for the lock there (its holder may be waiting for that very
    callback), so a child may start with it held by a thread it does not
    have: the child must make it new.  Each child registers, counts its
    calls exactly and unregisters; one that hangs is killed by its alarm(20)
    and fails the test (without the fix, most do)."""
    p = run([stress, "forkcb", "4", "100"], timeout=600)
    assert re.fullmatch(r"ok traps=\d+\n", p.stdout), p.stdout


def test_no_call_lost_while_others_patch_the_same_sites(stress):
    """One ops stays registered on three functions while another thread
    registers and unregisters ops on the same functions without pause (the
    sites go from one ops to the list ops, to the full register save and
    back); between barriers, the ops that stayed sees every call exactly."""
    p = run([stress, "exactrace", "4", "300"])
    assert re.fullmatch(r"ok traps=\d+\n", p.stdout), p.stdout


def test_no_call_lost_while_enabled(stress):
    """Between barriers, with the ops registered before the workers start
    and unregistered after they stop, the callback sees exactly every call:
    2 or 3 traced calls per iteration, 1000 iterations, 4 threads."""
    p = run([stress, "exact", "4", "300"])
    assert p.stdout.startswith("ok "), p.stdout


def test_program_sigtrap_handler_still_called(plugin, libftpad, tmp_path):
    """A SIGTRAP handler installed before libftpad's still gets raise() and
    the program's own int3, while a site is enabled and after it is not."""
    exe = build(plugin, tmp_path, "sigtrap")
    p = run([exe, "handler"])
    assert p.stdout == "traps=2 kernel=1 calls=1\ntraps=3 kernel=2 calls=1\n"


def test_program_int3_without_handler_still_kills(plugin, libftpad, tmp_path):
    """With no handler of the program's, an int3 that is not a site takes
    the default action (killed by SIGTRAP), as it would without libftpad."""
    exe = build(plugin, tmp_path, "sigtrap")
    p = run([exe, "default"], check=False)
    assert p.returncode == -signal.SIGTRAP and p.stdout == "", (p.returncode, p.stdout)
