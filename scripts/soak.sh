#!/usr/bin/env bash
# Soak test: a real `lifeline serve` under a mixed open-loop load at a fixed rate for MINUTES
# (scripts/soak-client.mjs: normal, streamed, cancelled mid-stream, slow readers, malformed,
# over-limit, half-closed, multi-turn chat, reasoning, and requests to a misbehaving remote
# member), then
#   - each server's request ledger (/metrics) reconciled against the client's own counts, and
#     every kind's own checks (each half-closed request answered, each reasoning answer with
#     its reasoning_content, each remote request in the one outcome its misbehaviour dictates);
#   - the server's resident memory sampled every 10 s from /proc/PID/status, with its slope
#     per hour by least squares over the whole run and over its second half;
#   - open file descriptors and threads, sampled at the same times, which must end where they
#     started (within a small slack for connections still closing); one warm-up request per
#     model comes before the first sample (the first remote request starts a resolver thread).
# Three processes besides the client:
#   - the server under test: --model soak=MODEL, plus the remote member `flaky` from a
#     generated --config ([[models]] with url/model) and --remote-timeout-ms 3000;
#   - scripts/soak-upstream.mjs, the fake OpenAI-compatible upstream behind `flaky`, which
#     misbehaves as each request asks (streams past max_tokens, stalls 600 ms, hangs past the
#     remote timeout, malformed SSE, closes mid-stream, HTTP 500, slow but correct);
#   - a second server for the reasoning requests: the same GGUF as `reason` with DeepSeek R1's
#     chat template (--chat-template-file is per process), one thread; its ledger, memory, fds
#     and threads are checked the same way.
# Usage: scripts/soak.sh MINUTES [--rate R] [--out DIR] [-- extra serve flags]
#   model: LIFELINE_MODEL, else ../shared/models/stories260K.gguf beside the checkout.
#   The extra serve flags go to the server under test.
#   Exit status: 0 when the books reconcile, every check passes and fds/threads are flat,
#   1 otherwise.
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
R1_TEMPLATE=tests/template/data/templates/deepseek-r1-distill-llama-8b.jinja
REMOTE_TIMEOUT_MS=3000
STALL_MS=600
[ -x "$BIN" ] || { echo "soak: $BIN not built (scripts/build.sh)" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "soak: model $MODEL not found (set LIFELINE_MODEL)" >&2; exit 2; }
command -v node >/dev/null || { echo "soak: node is needed (scripts/install-deps.sh)" >&2; exit 2; }
mkdir -p "$OUT"

PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

