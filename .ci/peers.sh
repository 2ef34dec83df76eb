#!/usr/bin/env bash
# bench/peers: axgate's decisions beside OPA, cedar-go and a hand-written
# floor. It is a module of its own that go.work does not list (OPA and
# cedar-go would raise the versions every workspace module builds with), so
# it is built with GOWORK=off and its go.mod replaces the core by ../..;
# .ci/tidy.sh and .ci/modules.sh, which cover the workspace, do not reach it.
#
#   bash .ci/peers.sh    tidy check, vet, the decision tests, a one-iteration
#                        benchmark smoke run and a one-round run of the table
set -euo pipefail
cd "$(dirname "$0")/../bench/peers"
export GOWORK=off
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
echo "-- go mod tidy -diff (bench/peers)"
go mod tidy -diff || { echo "bench/peers: run (cd bench/peers && GOWORK=off go mod tidy) and commit" >&2; exit 1; }
go vet ./...
go test -count=1 -run . -bench . -benchtime=1x ./...
go run . -rounds 1 -benchtime 1ms >/dev/null
