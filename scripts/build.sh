#!/usr/bin/env bash
# Configures and builds Lifeline into build/ (Release, Ninja, -j2 by default).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${LIFELINE_JOBS:-2}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$JOBS"
