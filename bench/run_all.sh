#!/usr/bin/env bash
# Run all benchmarks and write results/bench/embed_throughput.{md,json}; see bench/README.md.
# bench/run_all.py pauses the biLM training job (runs/bilm/train.pid) per measurement; this trap
# makes sure it is resumed whatever happens to the Python driver.
set -euo pipefail
cd "$(dirname "$0")/.."
PID_FILE=runs/bilm/train.pid
resume() { if [ -f "$PID_FILE" ]; then kill -CONT "$(cat "$PID_FILE")" 2>/dev/null || true; fi; }
trap resume EXIT INT TERM HUP
python bench/peer_allennlp.py --setup-only
python bench/run_all.py "$@"
