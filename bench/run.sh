#!/usr/bin/env bash
# Benchmark programs that are not Go benchmarks, run by `make bench` after `go test -bench`.
# Each prints its own summary; see docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bench/ingest/run.sh
