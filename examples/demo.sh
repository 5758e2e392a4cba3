#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The `make demo` walk-through, one echoed command at a time:
#   1. build examples/calc.c with the ftpad GCC plugin, with exit sites, and
#      link it with libftpad;
#   2. show one padded function entry: the 8-byte ops slot and the 5-byte NOP;
#   3. record calc's parser and evaluator with `ftpad record`, then look at the
#      trace: `ftpad replay` (the call tree), `ftpad report` (time per
#      function) and `ftpad flame` (an SVG flame graph).
#
#   examples/demo.sh BUILD_DIR [OUT_DIR]
#
# BUILD_DIR is the CMake build tree that `make` fills.  The demo's own files
# go to OUT_DIR, by default BUILD_DIR/examples.  Exits non-zero if any step
# fails, or if the recording's summary line shows that no event was recorded.
set -euo pipefail

die() {
  echo "demo: error: $*" >&2
  exit 1
}

# Print a command the way `set -x` does, quoting only where the shell would
# need it, then run it.  The echo goes to fd 3, the demo's stdout, so that it
# stays visible when the command's output is piped.
exec 3>&1
run() {
  local arg line="+"
  for arg in "$@"; do
    if [[ $arg =~ ^[A-Za-z0-9_./=,:+@%-]+$ ]]; then
      line+=" $arg"
    else
      line+=" '${arg//\'/\'\\\'\'}'"
    fi
  done
  printf '%s\n' "$line" >&3
  "$@"
}

step() {
  printf '\n== %s\n' "$*"
}

if (($# < 1 || $# > 2)); then
  echo "usage: $0 BUILD_DIR [OUT_DIR]" >&2
  exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || die "$1: no such build directory; run \`make\` first"
out=${2:-$build/examples}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."

plugin=$build/gcc-plugin/ftpad.so
ftpad=$build/bin/ftpad
for f in "$plugin" "$build/runtime/libftpad.so" "$ftpad"; do
  [[ -e $f ]] || die "$f is missing: run \`make\` first"
done
for tool in gcc nm objdump; do
  command -v "$tool" >/dev/null || die "$tool is not installed: scripts/install-deps.sh installs it"
done

step "1. Build calc with the ftpad plugin (exit=1: exit sites too), and link it with libftpad"
run gcc -O2 -g -fplugin="$plugin" -fplugin-arg-ftpad-exit=1 -c examples/calc.c -o "$out/calc.o"
run gcc -o "$out/calc" "$out/calc.o" -L"$build/runtime" -lftpad -Wl,-rpath,"$build/runtime" -lm

step "2. A padded entry: parse_expr's ops slot and site"
fn=parse_expr
read -r entry size < <(nm -S "$out/calc" | awk -v fn="$fn" '$4 == fn { print $1, $2; exit }') ||
  die "$out/calc has no symbol $fn"
echo "The 8 bytes before $fn are its ops slot (objdump names them after the"
echo "symbol before it); $fn's first instruction, the 5-byte NOP, is the site"
echo "that ftpad patches into a call when $fn is traced."
# awk, not head, so that objdump never dies of SIGPIPE under pipefail.
run objdump -d --no-show-raw-insn \
  --start-address="$(printf '%#x' $((0x$entry - 8)))" \
  --stop-address="$(printf '%#x' $((0x$entry + 0x$size)))" "$out/calc" |
  sed -e '1,/^Disassembly/d' -e '/^$/d' | awk 'NR <= 6'

step "3. Record the parser and the evaluator of one run, and look at the trace"
trace=$out/calc.data
summary=$(run "$ftpad" record --force -F 'parse_*' -F 'eval*' -o "$trace" -- \
  "$out/calc" 'let x = 3' 'x * (2 + 4) - sqrt(16)' 2>&1 >&3) ||
  die "ftpad record failed: $summary"
printf '%s\n' "$summary"
re='^ftpad: ([0-9]+) sites, ([0-9]+) enabled, ([0-9]+) events, ([0-9]+) dropped, ([0-9]+) bytes in '
[[ $summary =~ $re ]] || die "ftpad record did not end with its summary line"
((BASH_REMATCH[3] > 0)) || die "no events: the filter matched nothing, or no site was patched"
run "$ftpad" replay "$trace"
run "$ftpad" report "$trace"
run "$ftpad" flame "$trace" -o "$out/calc.svg"
echo "Open $out/calc.svg in a browser: click a frame to zoom, Ctrl-F to search."
