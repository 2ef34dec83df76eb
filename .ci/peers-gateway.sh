#!/usr/bin/env bash
# bench/peers-gateway: the hop users feel. The same MCP calls through
# direct, a TCP relay, httputil's ReverseProxy, ToolHive's authorization
# chain and `axgate mcp`; `axgate serve` against ReverseProxy; and one
# `axgate serve` replica against two sharing one Redis. A module of its own
# that go.work does not list (ToolHive would raise the versions every
# workspace module builds with): it is built with GOWORK=off and its go.mod
# replaces the core by ../..; the axgate binary is built from cmd/axgate in
# the workspace, as users get it.
#
#   bash .ci/peers-gateway.sh            the full comparison (5 rounds × 2 s per
#                                        engine and row; about 10 minutes
#                                        after the builds):
#                                        run it on a quiet machine
#   bash .ci/peers-gateway.sh --verify   tidy check, vet, build, and every engine
#                                        checked on every protocol (allowed and
#                                        refused alike), serve and the two
#                                        replicas too; times nothing
#   ROUNDS=3 DURATION=1s bash .ci/peers-gateway.sh
#   NO_TOOLHIVE=1 bash .ci/peers-gateway.sh   without ToolHive (no build of it)
#   EXTRA="-profile /tmp/prof" bash .ci/peers-gateway.sh   also a CPU profile of
#                                        each axgate engine per row (first round)
#
# Redis: AXGATE_REDIS_URL's server (default redis://127.0.0.1:6379), database
# 9, which the run flushes. Without a reachable Redis the shared-state rows
# are left out.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
verify=false
[ "${1:-}" = "--verify" ] && verify=true

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "-- build axgate (cmd/axgate)"
go build -o "$work/axgate" ./cmd/axgate

cd bench/peers-gateway
export GOWORK=off
echo "-- go mod tidy -diff (bench/peers-gateway)"
go mod tidy -diff || { echo "bench/peers-gateway: run (cd bench/peers-gateway && GOWORK=off go mod tidy) and commit" >&2; exit 1; }
go vet .
go build -o "$work/peers-gateway" .
thv=()
if [ -z "${NO_TOOLHIVE:-}" ]; then
	# thvgate is a module of its own, so that ToolHive's requirements and
	# axgate's do not raise each other's versions: it builds with exactly
	# the versions ToolHive v0.47.0 was released with.
	echo "-- build thvgate (ToolHive v0.47.0; a first build compiles ~1,300 packages)"
	start=$(date +%s)
	(
		cd thvgate
		export GOTOOLCHAIN="${THV_GOTOOLCHAIN:-local}"
		go mod tidy -diff || { echo "bench/peers-gateway/thvgate: run (cd bench/peers-gateway/thvgate && GOWORK=off go mod tidy) and commit" >&2; exit 1; }
		nice -n 19 go build -o "$work/thvgate" .
		go vet .
	)
	echo "   built in $(($(date +%s) - start)) s"
	thv=(-thvgate "$work/thvgate")
fi

# The server of AXGATE_REDIS_URL (its database number dropped: the run uses 9).
redis="redis://127.0.0.1:6379"
if [[ "${AXGATE_REDIS_URL:-}" =~ ^(redis://[^/]+)(/[0-9]*)?$ ]]; then
	redis="${BASH_REMATCH[1]}"
fi
hostport="${redis#redis://}"
hostport="${hostport##*@}"
sections=mcp,serve,shared
if ! (exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}") 2>/dev/null; then
	echo "-- no Redis at $hostport: the shared-state rows are left out"
	sections=mcp,serve
fi

args=(-axgate "$work/axgate" "${thv[@]}" -redis "$redis/9" -sections "$sections")
if $verify; then
	"$work/peers-gateway" "${args[@]}" -verify
else
	uptime
	"$work/peers-gateway" "${args[@]}" -rounds "${ROUNDS:-5}" -d "${DURATION:-2s}" ${EXTRA:-}
	uptime
fi
