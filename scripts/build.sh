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
build() {
  if [ ${#TARGETS[@]} -gt 0 ]; then
    cmake --build build -j "$1" --target "${TARGETS[@]}"
  else
    cmake --build build -j "$1"
  fi
}
# A compiler that crashed (GCC 12's cc1plus has, on a precompiled-header target of a machine
# short of memory) is not a broken tree: build again one job at a time without precompiled
# headers; a real error fails that build too, with its message.
if ! build "$JOBS"; then
  echo "build.sh: the build failed; building again with -j1 and without precompiled headers" >&2
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLIFELINE_PCH=OFF "$@" >/dev/null
  build 1
fi
