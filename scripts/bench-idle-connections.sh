#!/usr/bin/env bash
# Idle-connection benchmark (not a test): what idle clients cost a running `lifeline serve` --
# resident memory, and the latency of the requests it serves meanwhile. Two kinds:
#
#   keepalive (default)  N keep-alive connections, each has made one GET /health and stays
#                        open, idle. The same open-loop `lifeline bench` load runs first alone,
#                        then while a Python client holds them (inside the server's 60 s
#                        keep-alive idle timeout).
#   sse                  N open SSE streams that are idle: accepted streaming completions that
#                        wait in a model's queue, so the server has sent the response head and
#                        sends an SSE comment every 5 s, and nothing else. To keep them waiting
#                        without a timer or a fake, a second model ('hold', its own engine thread)
#                        is kept busy by BENCH_HOLD_RUNNING long streams, and the N streams queue
#                        behind them; every stream that finishes is replaced at once, so N stay
#                        idle all along (the script reads the hold model's queue depth from
#                        /metrics while the load runs). The baseline is the same server with only
#                        the BENCH_HOLD_RUNNING streams: the same compute, none idle. The load
#                        runs on the first model; the rounds alternate baseline / with streams.
#
# Both read the server's VmRSS (and RssAnon) before, with the idle clients, and after.
#
# Usage: scripts/bench-idle-connections.sh [MODEL.gguf]   (default ../shared/models/stories260K.gguf)
# Environment knobs (defaults in brackets):
#   BENCH_KIND          keepalive | sse                                   [keepalive]
#   BENCH_IDLE          idle connections or streams             [10000 | 1000 for sse]
#   BENCH_RATE          load, req/s                                       [20]
#   BENCH_REQUESTS      requests per load run                             [200]
#   BENCH_ROUNDS        sse: baseline / with-streams pairs                [2]
#   BENCH_HOLD_RUNNING  sse: streams the hold model runs at once          [16]
#   BENCH_HOLD_TOKENS   sse: max_tokens of each hold stream               [1000]
#   BUILD_DIR           build dir holding `lifeline`                      [build]
set -euo pipefail
cd "$(dirname "$0")/.."

KIND="${BENCH_KIND:-keepalive}"
case "$KIND" in
  keepalive) IDLE="${BENCH_IDLE:-10000}" ;;
  sse) IDLE="${BENCH_IDLE:-1000}" ;;
  *) echo "bench-idle-connections: BENCH_KIND must be keepalive or sse, got '$KIND'" >&2; exit 2 ;;
esac
RATE="${BENCH_RATE:-20}"
REQUESTS="${BENCH_REQUESTS:-200}"
ROUNDS="${BENCH_ROUNDS:-2}"
HOLD_RUNNING="${BENCH_HOLD_RUNNING:-16}"
HOLD_TOKENS="${BENCH_HOLD_TOKENS:-1000}"
BUILD_DIR="${BUILD_DIR:-build}"
LIFELINE="$BUILD_DIR/lifeline"
MODEL="${1:-../shared/models/stories260K.gguf}"
OUT="$(mktemp -d)"
SERVER_PID="" HOLDER_PIDS=()
stop_holders() {
  for pid in "${HOLDER_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${HOLDER_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  HOLDER_PIDS=()
}
trap 'stop_holders; kill $SERVER_PID 2>/dev/null || true; rm -rf "$OUT"' EXIT

die() { echo "bench-idle-connections: $*" >&2; exit 1; }
command -v python3 >/dev/null || die "python3 holds the connections; install it (apt-get install -y python3)"
[ -x "$LIFELINE" ] || die "$LIFELINE not built (cmake --build $BUILD_DIR)"
need=$((IDLE + HOLD_RUNNING + 256))
[ "$(ulimit -n)" -ge "$need" ] || ulimit -n "$need" 2>/dev/null ||
  die "ulimit -n is $(ulimit -n); $need file descriptors are needed (raise the limit)"

SERVE_ARGS=(--model "m=$MODEL")
if [ "$KIND" = sse ]; then
  # The hold model: small enough to make in a second, slow enough per step that HOLD_RUNNING
  # streams of HOLD_TOKENS keep it busy for seconds. Its queue must take IDLE streams, and a
  # 'background' class with an hour's TTFT budget keeps admission from shedding them (their
  # predicted wait is a minute or so; the load's own class keeps its 387 ms budget).
  "$LIFELINE" make-model --dim 256 --layers 4 --heads 4 --ffn 768 --vocab 4096 --type q4_0 --seed 1 \
    -o "$OUT/hold.gguf" >/dev/null
  cat >"$OUT/slo.toml" <<TOML
