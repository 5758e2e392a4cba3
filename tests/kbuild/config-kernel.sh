#!/bin/sh
# SPDX-License-Identifier: MIT
# config-kernel.sh SRC OUT FRAGMENT [make args...]
# tinyconfig in OUT, then FRAGMENT's options, then olddefconfig.
set -eu
src=$1 out=$2 frag=$3
shift 3
make -s -C "$src" O="$out" "$@" tinyconfig
grep -E '^(CONFIG_[A-Z0-9_]+=|# CONFIG_[A-Z0-9_]+ is not set)' "$frag" |
while IFS= read -r line; do
	case $line in
	"# CONFIG_"*) o=${line#"# CONFIG_"}; "$src/scripts/config" --file "$out/.config" -d "${o%% *}" ;;
	CONFIG_*=y) o=${line#CONFIG_}; "$src/scripts/config" --file "$out/.config" -e "${o%%=*}" ;;
	CONFIG_*=*) o=${line#CONFIG_}; "$src/scripts/config" --file "$out/.config" --set-val "${o%%=*}" "${o#*=}" ;;
	esac
done
make -s -C "$src" O="$out" "$@" olddefconfig
# Every option the fragment sets must have survived olddefconfig.
grep -E '^CONFIG_[A-Z0-9_]+=' "$frag" | while IFS= read -r line; do
	grep -qx "$line" "$out/.config" || { echo "config-kernel.sh: $line did not stick" >&2; exit 1; }
done
