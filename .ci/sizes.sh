#!/usr/bin/env bash
# Fails when a tracked file is larger than 1 MiB. The project ships source,
# manifests and small test data only: a build output, a downloaded server or
# a fuzz cache committed by mistake once made a whole submission too large
# to land. A file that must be larger names itself in .ci/sizes.allow.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1 << 20))
status=0
while IFS= read -r -d '' f; do
	[ -f "$f" ] || continue
	size=$(stat -c %s "$f")
	if [ "$size" -gt "$limit" ] && ! grep -qxF "$f" .ci/sizes.allow 2>/dev/null; then
		echo "tracked file over 1 MiB: $f ($size bytes)" >&2
		status=1
	fi
done < <(git ls-files -z)
exit $status
