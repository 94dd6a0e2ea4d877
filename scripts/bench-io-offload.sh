#!/usr/bin/env bash
# /health latency while requests whose cost grows with their size are being prepared (a
# benchmark, not a test). Starts `lifeline serve` on the test model and times GET /health with
# curl, one request after another:
#
#   idle       nothing else runs (the baseline)
#   schema     while a chat request with a large json_schema (BENCH_PROPERTIES required string
#              properties, about 180 KB for 5,000) is parsed and compiled: BENCH_SCHEMA_REQUESTS
#              of them, one after another (each ends 400 when the schema passes the grammar
#              limits, or generates)
#   tokenize   while POST /tokenize bodies of BENCH_TOKENIZE_BYTES of text are tokenized,
#              BENCH_TOKENIZE_REQUESTS of them, one after another
#
# For each phase: the number of /health samples, their median, p90 and max in ms (curl's
# time_total: connect to last byte, on a fresh connection each), and the load requests'
# statuses and durations. docs/reliability.md states the promise these numbers go with
# (/health within 50 ms while such work runs) and the test that holds it.
#
# Usage: scripts/bench-io-offload.sh [MODEL.gguf [serve flags...]]
#        (default ../shared/models/stories260K.gguf; e.g. ... MODEL --prep-threads 1)
# Environment knobs (defaults in brackets):
#   LIFELINE                the binary                                  [build/lifeline]
#   BENCH_PROPERTIES        required properties in the schema           [5000]
#   BENCH_SCHEMA_REQUESTS   schema requests in the schema phase         [10]
#   BENCH_TOKENIZE_BYTES    text bytes per /tokenize body               [1000000]
#   BENCH_TOKENIZE_REQUESTS /tokenize requests in the tokenize phase    [10]
#   BENCH_IDLE_SAMPLES      /health samples in the idle phase           [200]
set -euo pipefail
cd "$(dirname "$0")/.."

LIFELINE="${LIFELINE:-build/lifeline}"
MODEL="${1:-../shared/models/stories260K.gguf}"
[ $# -gt 0 ] && shift
PROPERTIES="${BENCH_PROPERTIES:-5000}"
SCHEMA_REQUESTS="${BENCH_SCHEMA_REQUESTS:-10}"
TOKENIZE_BYTES="${BENCH_TOKENIZE_BYTES:-1000000}"
TOKENIZE_REQUESTS="${BENCH_TOKENIZE_REQUESTS:-10}"
IDLE_SAMPLES="${BENCH_IDLE_SAMPLES:-200}"

die() { echo "bench-io-offload: $*" >&2; exit 1; }
command -v curl >/dev/null || die "curl times the requests; install it (apt-get install -y curl)"
command -v python3 >/dev/null || die "python3 writes the request bodies; install it"
[ -x "$LIFELINE" ] || die "$LIFELINE not built (cmake --build build)"
[ -f "$MODEL" ] || die "no model at $MODEL"

OUT="$(mktemp -d)"
SERVER_PID="" LOAD_PID=""
cleanup() {
  [ -n "$LOAD_PID" ] && kill "$LOAD_PID" 2>/dev/null || true
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
  rm -rf "$OUT"
}
trap cleanup EXIT

python3 - "$OUT" "$PROPERTIES" "$TOKENIZE_BYTES" <<'PY'
import json, sys
out, n, tok_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = ["field_%05d" % i for i in range(n)]
schema = {"type": "object", "properties": {k: {"type": "string"} for k in names},
          "required": names, "additionalProperties": False}
body = {"model": "m", "max_tokens": 8,
        "messages": [{"role": "user", "content": "Fill in the form."}],
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "form", "strict": True, "schema": schema}}}
open(out + "/schema.json", "w").write(json.dumps(body, separators=(",", ":")))
words = ("Once upon a time there was a little girl who liked to play in the park. " * (tok_bytes // 70 + 1))[:tok_bytes]
open(out + "/tokenize.json", "w").write(json.dumps({"model": "m", "content": words}))
PY
echo "bodies: schema $(wc -c <"$OUT/schema.json") bytes ($PROPERTIES required properties)," \
     "tokenize $(wc -c <"$OUT/tokenize.json") bytes"

mkfifo "$OUT/fifo"
"$LIFELINE" serve --port 0 -t 1 --model "m=$MODEL" "$@" >"$OUT/fifo" 2>"$OUT/serve.log" &
SERVER_PID=$!
read -r -t 60 line <"$OUT/fifo" || die "serve did not start: $(cat "$OUT/serve.log")"
URL="${line##*listening on }"

# One /health on a fresh connection: its time_total in ms (or "fail").
health_ms() {
  curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 30 "$URL/health" |
    awk '$1 == 200 { printf "%.3f\n", $2 * 1000; next } { print "fail" }'
}

# Prints samples, median, p90, max of the ms values in file $2, labelled $1.
summarize() {
  local failed
  failed=$(grep -c fail "$2" || true)
  grep -v fail "$2" | sort -n | awk -v label="$1" -v failed="$failed" '
    { v[NR] = $1 }
    END {
      if (NR == 0) { printf "%-9s /health: no answers (%d failed)\n", label, failed; exit }
      p50 = v[int((NR + 1) / 2)]; p90 = v[int(NR * 0.9 + 0.999)]; if (p90 == "") p90 = v[NR]
      printf "%-9s /health: %4d samples, median %8.2f ms, p90 %8.2f ms, max %8.2f ms, %d failed\n",
             label, NR, p50, p90, v[NR], failed
    }'
}

# Runs the load (a function) in the background and samples /health until it ends.
sample_during() {
  local label=$1 load=$2
  : >"$OUT/$label.ms"
  "$load" >"$OUT/$label.load" &
  LOAD_PID=$!
  while kill -0 "$LOAD_PID" 2>/dev/null; do health_ms >>"$OUT/$label.ms"; done
  wait "$LOAD_PID" || true
  LOAD_PID=""
  summarize "$label" "$OUT/$label.ms"
  sed 's/^/          /' "$OUT/$label.load"
}

schema_load() {
  for _ in $(seq "$SCHEMA_REQUESTS"); do
    curl -s -o /dev/null -w 'schema request: HTTP %{http_code} in %{time_total} s\n' \
      -H 'Content-Type: application/json' --data-binary @"$OUT/schema.json" \
      "$URL/v1/chat/completions"
  done
}

tokenize_load() {
  for _ in $(seq "$TOKENIZE_REQUESTS"); do
    curl -s -o /dev/null -w 'tokenize request: HTTP %{http_code} in %{time_total} s\n' \
      -H 'Content-Type: application/json' --data-binary @"$OUT/tokenize.json" "$URL/tokenize"
  done
}

echo "server: $LIFELINE serve -t 1 --model m=$MODEL $* ($URL)"
: >"$OUT/idle.ms"
for _ in $(seq "$IDLE_SAMPLES"); do health_ms >>"$OUT/idle.ms"; done
summarize idle "$OUT/idle.ms"
sample_during schema schema_load
sample_during tokenize tokenize_load
rss=$(awk '/^VmHWM/ { printf "%.0f MB", $2 / 1024 }' "/proc/$SERVER_PID/status")
echo "server peak RSS: $rss"
