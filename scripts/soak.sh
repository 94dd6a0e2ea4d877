#!/usr/bin/env bash
# Soak test: a real `lifeline serve` under a mixed open-loop load at a fixed rate for MINUTES
# (scripts/soak-client.mjs: normal, streamed, cancelled mid-stream, slow readers, malformed,
# over-limit), then
#   - the server's request ledger (/metrics) reconciled against the client's own counts;
#   - the server's resident memory sampled every 10 s from /proc/PID/status, with its slope
#     per hour by least squares over the whole run and over its second half;
#   - open file descriptors and threads, sampled at the same times, which must end where they
#     started (within a small slack for connections still closing).
# Usage: scripts/soak.sh MINUTES [--rate R] [--out DIR] [-- extra serve flags]
#   model: LIFELINE_MODEL, else ../shared/models/stories260K.gguf beside the checkout.
#   Exit status: 0 when the ledger reconciles and fds/threads are flat, 1 otherwise.
# The figures of docs/reliability.md come from this script.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
  echo "usage: scripts/soak.sh MINUTES [--rate R] [--out DIR] [-- serve flags]" >&2
  exit 2
fi
MINUTES="$1"; shift
RATE=4
OUT="soak-$(date +%Y%m%d-%H%M%S)"
SERVE_EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) RATE="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --) shift; SERVE_EXTRA=("$@"); break ;;
    *) echo "soak: unknown flag $1" >&2; exit 2 ;;
  esac
done
BIN="${LIFELINE_BIN:-build/lifeline}"
MODEL="${LIFELINE_MODEL:-../shared/models/stories260K.gguf}"
[ -x "$BIN" ] || { echo "soak: $BIN not built (scripts/build.sh)" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "soak: model $MODEL not found (set LIFELINE_MODEL)" >&2; exit 2; }
command -v node >/dev/null || { echo "soak: node is needed (scripts/install-deps.sh)" >&2; exit 2; }
mkdir -p "$OUT"

"$BIN" serve --port 0 --model "soak=$MODEL" "${SERVE_EXTRA[@]}" >"$OUT/serve.out" 2>"$OUT/serve.log" &
PID=$!
cleanup() { kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; }
trap cleanup EXIT
URL=""
for _ in $(seq 1 300); do
  URL=$(sed -n 's/^lifeline serve: listening on \(http:[^ ]*\)$/\1/p' "$OUT/serve.out")
  [ -n "$URL" ] && break
  kill -0 "$PID" 2>/dev/null || { cat "$OUT/serve.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$URL" ] || { echo "soak: the server did not start" >&2; exit 1; }
echo "soak: pid $PID at $URL, $MINUTES min at $RATE req/s, output in $OUT" >&2

# t_s, rss_kb, hwm_kb, threads, fds: one line every 10 s while the client runs.
sample() {
  local t0 now
  t0=$(date +%s)
  echo "t_s,rss_kb,hwm_kb,threads,fds" >"$OUT/samples.csv"
  while kill -0 "$PID" 2>/dev/null; do
    now=$(date +%s)
    awk -v t=$((now - t0)) -v fds="$(ls /proc/"$PID"/fd 2>/dev/null | wc -l)" '
      /^VmRSS:/ {rss=$2} /^VmHWM:/ {hwm=$2} /^Threads:/ {th=$2}
      END {if (rss) printf "%d,%d,%d,%d,%d\n", t, rss, hwm, th, fds}' \
      /proc/"$PID"/status >>"$OUT/samples.csv" 2>/dev/null || true
    sleep 10
  done
}
sample &
SAMPLER=$!

STATUS=0
node scripts/soak-client.mjs --url "$URL" --rate "$RATE" \
  --duration-s "$(awk -v m="$MINUTES" 'BEGIN {printf "%d", m * 60}')" \
  --model soak --out "$OUT/client.json" || STATUS=1
sleep 10  # one more sample after the load, connections closed
kill "$SAMPLER" 2>/dev/null || true
wait "$SAMPLER" 2>/dev/null || true

# Least-squares slope of rss over time, MB per hour; over all samples and the second half.
awk -F, -v out="$OUT/summary.txt" '
  BEGIN {n = 0}
  NR == 1 {next}
  {t[n] = $1; r[n] = $2 / 1024; th[n] = $4; fd[n] = $5; n++}
  function slope(a, b,   i, k, st, sr, stt, str, m) {
    k = b - a; if (k < 2) return 0
    for (i = a; i < b; i++) {st += t[i]; sr += r[i]; stt += t[i] * t[i]; str += t[i] * r[i]}
    m = (k * str - st * sr) / (k * stt - st * st)
    return m * 3600
  }
  END {
    if (n < 2) {print "too few samples" > out; exit 1}
    maxr = 0; for (i = 0; i < n; i++) if (r[i] > maxr) maxr = r[i]
    printf "samples %d over %d s\n", n, t[n-1] > out
    printf "rss_mb first %.1f last %.1f max %.1f\n", r[0], r[n-1], maxr >> out
    printf "rss_slope_mb_per_h all %.2f second_half %.2f\n", slope(0, n), slope(int(n/2), n) >> out
    printf "threads first %d last %d\n", th[0], th[n-1] >> out
    printf "fds first %d last %d\n", fd[0], fd[n-1] >> out
    if (th[n-1] > th[0] || fd[n-1] > fd[0] + 2) {print "fds_threads NOT FLAT" >> out; exit 1}
    print "fds_threads flat" >> out
  }' "$OUT/samples.csv" || STATUS=1
cat "$OUT/summary.txt"
[ "$STATUS" -eq 0 ] && echo "soak: PASS ($OUT)" || echo "soak: FAIL ($OUT)"
exit "$STATUS"
