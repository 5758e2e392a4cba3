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
exec /usr/bin/python3 -m pytest -p no:cacheprovider -ra --durations=40 tests "${@:2}"
