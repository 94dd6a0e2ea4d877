#!/usr/bin/env bash
# Idle-connection benchmark (not a test): what N idle keep-alive connections cost a running
# `lifeline serve` -- resident memory, and the latency of the requests it serves meanwhile.
# Runs the same open-loop `lifeline bench` load twice against one server, first alone, then
# while N connections (each has made one GET /health and stays open, idle) are held by a
# Python client; reads the server's VmRSS before, with the connections open, and after.
# All of it inside the server's 60 s keep-alive idle timeout.
#
# Usage: scripts/bench-idle-connections.sh [MODEL.gguf]   (default ../shared/models/stories260K.gguf)
# Environment knobs (defaults in brackets):
#   BENCH_IDLE       idle connections              [10000]
#   BENCH_RATE       load, req/s                   [20]
#   BENCH_REQUESTS   requests per load run         [200]
#   BUILD_DIR        build dir holding `lifeline`  [build]
set -euo pipefail
cd "$(dirname "$0")/.."

IDLE="${BENCH_IDLE:-10000}"
RATE="${BENCH_RATE:-20}"
REQUESTS="${BENCH_REQUESTS:-200}"
BUILD_DIR="${BUILD_DIR:-build}"
LIFELINE="$BUILD_DIR/lifeline"
MODEL="${1:-../shared/models/stories260K.gguf}"
OUT="$(mktemp -d)"
trap 'kill $SERVER_PID $HOLDER_PID 2>/dev/null || true; rm -rf "$OUT"' EXIT
SERVER_PID="" HOLDER_PID=""

die() { echo "bench-idle-connections: $*" >&2; exit 1; }
command -v python3 >/dev/null || die "python3 holds the connections; install it (apt-get install -y python3)"
[ -x "$LIFELINE" ] || die "$LIFELINE not built (cmake --build $BUILD_DIR)"
need=$((IDLE + 256))
[ "$(ulimit -n)" -ge "$need" ] || ulimit -n "$need" 2>/dev/null ||
  die "ulimit -n is $(ulimit -n); $need file descriptors are needed (raise the limit)"

mkfifo "$OUT/fifo"
"$LIFELINE" serve --port 0 -t 1 --model "m=$MODEL" --max-connections $((IDLE + 128)) \
  >"$OUT/fifo" 2>"$OUT/serve.log" &
SERVER_PID=$!
read -r -t 60 line <"$OUT/fifo" || die "serve did not start: $(cat "$OUT/serve.log")"
URL="${line##*listening on }"
PORT="${URL##*:}"
rss() { awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$SERVER_PID/status"; }
load() {  # label
  "$LIFELINE" bench --target "$URL,model=m,label=$1" --rate "$RATE" --requests "$REQUESTS" \
    --prompt-len 16 --output-len 16 --ignore-eos --progress never --out "$OUT/$1" >/dev/null
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summaries"][0]
print("%s: ok %d/%d, TTFT P50 %.2f P95 %.2f P99 %.2f ms, e2e P95 %.2f ms" % (sys.argv[2], s["ok"], s["sent"],
      s["ttft_ms"]["p50"], s["ttft_ms"]["p95"], s["ttft_ms"]["p99"], s["e2e_ms"]["p95"]))' "$OUT/$1/report.json" "$1"
}

echo "server RSS at start: $(rss) MB"
load alone
echo "server RSS after the first load: $(rss) MB"
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
HOLDER_PID=$!
for _ in $(seq 1 300); do [ -f "$OUT/held" ] && break; sleep 0.2; done
[ -f "$OUT/held" ] || die "the holder did not open $IDLE connections"
echo "held: $(cat "$OUT/held") idle keep-alive connections; server RSS: $(rss) MB"
load with-idle
echo "server RSS with them, after the second load: $(rss) MB"
kill "$HOLDER_PID" 2>/dev/null || true
wait "$HOLDER_PID" 2>/dev/null || true
sleep 1
echo "server RSS after they closed: $(rss) MB"
