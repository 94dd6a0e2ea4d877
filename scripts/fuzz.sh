#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan, -DLIFELINE_FUZZ=ON in build-fuzz/)
# and runs each for SECONDS, starting from its committed seed corpus (tests/fuzz/).
#   scripts/fuzz.sh SECONDS [NAME ...]     NAME: gguf tokenizer template grammar toolcall
#                                          http openai slo_config (default: all)
#   FUZZ_JOBS=2 scripts/fuzz.sh 600        run two harnesses at a time (default 1)
# Per harness: the corpus grows in build-fuzz/corpus/NAME (seeded from the committed one),
# crashes land in build-fuzz/artifacts/NAME/, the log in build-fuzz/logs/NAME.log. The
# summary (runs, coverage, corpus size, result) is printed and kept in
# build-fuzz/fuzz-summary.txt. Exit status 1 when any harness crashed, leaked, timed out or
# ran out of memory. A crash input belongs in the harness's committed corpus once fixed, so
# the default test run (Fuzz.NAME.Corpus) keeps replaying it.
#
# Memory: ASan keeps freed memory in a quarantine (256 MB by default), which a fuzzer's
# RSS limit then counts as if it were live: with -rss_limit_mb=256 the GGUF harness stopped
# after ~24k runs on a false out-of-memory report. Here the quarantine is 32 MB and the RSS
# limit 2 GB, while -malloc_limit_mb (per harness, below) still reports any single oversized
# allocation, which is what the limits exist to catch.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh SECONDS [NAME ...]" >&2
  exit 2
fi
SECONDS_EACH="$1"; shift
ALL=(gguf tokenizer template grammar toolcall http openai slo_config)
NAMES=("$@")
[ ${#NAMES[@]} -eq 0 ] && NAMES=("${ALL[@]}")
JOBS="${FUZZ_JOBS:-1}"
B=build-fuzz
CXX_FUZZ="${CXX_FUZZ:-clang++}"
command -v "$CXX_FUZZ" >/dev/null || scripts/install-deps.sh --fuzz

LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ ! -f "$B/build.ninja" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$CXX_FUZZ" \
    -DLIFELINE_FUZZ=ON -DLIFELINE_BUILD_TESTS=OFF "${LAUNCHER[@]}" >/dev/null
fi
TARGETS=()
for n in "${NAMES[@]}"; do TARGETS+=("fuzz_$n"); done
cmake --build "$B" -j"${BUILD_JOBS:-2}" --target "${TARGETS[@]}"

# Harness -> "max_len malloc_limit_mb timeout_s seed dirs..."
declare -A ARGS=(
  [gguf]="65536 64 5 tests/fuzz/corpus/gguf"
  [tokenizer]="4096 256 5 tests/fuzz/corpus/tokenizer"
  [template]="16384 128 5 tests/template/data/templates"
  [grammar]="8192 256 5 tests/fuzz/grammar_corpus"
  [toolcall]="4096 256 5 tests/fuzz/toolcall_corpus"
  [http]="70000 256 5 tests/fuzz/corpus/http"
  [openai]="65536 256 5 tests/fuzz/corpus/openai"
  [slo_config]="16384 128 5 tests/fuzz/corpus/slo_config"
)
export ASAN_OPTIONS="quarantine_size_mb=32:malloc_context_size=10:detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

run_one() {
  local n="$1" max_len malloc_mb timeout_s seeds corpus
  read -r max_len malloc_mb timeout_s seeds <<<"${ARGS[$n]}"
  corpus="$B/corpus/$n"
  mkdir -p "$corpus" "$B/artifacts/$n" "$B/logs"
  cp -n "$seeds"/* "$corpus"/ 2>/dev/null || true
  local status=0
  "$B/tests/fuzz/fuzz_$n" "$corpus" -max_total_time="$SECONDS_EACH" -max_len="$max_len" \
    -rss_limit_mb=2048 -malloc_limit_mb="$malloc_mb" -timeout="$timeout_s" \
    -print_final_stats=1 -artifact_prefix="$B/artifacts/$n/" \
    >"$B/logs/$n.log" 2>&1 || status=$?
  local last runs
  last=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE|INITED)' "$B/logs/$n.log" | tail -1 || true)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/logs/$n.log" | tail -1)
  printf '%-11s exit %-3s runs %-10s %s\n' "$n" "$status" "${runs:-?}" \
    "$(echo "$last" | grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+/[0-9]+[a-zA-Z]*' || echo "$last")" \
    >"$B/logs/$n.summary"
  return "$status"
}

FAILED=0
running=0
for n in "${NAMES[@]}"; do
  [ -n "${ARGS[$n]:-}" ] || { echo "fuzz: unknown harness $n" >&2; exit 2; }
  run_one "$n" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || FAILED=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || FAILED=1
  running=$((running - 1))
done

{
  echo "fuzz: $SECONDS_EACH s per harness, $(date -u +%Y-%m-%dT%H:%MZ), $("$CXX_FUZZ" --version | head -1)"
  for n in "${NAMES[@]}"; do cat "$B/logs/$n.summary"; done
} | tee "$B/fuzz-summary.txt"
if [ "$FAILED" -ne 0 ]; then
  echo "fuzz: FAILED: see $B/logs/ and $B/artifacts/" >&2
  exit 1
fi
echo "fuzz: all clean"
