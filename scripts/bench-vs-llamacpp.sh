#!/usr/bin/env bash
# Side-by-side engine benchmark (not a test): Lifeline's `bench-model` and llama.cpp's
# `llama-bench` on the same GGUF files, same thread count, alternating run by run (the order
# flips every round, so a noisy minute hits both), then the medians of the rounds and their
# ratios for prompt processing (pp) and generation (tg), with Lifeline's share of the
# measured-bandwidth decode roofline.
#
# Usage: scripts/bench-vs-llamacpp.sh [-r ROUNDS] [-t THREADS] [-p N_PROMPT] [-n N_GEN]
#                                     [MODEL.gguf ...]
#   No models: the synthetic models of scripts/bench-engine.sh (made if missing): 110M Q8_0 /
#   Q4_0 and the 1.1B shape in every weight type, or the 1.1B types listed in BENCH_TYPES
#   (comma-separated, e.g. BENCH_TYPES=q4_0,q4_k_m,q8_0).
#   LLAMA_BENCH: the llama-bench binary (default: llama-bench on PATH).
#   LIFELINE: the lifeline binary (default: build/lifeline).
# Each run repeats its test 3 times (-r 3 of both tools) and reports its median; a round is one
# run of each tool. Needs jq (scripts/install-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=3 THREADS=2 N_PROMPT=512 N_GEN=128
while getopts "r:t:p:n:" opt; do
  case "$opt" in
    r) ROUNDS="$OPTARG" ;;
    t) THREADS="$OPTARG" ;;
    p) N_PROMPT="$OPTARG" ;;
    n) N_GEN="$OPTARG" ;;
    *) echo "usage: $0 [-r ROUNDS] [-t THREADS] [-p N_PROMPT] [-n N_GEN] [MODEL.gguf ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
for v in ROUNDS THREADS N_PROMPT N_GEN; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || { echo "bench-vs-llamacpp: $v must be a whole number, got '${!v}'" >&2; exit 2; }
done
[ "$ROUNDS" -ge 1 ] && [ "$THREADS" -ge 1 ] || { echo "bench-vs-llamacpp: -r and -t must be >= 1" >&2; exit 2; }

LLAMA_BENCH="${LLAMA_BENCH:-llama-bench}"
LIFELINE="${LIFELINE:-build/lifeline}"
command -v jq >/dev/null || { echo "bench-vs-llamacpp: jq not found (scripts/install-deps.sh installs it)" >&2; exit 2; }
command -v "$LLAMA_BENCH" >/dev/null || {
  echo "bench-vs-llamacpp: llama-bench not found (set LLAMA_BENCH=/path/to/llama-bench)" >&2; exit 2; }
[ -x "$LIFELINE" ] || { echo "bench-vs-llamacpp: $LIFELINE not built (scripts/build.sh)" >&2; exit 2; }

MODELS=("$@")
if [ ${#MODELS[@]} -eq 0 ]; then
  source scripts/bench-models.sh
  mapfile -t MODELS < <(bench_models "$LIFELINE" "${XDG_CACHE_HOME:-$HOME/.cache}/lifeline/bench-models" \
                                     "${BENCH_TYPES:-$BENCH_TYPES_ALL}")
fi
for m in "${MODELS[@]}"; do [ -f "$m" ] || { echo "bench-vs-llamacpp: no such model: $m" >&2; exit 2; }; done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a == a) printf "%.2fx", a / b; else print "-" }'; }

run_lifeline() {  # model -> "pp tg share"
  local j
  j="$("$LIFELINE" bench-model -m "$1" -p "$N_PROMPT" -n "$N_GEN" -r 3 -t "$THREADS" --json)" || return 1
  # The share: tg runs each against the bandwidth sampled beside them (median).
  jq -r '"\(.pp.median) \(.tg.median) \(.decode_roofline_share_paired.median // .decode_roofline_share)"' <<<"$j"
}
run_llama() {  # model -> "pp tg" (median of each test's samples)
  local j
  j="$("$LLAMA_BENCH" -m "$1" -p "$N_PROMPT" -n "$N_GEN" -r 3 -t "$THREADS" -o json)" || return 1
  jq -r '
    def med: (.samples_ts // [.avg_ts]) | sort | if length % 2 == 1 then .[length / 2 | floor]
             else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    ([.[] | select(.n_prompt > 0 and .n_gen == 0) | med] | first // 0) as $pp |
    ([.[] | select(.n_gen > 0 and .n_prompt == 0) | med] | first // 0) as $tg |
    "\($pp) \($tg)"' <<<"$j"
}

echo "| model | Lifeline pp$N_PROMPT | llama.cpp pp$N_PROMPT | pp ratio | Lifeline tg$N_GEN | llama.cpp tg$N_GEN | tg ratio | Lifeline tg share of roofline |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for m in "${MODELS[@]}"; do
  ll_pp="" ll_tg="" ll_share="" lc_pp="" lc_tg=""
  for r in $(seq 1 "$ROUNDS"); do
    for who in $( [ $((r % 2)) -eq 1 ] && echo "lifeline llama" || echo "llama lifeline"); do
      if [ "$who" = lifeline ]; then
        res="$(run_lifeline "$m")" || { echo "bench-vs-llamacpp: lifeline bench-model failed on $m" >&2; exit 1; }
        read -r pp tg share <<<"$res"
        ll_pp+=" $pp" ll_tg+=" $tg" ll_share+=" $share"
      else
        res="$(run_llama "$m")" || { echo "bench-vs-llamacpp: llama-bench failed on $m" >&2; exit 1; }
        read -r pp tg <<<"$res"
        lc_pp+=" $pp" lc_tg+=" $tg"
      fi
    done
    echo "  $(basename "$m") round $r: lifeline pp/tg$ll_pp |$ll_tg; llama.cpp$lc_pp |$lc_tg" >&2
  done
  a_pp=$(median <<<"$ll_pp") b_pp=$(median <<<"$lc_pp") a_tg=$(median <<<"$ll_tg") b_tg=$(median <<<"$lc_tg")
  share=$(median <<<"$ll_share")
  printf '| %s | %.1f | %.1f | %s | %.1f | %.1f | %s | %.0f %% |\n' "$(basename "$m")" \
    "$a_pp" "$b_pp" "$(ratio "$a_pp" "$b_pp")" "$a_tg" "$b_tg" "$(ratio "$a_tg" "$b_tg")" \
    "$(awk -v s="$share" 'BEGIN { print s * 100 }')"
done
echo "medians of $ROUNDS alternating rounds, $THREADS threads; ratio = Lifeline / llama.cpp" >&2
