#!/usr/bin/env bash
# Builds a minimal OpenTelemetry Collector (OTLP receiver, batch processor,
# debug exporter) for the end-to-end observability test, and prints the path
# of the binary on stdout. Everything else goes to stderr.
#
#   export AXGATE_OTELCOL="$(bash .ci/otelcol.sh)"
#   go test ./examples/shop/ -run OTLP -v
#
# Idempotent: the binary is cached under ${AXGATE_CACHE:-$HOME/.cache/axgate}/otelcol/<version>
# and reused when it already runs. The first build takes a few minutes on two cores.
#
# GONOSUMDB: the Go checksum database lacked some collector modules when this
# was written, so this one build (and only it — never the project's own) skips
# the checksum database for the collector's module prefix. Module downloads
# still come from the Go module proxy.
set -euo pipefail

version="${OTELCOL_VERSION:-0.140.0}"
root="${AXGATE_CACHE:-$HOME/.cache/axgate}/otelcol/v${version}"
bin="$root/dist/axgate-otelcol"

if [ -x "$bin" ] && "$bin" components >/dev/null 2>&1; then
	echo "$bin"
	exit 0
fi

mkdir -p "$root/bin" "$root/dist"
export GONOSUMDB="go.opentelemetry.io/collector${GONOSUMDB:+,$GONOSUMDB}"
export GOFLAGS="-mod=mod"

if [ ! -x "$root/bin/builder" ]; then
	echo "otelcol.sh: installing the collector builder v${version}" >&2
	GOBIN="$root/bin" go install "go.opentelemetry.io/collector/cmd/builder@v${version}" >&2
fi

cat >"$root/builder.yaml" <<YAML
dist:
  name: axgate-otelcol
  description: Minimal OpenTelemetry Collector for axgate's end-to-end tests
  version: ${version}
  output_path: ${root}/dist
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v${version}
processors:
  - gomod: go.opentelemetry.io/collector/processor/batchprocessor v${version}
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter v${version}
YAML

echo "otelcol.sh: building the collector (a few minutes the first time)" >&2
"$root/bin/builder" --config "$root/builder.yaml" >&2

"$bin" components >/dev/null
echo "$bin"
