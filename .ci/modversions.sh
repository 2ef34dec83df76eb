#!/usr/bin/env bash
# Proves the nested modules can be fetched once tagged (RELEASING.md):
#   - every go.mod of the repository is a module of go.work (no module is
#     built only with GOWORK=off, where the checks below would not reach it);
#   - every requirement on a module of this repository names the current
#     version, the one in the file VERSION (the core and the nested modules
#     are tagged together);
#   - no go.mod replaces a module of this repository: a replace in a
#     dependency's go.mod is ignored by its users, so it would hide a
#     requirement that cannot be met; go.work does that job locally;
#   - go.work replaces each required sibling at exactly that version by its
#     directory. A workspace module is a root of the build, but the go
#     command still reads the go.mod of every version required of it
#     (golang/go#66516), and the current version is tagged only at release
#     time; the replace is in go.work, which users of the modules never see.
#
#   bash .ci/modversions.sh      checks (CI)
#   bash .ci/modversions.sh -w   rewrites the requirements and go.work's
#                                replaces to the version in VERSION
set -euo pipefail
cd "$(dirname "$0")/.."
write=""
case "${1:-}" in
"") ;;
-w) write=1 ;;
*) echo "usage: $0 [-w]" >&2; exit 2 ;;
esac
version="$(tr -d '[:space:]' < VERSION)"
if ! [[ "$version" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; then
	echo "VERSION holds \"$version\", not a release version vX.Y.Z" >&2
	exit 1
fi

mapfile -t mods < <(bash .ci/workmods.sh)
declare -A ours
for m in "${mods[@]}"; do ours["${m#* }"]="${m%% *}"; done

status=0
while read -r gomod; do
	dir="$(dirname "${gomod#./}")"
	found=""
	for m in "${mods[@]}"; do [ "${m%% *}" = "$dir" ] && found=1; done
	if [ -z "$found" ]; then
		echo "$gomod: not in go.work (add it: go work use ./$dir)" >&2
		status=1
	fi
# bench/peers is outside go.work on purpose (OPA and cedar-go would raise the
# workspace's versions) and requires nothing tagged: .ci/peers.sh checks it.
# bench/peers-gateway (and its thvgate) likewise, for ToolHive:
# .ci/peers-gateway.sh checks them.
done < <(find . -name go.mod -not -path './.git/*' -not -path '*/testdata/*' -not -path './bench/peers/*' -not -path './bench/peers-gateway/*' | sort)

# canonical prints "require path version", "replace path [version] => target"
# either alone or inside a "( ... )" block: one line per directive.
directives() {
	awk '
		/^require \(/ { block = "require"; next }
		/^replace \(/ { block = "replace"; next }
		/^\)/ { block = ""; next }
		/^require / { print "require", $2, $3; next }
		/^replace / { $1 = ""; print "replace" $0; next }
		block == "require" { print block, $1, $2; next }
		block == "replace" { print block, $0 }'
}

declare -A required
for m in "${mods[@]}"; do
	dir="${m%% *}"
	if [ -n "$write" ]; then
		while read -r kind path ver; do
			if [ "$kind" = require ] && [ -n "${ours[$path]+x}" ]; then
				go mod edit -require="$path@$version" "$dir/go.mod"
			fi
		done < <(go mod edit -print "$dir/go.mod" | directives)
	fi
done
if [ -n "$write" ]; then
	while read -r kind path rest; do
		if [ "$kind" = replace ] && [ -n "${ours[$path]+x}" ]; then
			old="${rest%% =>*}"
			go work edit -dropreplace="$path${old:+@$old}"
		fi
	done < <(go work edit -print | directives)
fi

for m in "${mods[@]}"; do
	dir="${m%% *}"
	# go mod edit -print writes the file in its canonical form: one
	# requirement a line, "require path version" or inside "require (...)";
	# "replace path [version] => target" likewise.
	while read -r kind path ver; do
		[ -n "${ours[$path]+x}" ] || continue
		case "$kind" in
		require)
			required["$path"]=1
			if [ "$ver" != "$version" ]; then
				echo "$dir/go.mod: requires $path $ver, not the current version $version (VERSION)" >&2
				status=1
			fi
			;;
		replace)
			echo "$dir/go.mod: replaces $path; go.work is the place for local paths" >&2
			status=1
			;;
		esac
	done < <(go mod edit -print "$dir/go.mod" | directives)
done

for path in "${!required[@]}"; do
	dir="${ours[$path]}"
	[ "$dir" = . ] && dir=./ || dir="./$dir"
	if [ -n "$write" ]; then
		go work edit -replace="$path@$version=$dir"
	fi
	want="replace $path $version => $dir"
	if ! go work edit -print | directives | grep -qxF "$want"; then
		echo "go.work: wants \"$want\"" >&2
		status=1
	fi
done
while read -r kind path rest; do
	if [ "$kind" = replace ] && [ -n "${ours[$path]+x}" ] && [ "${rest%% *}" != "$version" ]; then
		echo "go.work: replaces $path ${rest%% =>*}, not the current version $version" >&2
		status=1
	fi
done < <(go work edit -print | directives)
if [ "$status" -eq 0 ]; then
	echo "every module of the repository requires its siblings at $version"
fi
exit "$status"
