#!/usr/bin/env bash
# The README's second command: install dependencies, build, run the test suite with CTest.
# Slow tests carry the CTest label "slow" and are left out unless LIFELINE_SLOW_TESTS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# install-deps.sh installed Prometheus, so the metrics integration test must run, not skip.
export LIFELINE_REQUIRE_PROMETHEUS=1
scripts/build.sh
LABEL_ARGS=(-LE slow)
[ "${LIFELINE_SLOW_TESTS:-0}" = "1" ] && LABEL_ARGS=()
cd build
ctest --output-on-failure -j 2 "${LABEL_ARGS[@]}"
