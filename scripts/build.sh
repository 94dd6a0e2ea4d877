#!/usr/bin/env bash
# Configures and builds Lifeline into build/ (Release, Ninja, -j2 by default). Arguments go to
# the configure step; LIFELINE_BUILD_TARGETS (space-separated, default: everything) names what
# to build, e.g. "lifeline" for the server alone.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${LIFELINE_JOBS:-2}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
TARGETS=()
[ -n "${LIFELINE_BUILD_TARGETS:-}" ] && read -r -a TARGETS <<<"$LIFELINE_BUILD_TARGETS"
if [ ${#TARGETS[@]} -gt 0 ]; then
  cmake --build build -j "$JOBS" --target "${TARGETS[@]}"
else
  cmake --build build -j "$JOBS"
fi
