#!/usr/bin/env bash
# Engine benchmark (not a test): makes the synthetic benchmark models once (110M and
# TinyLlama-1.1B shapes) and runs `lifeline bench-model` on each, printing llama-bench-style
# tables with the memory-bandwidth roofline. Usage: scripts/bench-engine.sh [MODEL_DIR] [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeline/bench-models}"
REPS="${2:-5}"
mkdir -p "$DIR"
make_model() {  # name dim layers heads kv_heads ffn type
  local out="$DIR/$1-$7.gguf"
  [ -f "$out" ] || build/lifeline make-model --arch llama --dim "$2" --layers "$3" --heads "$4" \
    --kv-heads "$5" --ffn "$6" --type "$7" --seed 1 -o "$out" >&2
  echo "$out"
}
MODELS=(
  "$(make_model 110m 768 12 12 12 2048 q8_0)"
  "$(make_model 110m 768 12 12 12 2048 q4_0)"
  "$(make_model 1.1b 2048 22 32 4 5632 q4_0)"
  "$(make_model 1.1b 2048 22 32 4 5632 q4_k_m)"
  "$(make_model 1.1b 2048 22 32 4 5632 q8_0)"
)
for m in "${MODELS[@]}"; do
  build/lifeline bench-model -m "$m" -p 512 -n 128 -r "$REPS" -t "${LIFELINE_THREADS:-2}"
  echo
done
