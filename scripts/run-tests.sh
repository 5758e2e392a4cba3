#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run the whole pytest suite against the build tree given as $1.
# Debian's python3 is used on purpose: pytest, pyelftools and capstone come
# from Debian packages (PyPI is not reachable here).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/.."
export FTPAD_BUILD="$build"
# --durations: every log says where make check's time goes.
# -n 2 --dist loadfile (python3-pytest-xdist): two workers, each running one
# test file at a time, so that a file's module fixtures (a kernel build, a
# binutils build) are made once.  Many tests use one core (QEMU, programs
# under qemu-user, pyelftools), and the second worker uses the other; what
# two workers both need (kernel builds, the objdump build, unpacked trees) is
# made once, under a lock.
exec /usr/bin/python3 -m pytest -p no:cacheprovider -ra --durations=40 \
    -n 2 --dist loadfile tests "${@:2}"
