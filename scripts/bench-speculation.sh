#!/usr/bin/env bash
# Speculative decoding benchmark (not a test): the same model served without speculation,
# with prompt lookup (`--speculate`) and with a draft model (`--draft`: the model's own
# re-quantization to BENCH_DRAFT_TYPE, made here with `lifeline quantize`), one server at a
# time on the same CPUs, the order rotated per round, each
# driven by a closed-loop `lifeline bench` at concurrency 1 (batch 1, where decode is bound by
# reading the weights and a verification pass of a few tokens costs about one decode step), on
# copy-heavy prompts: a passage followed by its own beginning, so the continuation repeats
# text the prompt holds. Greedy (temperature 0). Prints the median over rounds of output
# tokens/s, e2e and ITL P50 for each server, its ratio to the plain one, and the share of
# drafted tokens the model accepted (from /metrics). (Run side by side at once, two servers'
# speeds differed by up to 1.4x for reasons of their own: core sharing, interrupts.) Then, unless BENCH_VERIFY=0, the cost of a
# verification pass of k = 1..8 tokens against one decode step (`bench-model --verify-k`).
#
# Usage: scripts/bench-speculation.sh [MODEL.gguf ...]   (default: ../shared/models/
#        stories260K.gguf and the 110M-shape Q8_0 synthetic model of scripts/bench-slo.sh)
# Environment knobs (defaults in brackets):
#   BENCH_SPECULATE  drafted tokens per decode           [4]
#   BENCH_DRAFT_TYPE the draft model's type; "" = no draft-model server   [q4_0]
#   BENCH_DRAFT_ARGS more flags for the draft-model server (e.g. --spec-always)   []
#   BENCH_REQUESTS   requests per server and round       [16]
#   BENCH_ROUNDS     rounds (each runs both servers)     [3]
#   BENCH_OUTPUT     output tokens (ignore_eos)          [128]
#   BENCH_THREADS    compute threads per server          [1]
#   BENCH_VERIFY     1: also bench-model --verify-k       [1]
#   BENCH_RESULTS    results dir       [BUILD_DIR/bench-speculation/UTC-stamp]
#   BUILD_DIR        build dir holding `lifeline`        [build]
set -euo pipefail
cd "$(dirname "$0")/.."

SPECULATE="${BENCH_SPECULATE:-4}"
DRAFT_TYPE="${BENCH_DRAFT_TYPE-q4_0}"
read -r -a DRAFT_ARGS <<<"${BENCH_DRAFT_ARGS:-}"
REQUESTS="${BENCH_REQUESTS:-16}"
ROUNDS="${BENCH_ROUNDS:-3}"
OUTPUT_TOKENS="${BENCH_OUTPUT:-128}"
THREADS="${BENCH_THREADS:-1}"
VERIFY="${BENCH_VERIFY:-1}"
BUILD_DIR="${BUILD_DIR:-build}"
MODEL_DIR="${BENCH_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeline/bench-models}"
RESULTS="${BENCH_RESULTS:-$BUILD_DIR/bench-speculation/$(date -u +%Y%m%d-%H%M%S)}"
LIFELINE="$BUILD_DIR/lifeline"

