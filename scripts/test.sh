#!/usr/bin/env bash
# The README's second command: install dependencies, build, run the test suite with CTest.
# Slow tests carry the CTest label "slow" and are left out unless LIFELINE_SLOW_TESTS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# install-deps.sh installed Prometheus, so the metrics integration test must run, not skip.
export LIFELINE_REQUIRE_PROMETHEUS=1
scripts/build.sh
# The official OpenAI SDK for tests/sdk (exact version from its package-lock.json).
if [ ! -d tests/sdk/node_modules/openai ] || [ tests/sdk/package-lock.json -nt tests/sdk/node_modules ]; then
  npm ci --prefix tests/sdk --no-audit --no-fund --loglevel=error
fi
# puppeteer-core (drives Debian's chromium) and yaml for tests/ops, the same way.
if [ ! -d tests/ops/node_modules/puppeteer-core ] || [ tests/ops/package-lock.json -nt tests/ops/node_modules ]; then
  npm ci --prefix tests/ops --no-audit --no-fund --loglevel=error
fi
LABEL_ARGS=(-LE slow)
[ "${LIFELINE_SLOW_TESTS:-0}" = "1" ] && LABEL_ARGS=()
cd build
ctest --output-on-failure -j 2 "${LABEL_ARGS[@]}"
