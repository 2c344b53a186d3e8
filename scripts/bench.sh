#!/usr/bin/env bash
# Runs the comparative benchmarks (bench/cmd/lockbench) and regenerates
# BENCHMARKS.md and bench/handoff.svg. The benchmark starts and stops its own
# redis-server processes on free loopback ports; it needs redis-server on
# PATH. Extra arguments go to lockbench, e.g. scripts/bench.sh -quick, or
# scripts/bench.sh -reps 3 -duration 2s.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! command -v redis-server >/dev/null 2>&1; then
  echo "bench: redis-server not found; run scripts/install-deps.sh (or make deps) first" >&2
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  echo "bench: the go command is not on PATH" >&2
  exit 1
fi

cd "$root/bench"
# Raw figures of every repetition go to bench/results/ (not committed).
exec go run ./cmd/lockbench -out ../BENCHMARKS.md -json results/latest.json "$@"