# wait_url PID FILE PATTERN: the URL the process prints on FILE's first matching line.
wait_url() {
  local pid=$1 file=$2 pattern=$3 url=""
  for _ in $(seq 1 300); do
    url=$(sed -n "s/^$pattern\(http:[^ ]*\)$/\1/p" "$file")
    [ -n "$url" ] && { echo "$url"; return 0; }
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

node scripts/soak-upstream.mjs --port 0 --stall-ms "$STALL_MS" >"$OUT/upstream.out" 2>"$OUT/upstream.log" &
UPSTREAM=$!
PIDS+=("$UPSTREAM")
UP_URL=$(wait_url "$UPSTREAM" "$OUT/upstream.out" 'soak-upstream: listening on ') ||
  { cat "$OUT/upstream.log" >&2; echo "soak: the upstream did not start" >&2; exit 1; }
cat >"$OUT/soak.toml" <<TOML
# Written by scripts/soak.sh: the misbehaving upstream as a remote cascade member.
[[models]]
name = "flaky"
url = "$UP_URL/v1"
model = "soak-upstream"
max_queue_requests = 64
TOML

"$BIN" serve --port 0 --model "soak=$MODEL" --config "$OUT/soak.toml" \
  --remote-timeout-ms "$REMOTE_TIMEOUT_MS" "${SERVE_EXTRA[@]}" >"$OUT/serve.out" 2>"$OUT/serve.log" &
PID=$!
PIDS+=("$PID")
"$BIN" serve --port 0 --threads 1 --model "reason=$MODEL" --chat-template-file "$R1_TEMPLATE" \
  >"$OUT/serve-reason.out" 2>"$OUT/serve-reason.log" &
RPID=$!
PIDS+=("$RPID")
URL=$(wait_url "$PID" "$OUT/serve.out" 'lifeline serve: listening on ') ||
  { cat "$OUT/serve.log" >&2; echo "soak: the server did not start" >&2; exit 1; }
RURL=$(wait_url "$RPID" "$OUT/serve-reason.out" 'lifeline serve: listening on ') ||
  { cat "$OUT/serve-reason.log" >&2; echo "soak: the reasoning server did not start" >&2; exit 1; }
echo "soak: pid $PID at $URL (remote member flaky -> $UP_URL), reasoning pid $RPID at $RURL," \
     "$MINUTES min at $RATE req/s, output in $OUT" >&2

# One request to each model before the first sample, outside the client's books: the first
# remote request starts Boost.Asio's resolver thread (async_resolve runs on a private thread
# with its own epoll, eventfd and timerfd: one thread and 3 fds for the life of the process),
# which is not growth for the fds/threads check to see.
node -e '
const post = async (url, body) => {
  const r = await fetch(url + "/v1/completions", { method: "POST",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  await r.text();
  if (r.status !== 200) throw new Error(url + ": warm-up answered " + r.status);
};
(async () => {
  await post(process.argv[1], { model: "soak", prompt: "Warm up", max_tokens: 4 });
  await post(process.argv[1], { model: "flaky", prompt: "Warm up [mode=ok]", max_tokens: 4 });
  await post(process.argv[2], { model: "reason", prompt: "Warm up", max_tokens: 4 });
})().catch((e) => { console.error("soak: " + e.message); process.exit(1); });
' "$URL" "$RURL" || exit 1

# sample PID FILE: t_s, rss_kb, hwm_kb, threads, fds, one line every 10 s while PID runs.
sample() {
  local pid=$1 file=$2 t0 now
  t0=$(date +%s)
  echo "t_s,rss_kb,hwm_kb,threads,fds" >"$file"
  while kill -0 "$pid" 2>/dev/null; do
    now=$(date +%s)
    awk -v t=$((now - t0)) -v fds="$(ls /proc/"$pid"/fd 2>/dev/null | wc -l)" '
      /^VmRSS:/ {rss=$2} /^VmHWM:/ {hwm=$2} /^Threads:/ {th=$2}
      END {if (rss) printf "%d,%d,%d,%d,%d\n", t, rss, hwm, th, fds}' \
      /proc/"$pid"/status >>"$file" 2>/dev/null || true
    sleep 10
  done
}
sample "$PID" "$OUT/samples.csv" &
SAMPLER=$!
sample "$RPID" "$OUT/samples-reason.csv" &
RSAMPLER=$!

STATUS=0
node scripts/soak-client.mjs --url "$URL" --rate "$RATE" \
  --duration-s "$(awk -v m="$MINUTES" 'BEGIN {printf "%d", m * 60}')" \
  --model soak --remote-model flaky --upstream-url "$UP_URL" \
  --reason-url "$RURL" --reason-model reason --out "$OUT/client.json" || STATUS=1
sleep 10  # one more sample after the load, connections closed
kill "$SAMPLER" "$RSAMPLER" 2>/dev/null || true
wait "$SAMPLER" "$RSAMPLER" 2>/dev/null || true

# summarize CSV LABEL: least-squares slope of rss over time, MB per hour, over all samples and
# the second half; threads and fds first and last.
summarize() {
  awk -F, -v label="$2" '
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
      printf "%s\n", label
      if (n < 2) {print "too few samples"; exit 1}
      maxr = 0; for (i = 0; i < n; i++) if (r[i] > maxr) maxr = r[i]
      printf "samples %d over %d s\n", n, t[n-1]
      printf "rss_mb first %.1f last %.1f max %.1f\n", r[0], r[n-1], maxr
      printf "rss_slope_mb_per_h all %.2f second_half %.2f\n", slope(0, n), slope(int(n/2), n)
      printf "threads first %d last %d\n", th[0], th[n-1]
      printf "fds first %d last %d\n", fd[0], fd[n-1]
      if (th[n-1] > th[0] || fd[n-1] > fd[0] + 2) {print "fds_threads NOT FLAT"; exit 1}
      print "fds_threads flat"
    }' "$1"
}
: >"$OUT/summary.txt"
summarize "$OUT/samples.csv" "server under test (soak, remote flaky), pid $PID" >>"$OUT/summary.txt" || STATUS=1
summarize "$OUT/samples-reason.csv" "reasoning server (reason, R1 template), pid $RPID" >>"$OUT/summary.txt" || STATUS=1
cat "$OUT/summary.txt"
[ "$STATUS" -eq 0 ] && echo "soak: PASS ($OUT)" || echo "soak: FAIL ($OUT)"
exit "$STATUS"