[classes.background]
ttft_p95_ms = 3600000
priority = -1

[[models]]
name = "m"
path = "$MODEL"

[[models]]
name = "hold"
path = "$OUT/hold.gguf"
cascade = false
max_queue_requests = $((IDLE + HOLD_RUNNING + 64))
TOML
  SERVE_ARGS+=(--model "hold=$OUT/hold.gguf" --config "$OUT/slo.toml"
               --max-waiting $((IDLE + HOLD_RUNNING + 64)) --max-running "$HOLD_RUNNING")
fi

mkfifo "$OUT/fifo"
"$LIFELINE" serve --port 0 -t 1 "${SERVE_ARGS[@]}" --max-connections $((IDLE + HOLD_RUNNING + 128)) \
  >"$OUT/fifo" 2>"$OUT/serve.log" &
SERVER_PID=$!
read -r -t 60 line <"$OUT/fifo" || die "serve did not start: $(cat "$OUT/serve.log")"
URL="${line##*listening on }"
PORT="${URL##*:}"
rss() { awk '/^VmRSS/ { r = $2 } /^RssAnon/ { a = $2 } END { printf "%.1f MB (anonymous %.1f MB)", r / 1024, a / 1024 }' \
  "/proc/$SERVER_PID/status"; }
load() {  # label
  "$LIFELINE" bench --target "$URL,model=m,label=$1" --rate "$RATE" --requests "$REQUESTS" \
    --prompt-len 16 --output-len 16 --ignore-eos --progress never --out "$OUT/$1" >/dev/null
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summaries"][0]
print("%s: ok %d/%d, TTFT P50 %.2f P95 %.2f P99 %.2f ms, e2e P95 %.2f ms" % (sys.argv[2], s["ok"], s["sent"],
      s["ttft_ms"]["p50"], s["ttft_ms"]["p95"], s["ttft_ms"]["p99"], s["e2e_ms"]["p95"]))' "$OUT/$1/report.json" "$1"
}
wait_for() {  # file what
  for _ in $(seq 1 600); do [ -f "$1" ] && return 0; sleep 0.2; done
  die "$2"
}

if [ "$KIND" = keepalive ]; then
  echo "server RSS at start: $(rss)"
  load alone
  echo "server RSS after the first load: $(rss)"
  python3 - "$PORT" "$IDLE" "$OUT/held" <<'PY' &
import socket, sys, time
port, n, flag = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
socks = []
req = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(body) < length:
        body += s.recv(4096)
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit("connection %d: %r" % (i, head[:60]))
    socks.append(s)
open(flag, "w").write(str(len(socks)))
time.sleep(55)
PY
  HOLDER_PIDS=($!)
  wait_for "$OUT/held" "the holder did not open $IDLE connections"
  echo "held: $(cat "$OUT/held") idle keep-alive connections; server RSS: $(rss)"
  load with-idle
  echo "server RSS with them, after the second load: $(rss)"
  stop_holders
  sleep 1
  echo "server RSS after they closed: $(rss)"
  exit 0
fi

# sse: a holder keeps N streaming completions open on the hold model, replacing each one that
# finishes, reads (and drops) what the server sends, and writes to its status file: streams
# open, answers other than 200 (any is a failure: the run stops), [DONE]s, heartbeat comments.
cat >"$OUT/holder.py" <<'PY'
import json, os, selectors, socket, sys, time
port, n, max_tokens, status_path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
body = json.dumps({"model": "hold", "prompt": "Once upon a time", "max_tokens": max_tokens,
                   "ignore_eos": True, "stream": True, "slo_class": "background"}).encode()
req = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
       b"Content-Length: %d\r\n\r\n" % len(body)) + body
sel = selectors.DefaultSelector()
counts = {"open": 0, "done": 0, "heartbeats": 0, "refused": 0}
def open_one():
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ, {"head": True, "tail": b""})
    counts["open"] += 1
for _ in range(n):
    open_one()
