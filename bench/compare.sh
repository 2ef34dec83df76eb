#!/usr/bin/env bash
# compare.sh — before/after benchmark comparison in one run.
#
#   bench/compare.sh OLD NEW [PATTERN]
#
# Builds the benchmark test binary of PKG (default ./bench/) at the git
# revisions OLD and NEW (each in a temporary worktree; NEW may be "." for the
# current checkout as it is, uncommitted changes included), runs the two
# alternately COUNT times (default 6; the side that goes first alternates
# each round, so that a change of the machine's load hits both), and prints
# benchstat OLD vs NEW. PATTERN is the -test.bench regexp (default ".").
#
# Environment:
#   COUNT=6          rounds (one -test.count 1 run of each binary per round)
#   BENCHTIME=1s     -test.benchtime
#   PKG=./bench/     package to benchmark
#   BENCH_FROM=REV   take PKG's *_test.go files from REV on both sides, to run
#                    benchmarks that OLD does not have yet against OLD's code
#   OUT=DIR          keep old.txt, new.txt and load.txt there (default: a
#                    temporary directory, printed at the end)
#   SHARED=DIR       the shared spec directory the benchmarks read as
#                    ../../shared (default: <top>/../shared)
#
# Example: the read-path benchmarks across a merge,
#   bench/compare.sh d4d1d7c HEAD 'Observe$/telemetry=off$|Policy/read|Params$'
set -euo pipefail

usage() { sed -n '2,25p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
old_rev=$1 new_rev=$2 pattern=${3:-.}
count=${COUNT:-6} benchtime=${BENCHTIME:-1s} pkg=${PKG:-./bench/}
pkg=./${pkg#./}
top=$(git rev-parse --show-toplevel)
shared=${SHARED:-$top/../shared}
command -v benchstat >/dev/null || PATH=$PATH:$(go env GOPATH)/bin
command -v benchstat >/dev/null || { echo "benchstat not found: go install golang.org/x/perf/cmd/benchstat@latest" >&2; exit 1; }

tmp=$(mktemp -d /tmp/axgate-compare.XXXXXX)
out=${OUT:-$tmp}
mkdir -p "$out"
worktrees=()
cleanup() {
	for w in "${worktrees[@]}"; do git -C "$top" worktree remove --force "$w" >/dev/null 2>&1 || true; done
	[ "$out" = "$tmp" ] || rm -rf "$tmp"
}
trap cleanup EXIT
# The benchmarks read fixtures as ../../shared from their package directory:
# give the temporary worktrees a sibling of that name.
[ -d "$shared" ] && ln -s "$(cd "$shared" && pwd)" "$tmp/shared"

# checkout SIDE REV sets tree to the directory holding REV's tree. It runs in
# this shell (not in a $(…) subshell) so that cleanup knows the worktree.
checkout() {
	local side=$1 rev=$2
	if [ "$rev" = . ]; then
		tree=$top
		[ -z "${BENCH_FROM:-}" ] || echo "BENCH_FROM does not apply to \".\" (the checkout is used as it is)" >&2
		return
	fi
	tree=$tmp/$side
	git -C "$top" worktree add --quiet --detach "$tree" "$rev"
	worktrees+=("$tree")
	if [ -n "${BENCH_FROM:-}" ]; then
		(cd "$tree" && git checkout --quiet "$BENCH_FROM" -- "${pkg#./}"'*_test.go')
	fi
}

declare -A dir
for side in old new; do
	rev=$old_rev
	[ "$side" = new ] && rev=$new_rev
	checkout "$side" "$rev"
	dir[$side]=$tree/${pkg#./}
	echo "building $side ($rev, $(git -C "$tree" rev-parse --short HEAD)) ..." >&2
	(cd "$tree" && go test -c -o "$tmp/$side.test" "$pkg")
done

: >"$out/old.txt"
: >"$out/new.txt"
echo "start: $(uptime)" | tee "$out/load.txt" >&2
for ((i = 0; i < count; i++)); do
	order="old new"
	((i % 2)) && order="new old"
	for side in $order; do
		(cd "${dir[$side]}" && "$tmp/$side.test" -test.run '^$' -test.bench "$pattern" \
			-test.benchmem -test.count 1 -test.benchtime "$benchtime") >>"$out/$side.txt"
	done
	echo "round $((i + 1))/$count: $(uptime)" | tee -a "$out/load.txt" >&2
done

benchstat "$out/old.txt" "$out/new.txt"
echo "raw results and load: $out" >&2
