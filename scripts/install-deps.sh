#!/usr/bin/env bash
# Installs the Debian 12 packages Lifeline builds and tests with. Idempotent: runs apt-get only
# when something is missing (and `apt-get update` first in that case).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev   # GoogleTest: unit, golden and integration tests
  libpcre2-dev                # PCRE2: Unicode-property regexes of BPE pre-tokenizers
  nlohmann-json3-dev          # JSON for CLI output, reference files, later the HTTP API
  libcli11-dev                # CLI11: subcommands and flags of the `lifeline` binary
  libboost-dev                # Boost 1.74 headers: Asio + Beast for the HTTP/SSE server
  libtomlplusplus-dev         # toml++: the `serve --config` file (SLO classes, cascade, controller)
  libgsl-dev                  # GSL: `lifeline analyze` decay fits (BFGS minimizer), Cholesky for
                              # standard errors, chi-square tail, portable RNG for the bootstrap
  jq                          # jq: scripts/bench-vs-llamacpp.sh reads both engines' JSON
  prometheus                  # Prometheus server: the metrics integration test scrapes /metrics
                              # and checks histogram_quantile answers against client timings
                              # (its promtool checks deploy/prometheus/rules.yml)
  chromium                    # headless browser: tests/ops drives the dashboard page in it
  nginx                       # load balancer in front of scripts/replicas.sh's replicas
)

# --fuzz: clang (libFuzzer, ASan, UBSan) for scripts/fuzz.sh; the default build uses g++.
if [ "${1:-}" = "--fuzz" ]; then
  PACKAGES+=(clang)
fi

# Node.js + npm run the OpenAI SDK conformance test (tests/sdk); a machine that already has a
# node and npm (e.g. from another Debian repository) keeps them.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