last_write = 0.0
while True:
    for key, _ in sel.select(timeout=0.5):
        st = key.data
        try:
            data = key.fileobj.recv(65536)
        except BlockingIOError:
            continue
        except ConnectionError:
            data = b""
        text = st["tail"] + data
        if st["head"] and b"\r\n" in text:
            st["head"] = False
            if not text.startswith(b"HTTP/1.1 200"):
                counts["refused"] += 1
                sys.stderr.write("hold stream refused: %r\n" % text[:300])
        counts["heartbeats"] += data.count(b"\n:")
        if not data or b"data: [DONE]" in text:
            counts["done"] += int(bool(data))
            sel.unregister(key.fileobj); key.fileobj.close(); counts["open"] -= 1
            open_one()
            continue
        st["tail"] = text[-16:]
    now = time.time()
    if now - last_write >= 0.5:
        last_write = now
        with open(status_path + ".tmp", "w") as f:
            json.dump(counts, f)
        os.replace(status_path + ".tmp", status_path)
        if counts["refused"]:
            sys.exit(1)
PY
metric() {  # name model
  curl -s "$URL/metrics" | awk -v m="$1{model=\"$2\"}" '$1 == m { print $2 }'
}
holder() {  # label n
  python3 "$OUT/holder.py" "$PORT" "$2" "$HOLD_TOKENS" "$OUT/$1.status" 2>>"$OUT/holder.log" &
  HOLDER_PIDS+=($!)
  wait_for "$OUT/$1.status" "the $1 holder did not start"
}
cpu_ticks() {  # "server-TID ticks" per server thread, "holder-PID ticks" per holder
  local t p
  for t in /proc/"$SERVER_PID"/task/*; do echo "server-${t##*/} $(awk '{ print $14 + $15 }' "$t/stat")"; done
  for p in "${HOLDER_PIDS[@]}"; do echo "holder-$p $(awk '{ print $14 + $15 }' "/proc/$p/stat")"; done
}
# load_sampled label: the load, with the hold model's running / queued counts sampled beside it.
load_sampled() {
  : >"$OUT/$1.samples"
  ( while :; do echo "$(metric lifeline_running_sequences hold) $(metric lifeline_queue_depth hold)" \
      >>"$OUT/$1.samples"; sleep 1; done ) &
  local sampler=$!
  cpu_ticks >"$OUT/$1.cpu0"
  load "$1"
  cpu_ticks >"$OUT/$1.cpu1"
  kill "$sampler"; wait "$sampler" 2>/dev/null || true
  sort -n "$OUT/$1.samples" | awk -v l="$1" 'NF == 2 { r[n++] = $1; if (n == 1 || $2 < q) q = $2; if ($2 > qx) qx = $2 }
    END { printf "  %s: hold model running %d (median), queued %d-%d (%d samples)\n", l, r[int(n / 2)], q, qx, n }'
  # CPU seconds each server thread and each holder used during the load, busiest first.
  local hz; hz="$(getconf CLK_TCK)"
  join "$OUT/$1.cpu0" "$OUT/$1.cpu1" | awk -v hz="$hz" '{ printf "%s %.2f\n", $1, ($3 - $2) / hz }' |
    sort -k2,2 -rn >"$OUT/$1.cpu"
  echo "  CPU s during the load: server threads $(awk '/^server/ && n++ < 4 { printf "%s ", $2 }' "$OUT/$1.cpu")" \
    "(busiest 4); holders $(awk '/^holder/ { printf "%s ", $2 }' "$OUT/$1.cpu")"
}

echo "server RSS at start: $(rss)"
holder busy "$HOLD_RUNNING"
sleep 3
load warmup >/dev/null
echo "server RSS with $HOLD_RUNNING running hold streams: $(rss)"
for round in $(seq 1 "$ROUNDS"); do
  load_sampled "baseline-$round"
  holder idle "$IDLE"
  for _ in $(seq 1 150); do
    q="$(metric lifeline_queue_depth hold)"; [ "${q:-0}" -ge "$IDLE" ] && break; sleep 0.2
  done
  [ "${q:-0}" -ge "$IDLE" ] || die "only ${q:-0} of $IDLE streams queued: $(cat "$OUT/holder.log")"
  sleep 6  # past one heartbeat interval, so every idle stream has had its comment
  echo "round $round: $IDLE idle SSE streams queued; server RSS: $(rss); holder: $(cat "$OUT/idle.status")"
  load_sampled "with-streams-$round"
  echo "  server RSS after the load: $(rss)"
  kill "${HOLDER_PIDS[1]}"; wait "${HOLDER_PIDS[1]}" 2>/dev/null || true
  HOLDER_PIDS=("${HOLDER_PIDS[0]}")
  rm -f "$OUT/idle.status"
  sleep 2
  echo "  server RSS after they closed: $(rss)"
done
echo "busy holder: $(cat "$OUT/busy.status")"
