#!/usr/bin/env bash
# The search scenario beside chat (a measurement, not a test): one server holds an embedder,
# a reranker and a chat model (synthetic, make-model, qwen3 / llama layout, DIM x LAYERS,
# Q8_0). Prints, from `lifeline bench` reports:
#   1. embeddings at batch 1 and at 32 concurrent clients under a class that queues (bulk:
#      30 s), inputs/s and P50 / P95 -- the engine's capacity;
#   2. search-embed (50 ms) and search-rerank (150 ms) at an open-loop RATE, alone and then
#      beside CHAT_USERS closed-loop chat users (64-token answers): served, refused (429) and
#      the served requests' P95 -- whether a chat load pushes search past its budget.
# A refusal is the SLO plane keeping the budget (docs/slo.md); compare served P95 with the
# class target and the refused share between the two runs.
#
# Usage: scripts/bench-search.sh
# Environment: LIFELINE (build/lifeline), DIM (768), LAYERS (12), RATE (5), REQUESTS (150),
# CHAT_USERS (4), THREADS (2), PORT (18961).
set -euo pipefail
cd "$(dirname "$0")/.."
LIFELINE=${LIFELINE:-build/lifeline}
DIM=${DIM:-768}
LAYERS=${LAYERS:-12}
RATE=${RATE:-5}
REQUESTS=${REQUESTS:-150}
CHAT_USERS=${CHAT_USERS:-4}
THREADS=${THREADS:-2}
PORT=${PORT:-18961}
HEADS=$((DIM / 64))
work=$(mktemp -d)
server=""
cleanup() {
  [[ -n "$server" ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

make_model() {  # file arch extra...
  local file=$1 arch=$2
  shift 2
  "$LIFELINE" make-model --arch "$arch" --dim "$DIM" --layers "$LAYERS" --heads "$HEADS" \
    --kv-heads $((HEADS / 3 > 0 ? HEADS / 3 : 1)) --ffn $((DIM * 8 / 3 / 64 * 64)) --vocab 32000 \
    --ctx 2048 --type q8_0 --seed 21 "$@" -o "$file" >/dev/null
}
make_model "$work/emb.gguf" qwen3 --pooling last
make_model "$work/rr.gguf" qwen3 --pooling rank --rerank-outputs 2 \
  --rerank-template '<|im_start|>query: {query} document: {document}<|im_end|>'
make_model "$work/chat.gguf" llama
printf '[classes.bulk]\nttft_p95_ms = 30000\n' >"$work/slo.toml"

"$LIFELINE" serve --port "$PORT" -t "$THREADS" --config "$work/slo.toml" \
  --model "emb=$work/emb.gguf" --model "rr=$work/rr.gguf" --model "chat=$work/chat.gguf" \
  >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 1 120); do
  grep -q "listening on" "$work/serve.log" && break
  sleep 0.5
done
url="http://127.0.0.1:$PORT"

summary() {  # label report-dir
  python3 - "$1" "$2/report.json" <<'EOF'
import json, sys
label, path = sys.argv[1], sys.argv[2]
s = json.load(open(path))["summaries"][0]
e = s["e2e_ms"]
rate = s.get("inputs_per_s") or s.get("documents_per_s") or s["throughput_rps"]
p = lambda v: "-" if v is None else "%.1f" % v
print(f"{label:44s} served {s['ok']:4d}  refused {s['http_429']:4d}  items/s {rate:6.1f}  "
      f"P50 {p(e['p50'])} ms  P95 {p(e['p95'])} ms")
EOF
}
bench() {  # label out args...
  local label=$1 out=$2
  shift 2
  "$LIFELINE" bench --progress never --out "$out" "$@" >/dev/null 2>&1 || true
  summary "$label" "$out"
}

echo "# capacity (class bulk: queues instead of refusing)"
bench "embeddings, 1 client" "$work/c1" --target "$url,model=emb" --api embeddings \
  --prompt-len 16 --concurrency 1 --requests 200 --slo-class bulk
bench "embeddings, 32 clients" "$work/c32" --target "$url,model=emb" --api embeddings \
  --prompt-len 16 --concurrency 32 --requests 300 --slo-class bulk
bench "rerank 8 docs x 64 words, 1 client" "$work/r1" --target "$url,model=rr" --api rerank \
  --prompt-len 8 --documents 8 --document-words 64 --concurrency 1 --requests 30 --slo-class bulk

echo "# search classes at $RATE req/s, alone"
bench "search-embed alone" "$work/ea" --target "$url,model=emb" --api embeddings \
  --prompt-len 16 --rate "$RATE" --requests "$REQUESTS"
bench "search-rerank (4 docs) alone" "$work/ra" --target "$url,model=rr" --api rerank \
  --prompt-len 8 --documents 4 --document-words 32 --rate 1 --requests 30

echo "# the same beside $CHAT_USERS chat users"
"$LIFELINE" bench --progress never --out "$work/chat" --target "$url,model=chat" --api chat \
  --prompt-len 64 --output-len 64 --concurrency "$CHAT_USERS" --duration 120 \
  --requests 100000 >/dev/null 2>&1 &
chat=$!
sleep 3
bench "search-embed beside chat" "$work/eb" --target "$url,model=emb" --api embeddings \
  --prompt-len 16 --rate "$RATE" --requests "$REQUESTS"
bench "search-rerank (4 docs) beside chat" "$work/rb" --target "$url,model=rr" --api rerank \
  --prompt-len 8 --documents 4 --document-words 32 --rate 1 --requests 30
kill "$chat" 2>/dev/null || true
wait "$chat" 2>/dev/null || true
