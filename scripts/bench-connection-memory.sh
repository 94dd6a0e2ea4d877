#!/usr/bin/env bash
# Connection-memory measurement (not a test): how much resident memory one connection can make
# a running `lifeline serve` hold with a request it never finishes, for each part of the
# request the server bounds (docs/reliability.md, "Resource promises"). For each case a fresh
# server is started, N connections each send the case's bytes and then wait, and the server's
# VmRSS growth is divided by N:
#
#   header       a 16 KiB header (max_header_bytes) of two-byte fields, a body announced
#   chunk_line   an unfinished 4 KiB chunk-size line (max_framing_line_bytes)
#   trailers     an unfinished 8 KiB trailer section (max_trailer_bytes)
#   body         a body one byte short of max_body_bytes (1 MiB)
#   worst        the header case and the body case in one request
#   unauth_401   with --api-key, no key: a 1 MiB body to a protected route (401 before the body)
#   unauth_public  with --api-key, no key: the header case and a 64 KiB body to /health
#
# and the issue's report (issue, issue_api_key): two connections without a key sending 300 MB
# chunk extensions each (before the framing caps: 810 MB RSS, with or without --api-key; now
# a 400 after 4 KiB, or with --api-key a 401 from the header).
#
# Usage: scripts/bench-connection-memory.sh [MODEL.gguf]   (default ../shared/models/stories260K.gguf)
# Environment: LIFELINE (the binary, default build/lifeline), N (connections per case, 200),
# PORT (18931).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-../shared/models/stories260K.gguf}
LIFELINE=${LIFELINE:-build/lifeline}
N=${N:-200}
PORT=${PORT:-18931}

run_case() {
  local kind=$1; shift
  "$LIFELINE" serve --model "m=$MODEL" --threads 1 --kv-memory 16 --port "$PORT" "$@" \
    > /dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT)).close()" \
      2> /dev/null && break
    sleep 0.1
  done
  python3 - "$PORT" "$pid" "$kind" "$N" <<'EOF'
import socket, sys, time

port, pid, kind, n = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])

def rss_kb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

def connect():
    return socket.create_connection(("127.0.0.1", port))

post = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"

def tiny_fields(start):
    fields = "".join(f"a{i:x}:b\r\n" for i in range(4000))
    fields = fields[: 16 * 1024 - len(start) - 64]
    return fields[: fields.rfind("\r\n") + 2]

if kind.startswith("issue"):
    base = peak = rss_kb()
    socks = [connect() for _ in range(2)]
    for s in socks:
        s.sendall((post + "Transfer-Encoding: chunked\r\n\r\n1;a=").encode())
    sent = [0, 0]
    for _ in range(300):
        for k, s in enumerate(socks):
            try:
                s.sendall(b"a" * (1 << 20))
                sent[k] += 1
            except OSError:
                pass
        peak = max(peak, rss_kb())
    time.sleep(0.5)
    peak = max(peak, rss_kb())
    answers = []
    for s in socks:
        s.settimeout(5)
        answers.append(s.recv(64).split(b"\r\n")[0].decode())
    print(f"{kind:14} 2 connections sent {sent} MiB of a chunk extension: RSS {base} -> "
          f"peak {peak} kB; answers {answers}")
    sys.exit(0)

body = lambda size: b"a" * (size - 1)
cases = {
    "header": (post + tiny_fields(post) + "Content-Length: 100\r\n\r\n").encode(),
    "chunk_line": (post + "Transfer-Encoding: chunked\r\n\r\n1;a=" + "e" * 4000).encode(),
    "trailers": (post + "Transfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n" +
                 ("X-T: " + "t" * 990 + "\r\n") * 8).encode()[:-2],
    "body": (post + "Content-Length: 1048576\r\n\r\n").encode() + body(1048576),
    "worst": (post + tiny_fields(post) + "Content-Length: 1048576\r\n\r\n").encode() + body(1048576),
    "unauth_401": (post + "Content-Length: 1048576\r\n\r\n").encode() + body(1048576),
    "unauth_public": ("GET /health HTTP/1.1\r\nHost: x\r\n" + tiny_fields(post) +
                      "Content-Length: 65536\r\n\r\n").encode() + body(65536),
}
payload = cases[kind]
base = rss_kb()
socks = []
for _ in range(n):
    s = connect()
    try:
        s.sendall(payload)
    except OSError:
        pass
    socks.append(s)
time.sleep(1.0)
after = rss_kb()
print(f"{kind:14} {n} connections: RSS {base} -> {after} kB, {(after - base) / n:.1f} kB each")
EOF
  kill "$pid"
  wait "$pid" 2> /dev/null || true
}

run_case issue
run_case issue_api_key --api-key k1
for kind in header chunk_line trailers body worst; do run_case "$kind"; done
for kind in unauth_401 unauth_public; do run_case "$kind" --api-key k1; done
