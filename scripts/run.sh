#!/usr/bin/env bash
# The README's first command: install dependencies, build, and start `lifeline serve` on
# 127.0.0.1:8080 with a default model. Extra arguments go to `lifeline serve`.
#   default model: ../shared/models/stories260K.gguf when it sits beside the checkout,
#   else LIFELINE_MODEL, else the server's built-in synthetic model (written once to
#   ~/.cache/lifeline/ and announced in the log).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Only the server: the test targets are the test command's (they doubled a first start).
LIFELINE_BUILD_TARGETS=lifeline scripts/build.sh
ARGS=()
MODEL="${LIFELINE_MODEL:-}"
if [ -z "$MODEL" ] && [ -f ../shared/models/stories260K.gguf ]; then
  MODEL=../shared/models/stories260K.gguf
fi
[ -n "$MODEL" ] && ARGS+=(--model "$(basename "$MODEL" .gguf)=$MODEL")
cat >&2 <<'MSG'
run: try it from another shell:
  curl -s localhost:8080/v1/completions -H 'Content-Type: application/json' \
       -d '{"prompt":"Once upon a time","max_tokens":32,"temperature":0}'
MSG
exec build/lifeline serve "${ARGS[@]}" "$@"
