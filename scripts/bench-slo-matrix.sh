#!/usr/bin/env bash
# The SLO workload matrix (a benchmark, not a test): named workloads, each at about 0.5x, 1x,
# 2x and 4x its measured capacity, against `lifeline serve` with DEFAULT settings (no SLO
# config file: the interactive class, 387 ms TTFT P95, the default controller and ladder).
# Prints per workload and rate: admitted TTFT P50/P95/P99/max, e2e P95, goodput and smooth
# goodput (refused and failed requests count against it), shed / routed / truncated / late
# shares, time at each ladder level, recovery time after the load stops, and a verdict per
# target (docs/performance.md, "The SLO workload matrix"). Writes every report and a summary.
#
# Workloads:
#   short        ~80-token prompts, 32-token answers, one model, Poisson arrivals
#   long         ~80-token prompts, 300-token answers, --cascade heavy,light, Poisson
#   bursty       as short, gamma arrivals (--burstiness 0.25: coefficient of variation 2)
#   two-classes  as short, half the rate in class interactive (387 ms) and half in
#                customer-service (220 ms), at once
#   multi-turn   chats sharing a ~250-token history prefix (prefix cache), 32-token answers
#   conversations  growing chats (`lifeline bench --conversations`): rate x 2 s users, each
#                  turn sent 2 s after its previous answer, resending the shared system text,
#                  the user's earlier turns and replies, and a new 20-word line; 32-token answers
#   two-models   heavy at the rate, a second model (light) beside it at 0.5x its own capacity;
#                light's figures alone are measured once for the isolation check
#
# Usage: scripts/bench-slo-matrix.sh
# Environment knobs (defaults in brackets):
#   MATRIX_WORKLOADS  comma list of workloads                      [all seven above]
#   MATRIX_FACTORS    rates as multiples of the capacity           [0.5,1,2,4]
#   MATRIX_DURATION   seconds of load per step                     [20]
#   MATRIX_THREADS    serve -t                                     [2]
#   MATRIX_SEED       arrivals and prompts                         [1]
#   MATRIX_CAPACITY   skip the capacity runs: "short=R,long=R,light=R" in req/s  []
#   MATRIX_RESULTS    results dir                  [BUILD_DIR/bench-slo-matrix/UTC-stamp]
#   MATRIX_MODELS     model cache dir   [${XDG_CACHE_HOME:-~/.cache}/lifeline/bench-models]
#   BUILD_DIR         build dir holding `lifeline`                 [build]
# Quick look: MATRIX_WORKLOADS=short MATRIX_FACTORS=1,4 MATRIX_DURATION=10 scripts/bench-slo-matrix.sh
#
# Method. Every step starts a fresh server (no window or ladder level carries over) and warms
# both engines with a few requests in a class of their own. Capacity is the completion rate of
# a closed loop of 8 concurrent clients for 15 s on a fresh server (short answers, long
# answers, and the light model alone), the throughput the server sustains when it is never
# idle. After each step the script reads /v1/slo (ladder events -> time per level), /metrics
# (outcome counters), then polls /v1/slo every 100 ms until every ladder is back at normal:
# the recovery time after the load stopped (the bench waits for its last response, so the
# queue is empty then).
set -euo pipefail
cd "$(dirname "$0")/.."

WORKLOADS="${MATRIX_WORKLOADS:-short,long,bursty,two-classes,multi-turn,conversations,two-models}"
FACTORS="${MATRIX_FACTORS:-0.5,1,2,4}"
DURATION="${MATRIX_DURATION:-20}"
THREADS="${MATRIX_THREADS:-2}"
SEED="${MATRIX_SEED:-1}"
BUILD_DIR="${BUILD_DIR:-build}"
MODEL_DIR="${MATRIX_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeline/bench-models}"
RESULTS="${MATRIX_RESULTS:-$BUILD_DIR/bench-slo-matrix/$(date -u +%Y%m%d-%H%M%S)}"
LIFELINE="$BUILD_DIR/lifeline"

for tool in python3 curl; do
  command -v "$tool" >/dev/null || {
    echo "bench-slo-matrix: $tool is needed; install it first (Debian: apt-get install -y $tool)" >&2
    exit 1
  }
done
BENCH_NAME=bench-slo-matrix
# shellcheck source=scripts/bench-slo-common.sh
. scripts/bench-slo-common.sh
mkdir -p "$RESULTS"

# Chats sharing a long history: one prompt per line (JSONL), the same ~250-token opening.
CHATS="$RESULTS/multi-turn-prompts.jsonl"
python3 - "$CHATS" "$SEED" <<'PY'
import json, random, sys
path, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
words = ("the cat sat on a warm mat and looked at the garden where a small dog ran after "
         "a red ball while the sun went down over the quiet town").split()
history = " ".join(rng.choice(words) for _ in range(160))
with open(path, "w") as f:
    for i in range(400):
        turn = " ".join(rng.choice(words) for _ in range(12))
        f.write(json.dumps({"prompt": f"{history}\nUser {i}: {turn}\nAssistant:"}) + "\n")
