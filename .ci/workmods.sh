#!/usr/bin/env bash
# Prints the modules of the workspace, one a line: "<dir> <module path>",
# the root first. go.work is the one list of the repository's modules; the
# other scripts read it from here.
set -euo pipefail
cd "$(dirname "$0")/.."
go work edit -json | sed -n 's/^[[:space:]]*"DiskPath": "\(.*\)".*$/\1/p' | while read -r dir; do
	dir="${dir#./}"
	[ -n "$dir" ] || dir=.
	printf '%s %s\n' "$dir" "$(awk '$1 == "module" { print $2; exit }' "$dir/go.mod")"
done
