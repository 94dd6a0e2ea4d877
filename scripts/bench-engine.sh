#!/usr/bin/env bash
# Engine benchmark (not a test): makes the synthetic benchmark models once (110M, and the
# TinyLlama-1.1B shape in every weight type: scripts/bench-models.sh) and runs `lifeline
# bench-model` on each, printing llama-bench-style tables with the memory-bandwidth roofline
# (the bandwidth sampled beside every generation run, and each run's share against its own
# samples). Usage: scripts/bench-engine.sh [MODEL_DIR] [REPS] [TYPES]
#   TYPES: comma-separated 1.1B file types (default: all; e.g. q4_0,q4_k_m,q8_0).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeline/bench-models}"
REPS="${2:-5}"
source scripts/bench-models.sh
TYPES="${3:-$BENCH_TYPES_ALL}"
mapfile -t MODELS < <(bench_models build/lifeline "$DIR" "$TYPES")
for m in "${MODELS[@]}"; do
  build/lifeline bench-model -m "$m" -p 512 -n 128 -r "$REPS" -t "${LIFELINE_THREADS:-2}"
  echo
done
