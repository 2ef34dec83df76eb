#!/usr/bin/env bash
# "go mod tidy" for every module of the workspace.
#
#   bash .ci/tidy.sh        tidies go.mod and go.sum in place
#   bash .ci/tidy.sh -diff  prints what tidy would change and fails if anything (CI)
#
# go mod tidy ignores go.work, and the nested modules require a version of the
# core (and examples/mcpserver of adapters/mcpgate) that is tagged only at
# release time (RELEASING.md). So each module is tidied with a temporary
# replace of every other workspace module by its directory, exactly what the
# workspace does for builds; the replace lines are removed again afterwards,
# so they never reach a commit. A directory replacement adds no go.sum lines,
# so the go.sum checked here is the one the module has before its
# dependencies are tagged.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
diff=""
case "${1:-}" in
"") ;;
-diff) diff="-diff" ;;
*) echo "usage: $0 [-diff]" >&2; exit 2 ;;
esac

mapfile -t mods < <(bash .ci/workmods.sh)
status=0
for m in "${mods[@]}"; do
	dir="${m%% *}"
	saved="$(mktemp)"
	cp "$dir/go.mod" "$saved"
	replaces=()
	drops=()
	for o in "${mods[@]}"; do
		[ "$o" != "$m" ] || continue
		replaces+=("-replace=${o#* }=$root/${o%% *}")
		drops+=("-dropreplace=${o#* }")
	done
	echo "-- $dir"
	(cd "$dir" && go mod edit "${replaces[@]}")
	if ! (cd "$dir" && GOWORK=off GOFLAGS=-buildvcs=false go mod tidy $diff); then
		status=1
	fi
	# tidy keeps a direct requirement that sits in the block of indirect ones
	# (it only fixes the "// indirect" comments): a reader takes the SDK an
	# adapter imports for a dependency of a dependency.
	if [ -n "$diff" ] && ! awk -v f="$dir/go.mod" '
		/^require \(/ { n++; inblock = 1; next }
		/^\)/ { inblock = 0; next }
		inblock && /\/\/ indirect/ { indirect[n] = 1 }
		inblock { line[n] = line[n] $0 "\n" }
		END {
			bad = 0
			for (b in indirect) {
				m = split(line[b], ls, "\n")
				for (i = 1; i <= m; i++)
					if (ls[i] != "" && ls[i] !~ /\/\/ indirect/) {
						print f ": direct requirement among the indirect ones:" ls[i] > "/dev/stderr"; bad = 1
					}
			}
			exit bad
		}' "$saved"; then
		status=1
	fi
	if [ -n "$diff" ]; then
		cp "$saved" "$dir/go.mod"
	else
		(cd "$dir" && go mod edit "${drops[@]}")
	fi
	rm -f "$saved"
done
if [ "$status" -ne 0 ]; then
	echo "go mod tidy would change the module files above: run bash .ci/tidy.sh and commit" >&2
fi
exit "$status"
