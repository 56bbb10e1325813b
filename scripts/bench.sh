#!/usr/bin/env bash
# Runs every benchmark once and prints the summary lines benchmarks emit
# ("BENCH ..." and "RATIO ..."). The full output is kept in /tmp/bench.out.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

go test -run '^$' -bench . -count=1 ./... 2>&1 | tee /tmp/bench.out
echo
echo "== summary =="
grep -E '^(BENCH|RATIO) ' /tmp/bench.out || echo "(no BENCH/RATIO lines)"
