#!/usr/bin/env bash
# Vets and tests every nested module (the adapters that pull a large SDK and
# the MCP example): the root's "go test ./..." does not reach them. go.work
# lists the modules (.ci/workmods.sh). They are built in workspace mode, as
# in local development: each requires the current, not yet tagged, version
# of the core (RELEASING.md), which only go.work resolves; .ci/tidy.sh and
# .ci/modversions.sh check their go.mod files as an outside user reads them.
#
#   bash .ci/modules.sh            vet and go test -race
#   RACE= bash .ci/modules.sh      without the race detector
set -euo pipefail
cd "$(dirname "$0")/.."
race="${RACE--race}"
while read -r dir _; do
	[ "$dir" != . ] || continue
	echo "-- $dir"
	(cd "$dir" && go vet ./... && go test $race -count=1 ./...)
done < <(bash .ci/workmods.sh)
