#!/usr/bin/env bash
# The exported API stays small (issue 29): at most 600 names over the published
# packages (every non-internal package outside examples/, bench/ and cmd/, in
# every module of go.work) and at most 40 in gates. Prints each package's count;
# fails above a limit. `go run ./.ci/apicount -names DIR` lists a package's names.
set -euo pipefail
cd "$(dirname "$0")/.."
go run ./.ci/apicount -max all=600,gates=40
