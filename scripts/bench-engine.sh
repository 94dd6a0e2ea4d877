#!/usr/bin/env bash
# Engine benchmark (not a test): makes the synthetic benchmark models once (110M and
# TinyLlama-1.1B shapes) and runs `lifeline bench-model` on each, printing llama-bench-style
# tables with the memory-bandwidth roofline. Usage: scripts/bench-engine.sh [MODEL_DIR] [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeline/bench-models}"
REPS="${2:-5}"
source scripts/bench-models.sh
mapfile -t MODELS < <(bench_models build/lifeline "$DIR")
for m in "${MODELS[@]}"; do
  build/lifeline bench-model -m "$m" -p 512 -n 128 -r "$REPS" -t "${LIFELINE_THREADS:-2}"
  echo
done
