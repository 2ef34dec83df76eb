#!/usr/bin/env bash
# Checks the container image and the Kubernetes manifest with what this
# machine can run, and says which checks ran.
#
#   Dockerfile:  docker build (when a Docker daemon answers), else hadolint
#                (when on PATH), else dockerfilelint from npm (installed once
#                under ${AXGATE_CACHE:-$HOME/.cache/axgate}), else a skip.
#   Kubernetes:  kubeconform -strict (when on PATH and it finds its schemas),
#                else nothing more than the structural check below.
#   Always:      go test -run 'TestDockerfile|TestDeploy' ./cmd/axgate
#                (the fields both rely on, the ConfigMap and deploy/axgate.yaml checked by
#                axgate config check and axgate lint).
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${AXGATE_CACHE:-$HOME/.cache/axgate}"

echo "-- Dockerfile and deploy/kubernetes.yaml: structure (go test)"
(cd cmd/axgate && go test -count=1 -run 'TestDockerfile|TestDeploy' .)

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
	echo "-- Dockerfile: docker build"
	docker build -t axgate:ci .
	docker run --rm axgate:ci --help >/dev/null
	echo "docker build: the image builds and its binary runs"
elif command -v hadolint >/dev/null 2>&1; then
	echo "-- Dockerfile: hadolint (no Docker daemon)"
	hadolint Dockerfile
elif command -v npm >/dev/null 2>&1; then
	echo "-- Dockerfile: dockerfilelint from npm (no Docker daemon, no hadolint)"
	dir="$cache/dockerfilelint"
	if [ ! -x "$dir/node_modules/.bin/dockerfilelint" ]; then
		mkdir -p "$dir"
		(cd "$dir" && npm install --no-audit --no-fund --silent dockerfilelint@1.8.0 >&2)
	fi
	out="$("$dir/node_modules/.bin/dockerfilelint" Dockerfile)"
	echo "$out"
	grep -q "Issues: None found" <<<"$out" || { echo "dockerfilelint found issues" >&2; exit 1; }
else
	echo "-- Dockerfile: SKIPPED (no Docker daemon, no hadolint, no npm); only the structural check ran"
fi

if command -v kubeconform >/dev/null 2>&1; then
	echo "-- deploy/kubernetes.yaml: kubeconform -strict"
	kubeconform -strict -summary deploy/kubernetes.yaml
else
	echo "-- deploy/kubernetes.yaml: kubeconform not installed (its schemas are downloaded, which this machine cannot); the structural check above ran instead"
fi
