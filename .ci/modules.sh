#!/usr/bin/env bash
# Vets and tests every nested module (the adapters that pull a large SDK and
# the MCP example): the root's "go test ./..." does not reach them. Each is
# tested with GOWORK=off, as an outside user builds it; -mod=mod lets go.sum
# catch up when the core gains a dependency. adapters/adk stays out of
# go.work (it pins OpenTelemetry with replace directives, which a workspace
# would ignore).
set -euo pipefail
cd "$(dirname "$0")/.."
for m in adapters/mcpgate adapters/mcpgo adapters/adk adapters/eino examples/mcpserver; do
	echo "-- $m"
	(cd "$m" && GOWORK=off GOFLAGS=-mod=mod go vet ./... && GOWORK=off GOFLAGS=-mod=mod go test -race -count=1 ./...)
done
