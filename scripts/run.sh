#!/usr/bin/env bash
# The README's first command: install dependencies, build, and run the main job on a default
# model. Extra arguments are passed to `lifeline run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
MODEL="${LIFELINE_MODEL:-../shared/models/stories260K.gguf}"
if [ ! -f "$MODEL" ]; then
  # No shared model beside the checkout: make a small synthetic one once and cache it.
  CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/lifeline"
  MODEL="$CACHE/default-llama-q8_0.gguf"
  if [ ! -f "$MODEL" ]; then
    mkdir -p "$CACHE"
    echo "run: no model given; writing a synthetic default model to $MODEL"
    build/lifeline make-model --arch llama --dim 256 --layers 4 --heads 8 --kv-heads 2 \
      --ffn 768 --type q8_0 --seed 1 -o "$MODEL"
  fi
fi
if [ $# -eq 0 ]; then
  set -- -p "Once upon a time" -n 64
fi
exec build/lifeline run -m "$MODEL" "$@"