PY

SERVER_PID=""
URL=""
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
  fi
}
trap stop_server EXIT

# Capacity runs only: a class no budget limits (no admission, no ladder), so the closed loop
# measures what the engine sustains. Every matrix step runs with the default settings.
CAP_CONFIG="$RESULTS/capacity.toml"
cat >"$CAP_CONFIG" <<'TOML'
[classes.bulk]
ttft_p95_ms = 3600000
max_level = 0
[admission]
predictive = false
TOML

start_server() {  # logfile cascade(yes|no) [extra serve args...]
  local log="$1" cascade=()
  [ "$2" = yes ] && cascade=(--cascade heavy,light)
  shift 2
  local fifo="$RESULTS/.serve-stdout"
  rm -f "$fifo"; mkfifo "$fifo"
  "$LIFELINE" serve --port 0 -t "$THREADS" --model "heavy=$HEAVY" --model "light=$LIGHT" \
    "${cascade[@]}" "$@" >"$fifo" 2>"$log" &
  SERVER_PID=$!
  local line=""
  if ! read -r -t 120 line <"$fifo"; then
    echo "bench-slo-matrix: serve did not start; its log:" >&2; cat "$log" >&2; exit 1
  fi
  rm -f "$fifo"
  URL="${line##*listening on }"
  case "$URL" in http://*) ;; *) echo "bench-slo-matrix: unexpected serve line '$line'" >&2; exit 1 ;; esac
  # Warm both engines (first-touch of weights) outside the measured classes (an idle model
  # admits them whatever their budget).
  local m i
  for m in heavy light; do
    for i in 1 2 3; do
      curl -sf -o /dev/null "$URL/v1/completions" -H 'Content-Type: application/json' \
        -H 'X-SLO-Class: asr' \
        -d "{\"model\":\"$m\",\"prompt\":\"warm $i $m\",\"max_tokens\":4,\"ignore_eos\":true}" || true
    done
  done
}

bench() {  # out model rate output-len class budget-ms seed [extra args...]
  local out="$1" model="$2" rate="$3" outlen="$4" cls="$5" budget="$6" seed="$7"
  shift 7
  "$LIFELINE" bench --target "$URL,model=$model,label=$model" --rate "$rate" \
    --duration "$DURATION" --seed "$seed" --prompt-len 50 --output-len "$outlen" --ignore-eos \
    --slo-class "$cls" --threshold-ms "$budget" --no-early-stop --timeout 120 --progress never \
    --out "$out" "$@" >/dev/null 2>"$out.stderr" || {
      echo "bench-slo-matrix: bench failed ($out); see $out.stderr" >&2; return 1; }
}

# Reads /v1/slo and /metrics after a step, then times the return of every ladder to normal.
after_step() {  # dir
  local dir="$1" t0 n=0
  curl -sf "$URL/v1/slo" >"$dir/slo.json" || echo '{}' >"$dir/slo.json"
  curl -sf "$URL/metrics" >"$dir/metrics.txt" || : >"$dir/metrics.txt"
  t0=$(date +%s.%N)
  while [ $n -lt 300 ]; do
    if curl -sf "$URL/v1/slo" | python3 -c '
import json, sys
j = json.load(sys.stdin)
sys.exit(0 if all(l["level"] == 0 for c in j["classes"] for l in c.get("ladders", [])) else 1)'; then
      break
    fi
    sleep 0.1; n=$((n + 1))
  done
  python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" \
    "$t0" "$(date +%s.%N)" >"$dir/recovery_s.txt"
  [ $n -lt 300 ] || echo "30+" >"$dir/recovery_s.txt"
}

# Capacity: completions/s of 8 closed-loop clients for 15 s on a fresh server.
capacity() {  # name model output-len
  local dir="$RESULTS/capacity-$1"
  mkdir -p "$dir"
  start_server "$dir/serve.log" no --config "$CAP_CONFIG"
  "$LIFELINE" bench --target "$URL,model=$2,label=$2" --concurrency 8 --duration 15 \
    --seed "$SEED" --prompt-len 50 --output-len "$3" --ignore-eos --slo-class bulk \
    --no-early-stop --timeout 120 --progress never --out "$dir" >/dev/null 2>"$dir/stderr"
  stop_server
  python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["summaries"][0]["throughput_rps"])' \
    "$dir/report.json"
}
declare -A CAP
if [ -n "${MATRIX_CAPACITY:-}" ]; then
  IFS=',' read -r -a kv <<<"$MATRIX_CAPACITY"
  for p in "${kv[@]}"; do CAP[${p%%=*}]="${p#*=}"; done
fi
need_cap() {  # name model output-len
  [ -n "${CAP[$1]:-}" ] || { echo "bench-slo-matrix: measuring capacity '$1'" >&2; CAP[$1]="$(capacity "$1" "$2" "$3")"; }
}

