#!/usr/bin/env bash
# Thinking-budget sweep and overload run (a measurement, not a test): what the thinking budget
# costs in time to the first answer token, and whether the thinking rung holds a TTFA target
# under overload without truncating answers.
#
# The model is a random llama on Qwen's real vocabulary (make-model --vocab-from), served with
# DeepSeek R1's real chat template, whose generation prompt opens "<think>": it never closes
# its thinking by itself, so every request thinks exactly its budget and the budget alone sets
# TTFA -- the shape of an R1 distill at a chosen per-token cost.
#
#   1. sweep: for each budget in BUDGETS, `lifeline bench --api chat --thinking-budget B` at a
#      light rate; prints TTFT and TTFA P50/P95 per budget (TTFT stays, TTFA grows ~ linearly).
#   2. overload: a class with ttfa_p95_ms = TTFA_TARGET_MS, requests asking a budget of
#      OVERLOAD_BUDGET at RATE req/s, first with the thinking rung off (min_thinking_scale = 1,
#      so the ladder truncates answers instead) and then on; prints TTFA P95, how many answers
#      were truncated (finish_reason "length" before the budget's answer) and the rung's moves.
#
# Usage: scripts/bench-thinking.sh
# Environment: LIFELINE (binary, build/lifeline), DIM (256), LAYERS (4), BUDGETS ("0 16 64
# 256"), REQUESTS (20), RATE (overload req/s, 6), OVERLOAD_BUDGET (128), TTFA_TARGET_MS (1000),
# DURATION (overload seconds, 30), PORT (18941).
set -euo pipefail
cd "$(dirname "$0")/.."
LIFELINE=${LIFELINE:-build/lifeline}
SHARED=${SHARED:-../shared}
DIM=${DIM:-256}
LAYERS=${LAYERS:-4}
BUDGETS=${BUDGETS:-"0 16 64 256"}
REQUESTS=${REQUESTS:-20}
RATE=${RATE:-6}
OVERLOAD_BUDGET=${OVERLOAD_BUDGET:-128}
TTFA_TARGET_MS=${TTFA_TARGET_MS:-1000}
DURATION=${DURATION:-30}
PORT=${PORT:-18941}
TEMPLATE=tests/template/data/templates/deepseek-r1-distill-llama-8b.jinja

work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$LIFELINE" make-model --dim "$DIM" --layers "$LAYERS" --heads 4 --ffn $((DIM * 3)) --tied \
  --type f16 --seed 5 --ctx 4096 --vocab-from "$SHARED/reference/tokenizer/ggml-vocab-qwen2.gguf" \
  -o "$work/r1.gguf" > /dev/null

serve() {  # serve [extra serve flags...]
  "$LIFELINE" serve --model "r1=$work/r1.gguf" --chat-template-file "$TEMPLATE" --threads 1 \
    --port "$PORT" "$@" > "$work/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$PORT/ready" > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server did not become ready:" >&2
  cat "$work/serve.log" >&2
  exit 1
}
stop() {
  kill "$pid" 2> /dev/null || true
  wait "$pid" 2> /dev/null || true
  pid=
}

echo "## Thinking budget sweep (dim $DIM, $LAYERS layers, Qwen2 vocabulary, 1 thread, $REQUESTS requests at 1 req/s)"
echo
echo "| budget tokens | TTFT P50 ms | TTFT P95 ms | TTFA P50 ms | TTFA P95 ms | reasoning tokens (mean) |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
serve
for b in $BUDGETS; do
  out="$work/sweep-$b"
  "$LIFELINE" bench --target "http://127.0.0.1:$PORT,model=r1" --api chat --thinking-budget "$b" \
    --output-len $((b + 16)) --rate 1 --requests "$REQUESTS" --seed 1 --slo-metric ttfa \
    --extra-body '{"temperature":0}' --progress never --out "$out" > /dev/null
  python3 - "$out/report.json" "$b" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["summaries"][0]
reqs = [q for q in r["requests"] if q["error"] is None]
toks = [((q.get("server_timings") or {}).get("lifeline") or {}).get("reasoning", {}).get("tokens", 0) for q in reqs]
mean = sum(toks) / len(toks) if toks else float("nan")
f = lambda v: "-" if v is None else f"{v:.1f}"
print(f"| {sys.argv[2]} | {f(s['ttft_ms']['p50'])} | {f(s['ttft_ms']['p95'])} | {f(s['ttfa_ms']['p50'])} | {f(s['ttfa_ms']['p95'])} | {mean:.1f} |")
EOF
done
stop

echo
echo "## Overload: $RATE req/s for $DURATION s, budget $OVERLOAD_BUDGET asked, TTFA target $TTFA_TARGET_MS ms"
echo
echo "| thinking rung | TTFA P95 ms | e2e P95 ms | ok | 429/503 | answers truncated | thinking cuts | level max |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for rung in off on; do
  min_scale=0.125
  [ "$rung" = off ] && min_scale=1
  cat > "$work/slo.toml" <<EOF
default_class = "think"
use_presets = false

[classes.think]
ttft_p95_ms = $TTFA_TARGET_MS
ttfa_p95_ms = $TTFA_TARGET_MS
max_level = 1

[ladder]
min_thinking_scale = $min_scale
EOF
  serve --config "$work/slo.toml"
  out="$work/overload-$rung"
  "$LIFELINE" bench --target "http://127.0.0.1:$PORT,model=r1" --api chat \
    --thinking-budget "$OVERLOAD_BUDGET" --output-len $((OVERLOAD_BUDGET + 32)) --rate "$RATE" \
    --duration "$DURATION" --seed 2 --slo-metric ttfa --threshold-ms "$TTFA_TARGET_MS" \
    --no-early-stop --extra-body '{"temperature":0}' --progress never --out "$out" > /dev/null 2>&1 || true
  curl -s "http://127.0.0.1:$PORT/v1/slo" > "$work/slo-$rung.json"
  stop
  python3 - "$out/report.json" "$work/slo-$rung.json" "$rung" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
slo = json.load(open(sys.argv[2]))
s = r["summaries"][0]
reqs = r["requests"]
ok = [q for q in reqs if q["error"] is None]
refused = sum(1 for q in reqs if q["status"] in (429, 503))
# An answer was truncated when the ladder capped max_tokens (timings.lifeline.truncated) or
# it ended by length before its answer could follow its thinking.
def truncated(q):
    life = (q.get("server_timings") or {}).get("lifeline") or {}
    return bool(life.get("truncated"))
cuts = sum(1 for c in slo.get("thinking_changes", []) if c["to"] < c["from"])
level = max((e["to_level"] for e in slo.get("events", [])), default=0)
f = lambda v: "-" if v is None else f"{v:.1f}"
print(f"| {sys.argv[3]} | {f(s['ttfa_ms']['p95'])} | {f(s['e2e_ms']['p95'])} | {len(ok)} | {refused} | {sum(map(truncated, ok))} | {cuts} | {level} |")
EOF
done
