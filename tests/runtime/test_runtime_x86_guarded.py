# SPDX-License-Identifier: MIT
"""x86_64: once ftpad_register_ops() (or a filter change) returns, every
site it enabled calls on every thread, and once ftpad_unregister_ops()
returns none does, also when other threads block SIGTRAP and libftpad
writes the batches without int3 (docs/runtime.md "Threads that block
SIGTRAP").  Two threads call 1000 padded functions in a loop and count
their own iterations and callbacks; after each update the main thread
checks that the calls each thread made from then on, over 8 of its loops,
are exactly what the registered ops want (tests/src/runtime/x86_guarded.c)."""
import platform
import re

import pytest

from ftpadtest import BUILD, INCLUDE, TEST_SRC, plugin_flags, run

SRC = TEST_SRC / "runtime"
LIBDIR = BUILD / "runtime"

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86_64 only")


@pytest.fixture(scope="module")
def guarded(plugin, libftpad, tmp_path_factory):
    exe = tmp_path_factory.mktemp("x86_guarded") / "x86_guarded"
    run(["gcc", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}",
         *plugin_flags(plugin, include="g_*"), SRC / "x86_guarded.c",
         f"-L{LIBDIR}", "-lftpad", f"-Wl,-rpath,{LIBDIR}", "-o", exe])
    return exe


def rounds_of(p):
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    m = re.fullmatch(r"ok rounds=(\d+) guarded=(\d+)\n", p.stdout)
    assert m, p.stdout + p.stderr
    return int(m.group(1)), int(m.group(2))


ROUNDS = 20
# Every batch of ROUNDS rounds (x86_guarded.c one_round()): the few up,
# the refilter's three up and three down, the rest up, (odd rounds) the
# few back to the plain stub, all down.
BATCHES = ROUNDS // 2 * 5 + ROUNDS // 2 * 6


@pytest.mark.parametrize("blockers, method", [
    (["sleeper"], None), (["sleeper"], "mprotect"), (["spinner"], None),
    (["sleeper", "churn"], None)], ids=["sleeper", "sleeper-mprotect", "spinner", "churn"])
def test_every_site_calls_once_a_guarded_update_returns(guarded, blockers, method):
    """With a thread that blocks every signal (asleep, or itself calling
    the functions), every batch is written without int3, and each update
    is complete on both hot threads when it returns.  Threads being
    created and exiting in a tight loop besides (glibc blocks every signal
    in them for a moment) change nothing."""
    env = {"FTPAD_DEBUG": "1", **({"FTPAD_TEXT_WRITE": method} if method else {})}
    p = run([guarded, str(ROUNDS), *blockers], check=False, env=env)
    assert rounds_of(p) == (ROUNDS, BATCHES), p.stdout


def test_every_site_calls_once_an_int3_update_returns(guarded):
    """The same checks with no thread blocking SIGTRAP (the int3 protocol),
    and with threads created and exiting meanwhile."""
    p = run([guarded, str(ROUNDS), "churn"], check=False, env={"FTPAD_DEBUG": "1"})
    rounds, _ = rounds_of(p)
    assert rounds == ROUNDS
    p = run([guarded, str(ROUNDS)], check=False, env={"FTPAD_DEBUG": "1"})
    assert rounds_of(p) == (ROUNDS, 0)


@pytest.mark.parametrize("method", [None, "mprotect"])
def test_a_handler_that_blocks_sigtrap_is_not_killed(guarded, method):
    """A SIGALRM timer (every 200 us) whose handler, installed with every
    signal in its sa_mask as sigfillset() makes it, calls the padded
    functions: the kernel blocks SIGTRAP while it runs, on whichever thread
    it interrupts, which libftpad cannot see coming in the threads' masks.
    Before the fix the first int3 batch it met killed the process with
    SIGTRAP (10 runs out of 10); now every batch goes without int3."""
    env = {"FTPAD_DEBUG": "1", **({"FTPAD_TEXT_WRITE": method} if method else {})}
    p = run([guarded, str(ROUNDS), "handler"], check=False, env=env)
    assert rounds_of(p) == (ROUNDS, BATCHES), p.stdout


@pytest.mark.parametrize("method", [None, "mprotect"])
def test_a_thread_that_blocks_sigtrap_after_the_look_is_not_killed(guarded, method):
    """A thread blocks every signal (pthread_sigmask, sigprocmask in turn),
    calls the padded functions, unblocks, calls them again, in a loop:
    half the time libftpad read its mask unblocked and wrote with int3,
    and the thread, blocked by then, ran into one (killed with SIGTRAP in
    15 runs of 40 rounds out of 15).  libftpad.so's pthread_sigmask and
    sigprocmask now wait while an int3 batch is written; the batches that
    find the thread blocked go without int3."""
    env = {"FTPAD_DEBUG": "1", **({"FTPAD_TEXT_WRITE": method} if method else {})}
    # Twice the rounds: with ROUNDS, the process lived 1 run in 6 before.
    p = run([guarded, str(2 * ROUNDS), "flip"], check=False, env=env)
    rounds, batches = rounds_of(p)
    assert rounds == 2 * ROUNDS and batches <= 2 * BATCHES, p.stdout