echo "bench-slo-matrix: workloads $WORKLOADS, factors $FACTORS, $DURATION s per step, $THREADS" \
     "threads; results in $RESULTS; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
{
  echo "start_utc=$(date -u +%FT%TZ)"; echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "workloads=$WORKLOADS"; echo "factors=$FACTORS"; echo "duration_s=$DURATION"
  echo "threads=$THREADS"; echo "seed=$SEED"; echo "heavy=$HEAVY"; echo "light=$LIGHT"
  git rev-parse HEAD 2>/dev/null | sed 's/^/commit=/'
} >"$RESULTS/run.txt"

IFS=',' read -r -a WL <<<"$WORKLOADS"
IFS=',' read -r -a FL <<<"$FACTORS"
for w in "${WL[@]}"; do
  case "$w" in
    long) need_cap long heavy 300 ;;
    two-models) need_cap short heavy 32; need_cap light light 32 ;;
    short|bursty|two-classes|multi-turn|conversations) need_cap short heavy 32 ;;
    *) echo "bench-slo-matrix: unknown workload '$w'" >&2; exit 2 ;;
  esac
done
for k in "${!CAP[@]}"; do echo "capacity_$k=${CAP[$k]}" >>"$RESULTS/run.txt"; done

if [[ ",$WORKLOADS," == *",two-models,"* ]]; then
  # Light alone at 0.5x its capacity: the isolation baseline.
  dir="$RESULTS/two-models/light-alone"; mkdir -p "$dir"
  start_server "$dir/serve.log" no
  lrate=$(python3 -c "print('%.2f' % (0.5 * ${CAP[light]}))")
  bench "$dir" light "$lrate" 32 interactive 387 "$SEED"
  after_step "$dir"
  stop_server
fi

for w in "${WL[@]}"; do
  for f in "${FL[@]}"; do
    dir="$RESULTS/$w/x$f"; mkdir -p "$dir"
    cap="${CAP[short]:-}"; [ "$w" = long ] && cap="${CAP[long]}"
    rate=$(python3 -c "print('%.2f' % ($f * $cap))")
    echo "bench-slo-matrix: $w at ${f}x = $rate req/s" >&2
    echo "$rate" >"$dir/rate.txt"
    case "$w" in
      short) start_server "$dir/serve.log" no; bench "$dir" heavy "$rate" 32 interactive 387 "$SEED" ;;
      bursty) start_server "$dir/serve.log" no
              bench "$dir" heavy "$rate" 32 interactive 387 "$SEED" --burstiness 0.25 ;;
      long) start_server "$dir/serve.log" yes
            bench "$dir" heavy "$rate" 300 interactive 387 "$SEED" --api chat ;;
      multi-turn) start_server "$dir/serve.log" no
                  bench "$dir" heavy "$rate" 32 interactive 387 "$SEED" --prompts "$CHATS" ;;
      conversations)
        # Closed loop: the load is the users; rate x think time of them offer about `rate`.
        start_server "$dir/serve.log" no
        users=$(python3 -c "print(max(1, round($rate * 2)))")
        turns=$(python3 -c "print(max($users, int($rate * $DURATION)))")
        "$LIFELINE" bench --target "$URL,model=heavy,label=heavy" --api chat \
          --conversations "$users" --think-time-ms 2000 --requests "$turns" --seed "$SEED" \
          --prompt-len 20 --output-len 32 --ignore-eos --slo-class interactive --threshold-ms 387 \
          --no-early-stop --timeout 120 --progress never --out "$dir" >/dev/null 2>"$dir.stderr" || {
            echo "bench-slo-matrix: bench failed ($dir); see $dir.stderr" >&2; exit 1; } ;;
      two-classes)
        start_server "$dir/serve.log" no
        half=$(python3 -c "print('%.2f' % ($rate / 2))")
        mkdir -p "$dir/interactive" "$dir/customer-service"
        bench "$dir/interactive" heavy "$half" 32 interactive 387 "$SEED" &
        b1=$!
        bench "$dir/customer-service" heavy "$half" 32 customer-service 220 $((SEED + 1)) &
        b2=$!
        wait $b1; wait $b2 ;;
      two-models)
        start_server "$dir/serve.log" no
        lrate=$(python3 -c "print('%.2f' % (0.5 * ${CAP[light]}))")
        mkdir -p "$dir/heavy" "$dir/light"
        bench "$dir/heavy" heavy "$rate" 32 interactive 387 "$SEED" &
        b1=$!
        bench "$dir/light" light "$lrate" 32 interactive 387 $((SEED + 1)) &
        b2=$!
        wait $b1; wait $b2 ;;
    esac
    after_step "$dir"
    stop_server
  done
done
echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$RESULTS/run.txt"

python3 scripts/slo_matrix_report.py "$RESULTS" "$WORKLOADS" "$FACTORS"
