#!/usr/bin/env bash
# A benchmark, not a test: `lifeline bench` against one replica directly and against N
# replicas behind nginx (scripts/replicas.sh), the same closed-loop sweep for both, then the
# replicas' ledgers and nginx's retry counts. The figures in docs/scale-out.md come from it.
#
#   scripts/bench-replicas.sh [N=2] [SWEEP=4,16,32] [OUT=/tmp/lifeline-bench-replicas]
#
# Each replica: stories260K, --threads 1 --max-running 8 --max-waiting 8 (REPLICA_ARGS
# overrides). Needs a built build/lifeline and nginx (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-2}"
SWEEP="${2:-4,16,32}"
OUT="${3:-/tmp/lifeline-bench-replicas}"
MODEL="${LIFELINE_MODEL:-$(pwd)/../shared/models/stories260K.gguf}"
read -r -a ARGS <<< "${REPLICA_ARGS:---model stories=$MODEL --threads 1 --max-running 8 --max-waiting 8 --kv-memory 64}"
BENCH=(--concurrency 4 --sweep "$SWEEP" --duration 8 --output-len 64 --ignore-eos
       --slo-metric ttft --threshold-ms 200 --progress never)
PORT="${PORT:-18480}"
rm -rf "$OUT"
mkdir -p "$OUT"

build/lifeline serve --port $((PORT + 50)) "${ARGS[@]}" >"$OUT/one.log" 2>&1 &
ONE=$!
for _ in $(seq 300); do grep -q "listening on" "$OUT/one.log" && break; sleep 0.1; done
build/lifeline bench --target "http://127.0.0.1:$((PORT + 50)),label=one-replica" "${BENCH[@]}" \
    --out "$OUT/one" >"$OUT/one.md"
kill -TERM "$ONE"; wait "$ONE" || true

scripts/replicas.sh "$N" --port "$PORT" --base-port $((PORT + 1)) --dir "$OUT/replicas" -- "${ARGS[@]}" \
    >"$OUT/replicas.out" 2>&1 &
REP=$!
for _ in $(seq 300); do grep -q "nginx on" "$OUT/replicas.out" && break; sleep 0.1; done
build/lifeline bench --target "http://127.0.0.1:$PORT,label=$N-replicas-nginx" "${BENCH[@]}" \
    --out "$OUT/replicas-bench" >"$OUT/replicas.md"
{
  echo "## Replica ledgers"
  for ((i = 0; i < N; i++)); do
    echo "replica $i:"
    exec 3<>"/dev/tcp/127.0.0.1/$((PORT + 1 + i))"
    printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3
    grep -E '^lifeline_requests_completed_total|route="/v1/completions",status="429"' <&3 || true
    exec 3<&-
  done
  echo "## nginx: upstream statuses per request"
  grep -o 'upstream_status="[^"]*"' "$OUT/replicas/access.log" | sort | uniq -c
} >"$OUT/ledgers.txt"
kill -TERM "$REP"; wait "$REP" || true

for f in one.md replicas.md; do
  sed -n '/## Latency/,/## Three-layer/p' "$OUT/$f" | grep -E '^\| (load|concurrency)' | grep -E 'TTFT|load|ok \|' || true
  sed -n '/## Throughput/,/## Three-layer/p' "$OUT/$f" | grep -E '^\| concurrency' || true
done
cat "$OUT/ledgers.txt"
uptime
