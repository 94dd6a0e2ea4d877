#!/usr/bin/env bash
# Returning conversations with more histories than the KV pool holds (a measurement, not a
# test): CONVERSATIONS users, each with its own HISTORY-word history, take turns round-robin
# for ROUNDS rounds; every turn resends the user's history plus a new line. The pool
# (--kv-memory KV_MIB) holds fewer histories than there are users, so by the time a user
# returns the others have evicted their blocks. Run with the prefix cache's RAM tier off and
# on (--prefix-cache-ram RAM_MIB), same server flags otherwise, alternating; prints per setting
# the median and P95 of the server's TTFT (timings.latency.ttft_ms) over returning turns (the
# first round excluded), the mean restored / cached prompt tokens per turn, and the ratio.
# With Q8=1 a third setting keeps the tier's copies as Q8_0 (--prefix-cache-ram-q8, the same
# RAM_MIB): pick a RAM_MIB that holds about half the histories at F16 to see the capacity.
#
# The model is synthetic (make-model, llama layout, random weights) at a size whose prefill
# costs what a small real model's does on this machine; its answers are not read.
#
# Usage: scripts/bench-prefix-tier.sh
# Environment: LIFELINE (build/lifeline), DIM (512), LAYERS (8), CONVERSATIONS (8),
# HISTORY (600 words), ROUNDS (4), KV_MIB (32), RAM_MIB (512), Q8 (0), PORT (18951).
set -euo pipefail
cd "$(dirname "$0")/.."
LIFELINE=${LIFELINE:-build/lifeline}
DIM=${DIM:-512}
LAYERS=${LAYERS:-8}
CONVERSATIONS=${CONVERSATIONS:-8}
HISTORY=${HISTORY:-600}
ROUNDS=${ROUNDS:-4}
KV_MIB=${KV_MIB:-32}
RAM_MIB=${RAM_MIB:-512}
PORT=${PORT:-18951}
Q8=${Q8:-0}

work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2> /dev/null || true; wait "$pid" 2> /dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$LIFELINE" make-model --dim "$DIM" --layers "$LAYERS" --heads 8 --ffn $((DIM * 3)) \
  --type q8_0 --seed 3 --ctx 4096 -o "$work/m.gguf" > /dev/null

run() {  # run LABEL [extra serve flags...]
  local label=$1; shift
  "$LIFELINE" serve --model "m=$work/m.gguf" --threads 2 --kv-memory "$KV_MIB" -c 2048 \
    --prefix-cache-reserve-tokens 0 --port "$PORT" "$@" > "$work/serve-$label.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$PORT/ready" > /dev/null 2>&1 && break
    sleep 0.1
  done
  python3 - "$PORT" "$CONVERSATIONS" "$HISTORY" "$ROUNDS" "$label" > "$work/$label.json" <<'EOF'
import json, random, sys, urllib.request
port, users, words, rounds, label = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
vocab = "the a little dog ran to big tree and saw bird sing happy song under blue sky with friend cat".split()
hist = []
for u in range(users):
    rng = random.Random(u)
    hist.append(f"User {u} history:" + "".join(" " + rng.choice(vocab) for _ in range(words)))
turns = []
for r in range(rounds):
    for u in range(users):
        hist[u] += f" Turn {r} line."
        body = json.dumps({"model": "m", "prompt": hist[u], "max_tokens": 4, "temperature": 0}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body,
                                     {"Content-Type": "application/json"})
        t = json.load(urllib.request.urlopen(req, timeout=600))["timings"]
        turns.append({"round": r, "ttft_ms": t["latency"]["ttft_ms"], "prompt": t["tokens"]["prompt"],
                      "cached": t["tokens"]["cached"], "restored": t["tokens"].get("restored", 0)})
print(json.dumps(turns))
EOF
  kill "$pid"; wait "$pid" 2> /dev/null || true; pid=
}

# Alternating, twice each: off, on[, q8], off, on[, q8].
for i in 1 2; do
  run "off$i"
  run "on$i" --prefix-cache-ram "$RAM_MIB"
  if [ "$Q8" = 1 ]; then run "q8$i" --prefix-cache-ram "$RAM_MIB" --prefix-cache-ram-q8; fi
done

python3 - "$work" "$CONVERSATIONS" "$HISTORY" "$KV_MIB" "$RAM_MIB" "$Q8" <<'EOF'
import json, statistics, sys
work, users, words, kv, ram, q8 = sys.argv[1:7]
def load(prefix):
    turns = []
    for i in (1, 2):
        turns += [t for t in json.load(open(f"{work}/{prefix}{i}.json")) if t["round"] > 0]
    return turns
def p95(v):
    s = sorted(v); return s[max(0, -(-95 * len(s) // 100) - 1)]
rows = {}
print(f"## Returning turns: {users} conversations of ~{words} words, --kv-memory {kv} MiB, RAM tier {ram} MiB")
print()
print("| RAM tier | turns | prompt tokens (mean) | TTFT P50 ms | TTFT P95 ms | cached tokens (mean) | restored tokens (mean) |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
settings = [("off", "off"), ("on", "on")] + ([("on, Q8 copies", "q8")] if q8 == "1" else [])
for label, prefix in settings:
    t = load(prefix)
    ttft = [x["ttft_ms"] for x in t]
    rows[label] = (statistics.median(ttft), p95(ttft))
    mean = lambda k: sum(x[k] for x in t) / len(t)
    print(f"| {label} | {len(t)} | {mean('prompt'):.0f} | {rows[label][0]:.1f} | {rows[label][1]:.1f} | {mean('cached'):.0f} | {mean('restored'):.0f} |")
print()
print(f"TTFT P50 off/on: {rows['off'][0] / rows['on'][0]:.2f}x; P95 off/on: {rows['off'][1] / rows['on'][1]:.2f}x")
if q8 == "1":
    q = rows["on, Q8 copies"]
    print(f"TTFT P50 on/Q8: {rows['on'][0] / q[0]:.2f}x; P95 on/Q8: {rows['on'][1] / q[1]:.2f}x")
EOF
