#!/bin/sh
# SPDX-License-Identifier: MIT
#
# ftpad-specs.sh CC PLUGIN [PLUGIN-ARG...] > ftpad-kernel.specs
#
# Print a GCC specs file that makes the compiler driver hand ftpad's kernel
# ABI to cc1 wherever Kbuild passes -pg, instead of -pg itself.  Used with
# `make KCFLAGS=-specs=ftpad-kernel.specs CC_FLAGS_FTRACE=-pg ...` (see
# docs/kbuild.md): every object that Kbuild builds with -pg gets the plugin,
# and every object that removes -pg (`CFLAGS_REMOVE_foo.o = -pg`, or
# `$(CC_FLAGS_FTRACE)`) gets neither, exactly as in a stock build.
#
# The driver's own cc1_options turns -pg into cc1's -p; this rewrites that one
# directive, `%{pg:-p}`, and keeps the rest of the compiler's spec string.
# A PLUGIN-ARG is given without its prefix: exclude-section=.noinstr.text
set -eu
[ $# -ge 2 ] || { echo "usage: $0 CC PLUGIN [PLUGIN-ARG...]" >&2; exit 2; }
cc=$1 plugin=$2
shift 2
case $plugin in /*) ;; *) echo "$0: PLUGIN must be an absolute path" >&2; exit 2 ;; esac
[ -f "$plugin" ] || { echo "$0: $plugin: no such file" >&2; exit 2; }
flags="-fplugin=$plugin -fplugin-arg-ftpad-abi=kernel"
for a in "$@"; do
	case $a in
	*[[:space:]%\|]*) echo "$0: plugin argument '$a' contains a blank, % or |" >&2; exit 2 ;;
	esac
	flags="$flags -fplugin-arg-ftpad-$a"
done
old=$($cc -dumpspecs | sed -n '/^\*cc1_options:$/{n;p;q}')
case $old in
*'%{pg:-p}'*) ;;
*) echo "$0: $cc's cc1_options has no %{pg:-p}; cannot rewrite it" >&2; exit 1 ;;
esac
printf '*cc1_options:\n%s\n\n' "$(printf '%s\n' "$old" | sed "s|%{pg:-p}|%{pg:$flags}|")"