die() { echo "bench-speculation: $*" >&2; exit 1; }
command -v python3 >/dev/null || die "python3 renders the tables; install it (apt-get install -y python3)"
command -v curl >/dev/null || die "curl reads /metrics; install it (apt-get install -y curl)"
if [ ! -x "$LIFELINE" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$BUILD_DIR" -j "${LIFELINE_JOBS:-2}" lifeline
fi
mkdir -p "$RESULTS" "$MODEL_DIR"

MODELS=("$@")
if [ ${#MODELS[@]} -eq 0 ]; then
  [ -f ../shared/models/stories260K.gguf ] && MODELS+=(../shared/models/stories260K.gguf)
  source scripts/bench-models.sh
  MODELS+=("$(bench_model "$LIFELINE" "$MODEL_DIR" 110m-q8_0)")
fi

# Copy-heavy prompts: a passage, a blank line, then the passage's first words again.
PROMPTS="$RESULTS/prompts.jsonl"
python3 - "$PROMPTS" <<'PY'
import json, sys
passages = [
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. One day, she saw a big red ball in the park. She ran to the ball and kicked it very high.",
    "Tom had a small dog named Max. Max liked to run and jump. Every morning Tom and Max went to the park to play with a stick. Max was happy and Tom was happy too.",
    "The cat sat on the mat. The cat was sleepy. The sun was warm and the mat was soft. The cat closed its eyes and had a nice long nap.",
    "Sara wanted to bake a cake for her mom. She got flour, eggs and sugar. She mixed them in a big bowl. Then she put the cake in the oven and waited.",
]
with open(sys.argv[1], "w") as f:
    for p in passages:
        words = p.split()
        f.write(json.dumps({"prompt": p + "\n\n" + " ".join(words[:6])}) + "\n")
PY

PIDS=()
stop_all() { for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; PIDS=(); }
trap stop_all EXIT
# Sets URL; called in this shell (not in $(...)) so stop_all knows the server's pid.
start() {  # log args...
  local log="$1"; shift
  local fifo="$log.fifo" line=""
  rm -f "$fifo"; mkfifo "$fifo"
  "$LIFELINE" serve --port 0 -t "$THREADS" "$@" >"$fifo" 2>"$log" &
  PIDS+=($!)
  read -r -t 120 line <"$fifo" || { cat "$log" >&2; die "serve did not start"; }
  rm -f "$fifo"
  URL="${line##*listening on }"
}
metric() {  # url name
  curl -sf "$1/metrics" | awk -v n="$2" '$1 ~ "^"n"({|$)" { s += $2 } END { print s + 0 }'
}

echo "bench-speculation: --speculate $SPECULATE, $REQUESTS requests, $OUTPUT_TOKENS tokens," \
     "$THREADS thread(s) per server; results in $RESULTS" >&2
for model in "${MODELS[@]}"; do
  name="$(basename "$model" .gguf)"
  out="$RESULTS/$name"
  mkdir -p "$out"
  pin=()
  [ "$(nproc)" -ge "$THREADS" ] && pin=(--cpus "0-$((THREADS - 1))")
  labels=(speculate plain)
  if [ -n "$DRAFT_TYPE" ]; then
    draft="$out/draft-$DRAFT_TYPE.gguf"
    "$LIFELINE" quantize --type "$DRAFT_TYPE" "$model" "$draft" >"$out/quantize.log" 2>&1 ||
      die "quantize to $DRAFT_TYPE failed on $model (see $out/quantize.log)"
    labels=(draft speculate plain)
  fi
  for round in $(seq 1 "$ROUNDS"); do
    # Rotate the order: each label runs first, middle and last in turn.
    order=()
    for i in "${!labels[@]}"; do order+=("${labels[$(((i + round) % ${#labels[@]}))]}"); done
    for label in "${order[@]}"; do
      args=(--model "m=$model" "${pin[@]}")
      [ "$label" = speculate ] && args+=(--speculate "$SPECULATE")
      [ "$label" = draft ] && args+=(--draft "$draft" --speculate "$SPECULATE" "${DRAFT_ARGS[@]}")
      start "$out/$label-$round.log" "${args[@]}"
      url="$URL"
      "$LIFELINE" bench --target "$url,model=m,label=$label" --concurrency 1 \
        --requests "$REQUESTS" --prompts "$PROMPTS" --output-len "$OUTPUT_TOKENS" --ignore-eos \
        --extra-body '{"temperature": 0}' --progress never --out "$out/$label-$round" >/dev/null ||
        die "bench failed on $model ($label, round $round)"
      {
        echo "drafted=$(metric "$url" lifeline_spec_drafted_tokens_total)"
        echo "accepted=$(metric "$url" lifeline_spec_accepted_tokens_total)"
      } >"$out/$label-$round/spec.txt"
      stop_all
    done
  done
  if [ "$VERIFY" = 1 ]; then
    "$LIFELINE" bench-model -m "$model" -p 0 -n 0 -r 5 -t "$THREADS" --no-bandwidth \
      --verify-k 1,2,3,4,6,8 --json >"$out/verify.json"
  fi
done

python3 - "$RESULTS" "$ROUNDS" "${MODELS[@]}" <<'PY'
import json, os, statistics, sys
results, rounds, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
lines = []
def emit(s=""):
    print(s); lines.append(s)
emit("| model | server | output tok/s (median of rounds) | each round | e2e P50 ms | ITL P50 ms | vs plain | drafted | accepted |")
emit("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
for model in models:
    name = os.path.basename(model)[:-5] if model.endswith(".gguf") else os.path.basename(model)
    out = os.path.join(results, name)
    med = {}
    for label in ("plain", "speculate", "draft"):
        if not os.path.exists(os.path.join(out, f"{label}-1")):
            continue
        runs = []
        drafted = accepted = 0.0
        for r in range(1, rounds + 1):
            d = os.path.join(out, f"{label}-{r}")
            s = json.load(open(os.path.join(d, "report.json")))["summaries"][0]
            runs.append(s)
            spec = dict(l.strip().split("=") for l in open(os.path.join(d, "spec.txt")))
            drafted += float(spec["drafted"]); accepted += float(spec["accepted"])
        tps = [s["output_tok_s"] for s in runs]
        med[label] = statistics.median(tps)
        ratio = f"{med[label] / med['plain']:.2f}x" if label != "plain" and med.get("plain") else ""
        acc = f"{accepted:.0f} ({100 * accepted / max(1.0, drafted):.0f} %)" if label != "plain" else ""
        emit(f"| {name} | {label} | {med[label]:.1f} | {', '.join(f'{t:.1f}' for t in tps)} | "
             f"{statistics.median(s['e2e_ms']['p50'] for s in runs):.0f} | "
             f"{statistics.median(s['itl_ms']['p50'] for s in runs):.2f} | {ratio} | "
             f"{f'{drafted:.0f}' if label != 'plain' else ''} | {acc} |")
    vpath = os.path.join(out, "verify.json")
    if os.path.exists(vpath):
        v = json.load(open(vpath)).get("verify", [])
        emit(f"\n{name}: verification pass of k tokens vs one decode step: " +
             ", ".join(f"k={c['k']} {c['median_ms']:.2f} ms ({c['vs_k1']:.2f}x)" for c in v) + "\n")
open(os.path.join(results, "summary.md"), "w").write("\n".join(lines) + "\n")
PY
