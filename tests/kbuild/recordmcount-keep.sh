#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The recordmcount program of the kernel tests' recordmcount builds
# (tests/kbuild/kernel.py, rmc=True).  Kbuild runs `PROGRAM [-w] file.o`
# from the top of the build folder after compiling each traced C object;
# this keeps the object as the compiler wrote it under ftpad-premcount/ (same
# relative path), then hands the call to Linux's own recordmcount.  So the
# build stays stock, and the tests later run recordmcount-ng on the kept
# copies and compare with what the reference made of the same objects (never
# cached: recordmcount-ng changes).
#
# Where Linux's recordmcount fails on an object (x86_64 with recordmcount
# forced: "Cannot find symbol for section"), the object stays as the
# compiler wrote it, the failure goes to ftpad-recordmcount-failures (one
# line: the object, a tab, the messages), and the build goes on, so that the
# tests can show what recordmcount-ng does with it.
#
# Installed in place of scripts/recordmcount (no kernel patch), the
# reference is scripts/recordmcount.ref; named by kbuild/0005's
# CONFIG_FTPAD_RECORDMCOUNT, it is scripts/recordmcount itself.
set -eu
top=$PWD
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
if [ "$self" = "$top/scripts/recordmcount" ]; then
	ref=$top/scripts/recordmcount.ref
else
	ref=$top/scripts/recordmcount
fi
keep=$top/ftpad-premcount
objs=
for arg; do
	case $arg in
	-*) continue ;;
	/*) rel=${arg#"$top"/} ;;
	*) rel=${arg#./} ;;
	esac
	mkdir -p "$keep/$(dirname "$rel")"
	# temp file + rename: an interrupted build never leaves half a copy
	cp "$arg" "$keep/$rel.tmp"
	mv "$keep/$rel.tmp" "$keep/$rel"
	objs="$objs $rel"
done
err=$(mktemp)
trap 'rm -f "$err"' EXIT
if "$ref" "$@" 2>"$err"; then
	cat "$err" >&2
	exit 0
fi
cat "$err" >&2
# One short append per failure: parallel compiles do not interleave.
printf '%s\t%s\n' "${objs# }" "$(tr '\n' ' ' <"$err")" >>"$top/ftpad-recordmcount-failures"
