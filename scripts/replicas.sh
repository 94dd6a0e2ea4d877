#!/usr/bin/env bash
# Runs N `lifeline serve` replicas on this machine behind Debian's nginx, the single-machine
# model of what docs/scale-out.md describes for Kubernetes:
#
#   scripts/replicas.sh N [--port 8080] [--base-port 8081] [--dir DIR] [--session-affinity]
#                         [-- SERVE ARGS...]
#
# Replica i listens on 127.0.0.1:(base-port + i); nginx listens on 127.0.0.1:port and
# balances by least connections, or with --session-affinity by consistent hashing of the
# request's X-Session-Id header (requests without one are spread by their request id): every
# turn of a conversation goes to the replica whose prefix cache holds its history
# (docs/prefix-cache.md), and adding or removing a replica moves only 1/N of the sessions. A request a replica refuses before generating anything is
# tried on the next replica (proxy_next_upstream, POST included):
#   429  the replica shed it at admission (queue full, SLO admission, ladder level 4);
#   503  not ready, draining, over --max-connections, deadline passed while queued;
#   error the connection was refused or dropped before any response header (a replica gone;
#        nothing was sent to the client, and the replica cancels the request it loses).
# Not retried: timeouts (a slow replica is still working), 500s, anything once a response
# has started. A refusal never takes a replica out of the rotation (max_fails=0): shedding is
# not failure, and when every replica sheds the client gets the last 429 with its
# Retry-After, not nginx's 502 "no live upstreams". (A replica that is down costs each
# request one refused connection before the next replica; Kubernetes readiness removes it.) Each replica runs with --drain-timeout 60 so that a drain finishes requests
# rather than cutting them off with a 503.
#
# SERVE ARGS default to `--model stories=../shared/models/stories260K.gguf --threads 1`.
# DIR (default: a new directory under /tmp) holds nginx.conf, access.log (upstream address
# and status of every attempt), error.log and replica-i.log. The script stays in the
# foreground; Ctrl-C or SIGTERM stops nginx and drains the replicas.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-0}"; }
[ $# -ge 1 ] || usage 2
case "$1" in -h|--help) usage 0 ;; esac
N="$1"; shift
[[ "$N" =~ ^[1-9][0-9]?$ ]] || { echo "replicas.sh: N must be 1..99, got '$N'" >&2; exit 2; }
PORT=8080
BASE_PORT=8081
DIR=""
AFFINITY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --port) PORT="$2"; shift 2 ;;
    --base-port) BASE_PORT="$2"; shift 2 ;;
    --dir) DIR="$2"; shift 2 ;;
    --session-affinity) AFFINITY=1; shift ;;
    --) shift; break ;;
    *) echo "replicas.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for p in "$PORT" "$BASE_PORT"; do
  [[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] && [ "$p" -le 65535 ] || { echo "replicas.sh: bad port '$p'" >&2; exit 2; }
done
[ $((BASE_PORT + N - 1)) -le 65535 ] || { echo "replicas.sh: --base-port $BASE_PORT + $N replicas passes 65535" >&2; exit 2; }
SERVE_ARGS=("$@")
[ ${#SERVE_ARGS[@]} -gt 0 ] || SERVE_ARGS=(--model "stories=$(pwd)/../shared/models/stories260K.gguf" --threads 1)

LIFELINE="${LIFELINE_BINARY:-$(pwd)/build/lifeline}"
NGINX="${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}"
[ -x "$LIFELINE" ] || { echo "replicas.sh: no lifeline binary at $LIFELINE (run scripts/build.sh)" >&2; exit 1; }
[ -x "$NGINX" ] || { echo "replicas.sh: nginx not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
[ -n "$DIR" ] || DIR="$(mktemp -d /tmp/lifeline-replicas-XXXXXX)"
mkdir -p "$DIR/tmp"
DIR="$(cd "$DIR" && pwd)"
# A reused DIR must not let a previous run's logs or pid file pass for this run's.
rm -f "$DIR"/replica-*.log "$DIR/nginx.pid"

PIDS=()
NGINX_PID=""
stop() {
  trap - INT TERM EXIT
  [ -n "$NGINX_PID" ] && kill -QUIT "$NGINX_PID" 2>/dev/null || true
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ -n "$NGINX_PID" ] && wait "$NGINX_PID" 2>/dev/null || true
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap stop EXIT

UPSTREAMS=""
for ((i = 0; i < N; i++)); do
  port=$((BASE_PORT + i))
  : >"$DIR/replica-$i.log"
  "$LIFELINE" serve --host 127.0.0.1 --port "$port" --drain-timeout 60 "${SERVE_ARGS[@]}" \
      >"$DIR/replica-$i.log" 2>&1 &
  PIDS+=($!)
  UPSTREAMS+="    server 127.0.0.1:$port max_fails=0;"$'\n'
done
for ((i = 0; i < N; i++)); do
  for _ in $(seq 600); do
    grep -q "listening on http://" "$DIR/replica-$i.log" 2>/dev/null && break
    kill -0 "${PIDS[$i]}" 2>/dev/null || { echo "replicas.sh: replica $i exited:" >&2; cat "$DIR/replica-$i.log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q "listening on http://" "$DIR/replica-$i.log" || { echo "replicas.sh: replica $i did not start within 60 s" >&2; exit 1; }
done

BALANCE="least_conn;"
AFFINITY_MAP=""
if [ "$AFFINITY" -eq 1 ]; then
  BALANCE="hash \$lifeline_affinity consistent;"
  AFFINITY_MAP='  map $http_x_session_id $lifeline_affinity { "" $request_id; default $http_x_session_id; }'
fi

USER_LINE=""
[ "$(id -u)" -eq 0 ] && USER_LINE="user root root;"
cat >"$DIR/nginx.conf" <<EOF
# Generated by scripts/replicas.sh.
$USER_LINE
worker_processes 1;
daemon off;
pid $DIR/nginx.pid;
error_log $DIR/error.log warn;
events { worker_connections 4096; }
http {
  log_format lifeline '\$msec \$status "\$request" upstream="\$upstream_addr" '
                      'upstream_status="\$upstream_status" request_id="\$sent_http_x_request_id" '
                      'request_time=\$request_time';
  access_log $DIR/access.log lifeline;
$AFFINITY_MAP
  client_body_temp_path $DIR/tmp/client_body;
  proxy_temp_path $DIR/tmp/proxy;
  fastcgi_temp_path $DIR/tmp/fastcgi;
  uwsgi_temp_path $DIR/tmp/uwsgi;
  scgi_temp_path $DIR/tmp/scgi;

  upstream lifeline {
    $BALANCE
$UPSTREAMS    keepalive 64;
  }

  server {
    listen 127.0.0.1:$PORT;
    client_max_body_size 8m;  # lifeline's default --max-body-bytes
    location / {
      proxy_pass http://lifeline;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      # The body is kept whole so it can be sent again to the next replica.
      proxy_request_buffering on;
      # SSE streams pass through token by token.
      proxy_buffering off;
      proxy_read_timeout 600s;
      proxy_next_upstream error http_429 http_503 non_idempotent;
      proxy_next_upstream_tries $N;
      # Which replicas a request went to ("a:p, b:p" when the first one refused it).
      add_header X-Lifeline-Upstream \$upstream_addr always;
      add_header X-Lifeline-Upstream-Status \$upstream_status always;
    }
  }
}
EOF

"$NGINX" -p "$DIR" -c "$DIR/nginx.conf" -e "$DIR/error.log" &
NGINX_PID=$!
for _ in $(seq 100); do
  [ -s "$DIR/nginx.pid" ] && break
  kill -0 "$NGINX_PID" 2>/dev/null || { echo "replicas.sh: nginx exited:" >&2; cat "$DIR/error.log" >&2; exit 1; }
  sleep 0.1
done
echo "replicas.sh: nginx on http://127.0.0.1:$PORT -> $N replicas on 127.0.0.1:$BASE_PORT..$((BASE_PORT + N - 1)) (logs in $DIR)"
wait "$NGINX_PID"
