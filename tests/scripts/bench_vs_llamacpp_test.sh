#!/usr/bin/env bash
# scripts/bench-vs-llamacpp.sh against stand-ins: a fake llama-bench that prints llama-bench's
# JSON shape (-o json) with known samples, and the real lifeline behind a wrapper that logs
# each call. Checks: the two tools alternate with the order flipped every round, llama.cpp's
# medians are read from samples_ts, each ratio is Lifeline's median over llama.cpp's, and a
# missing or failing llama-bench is a clear error.
# Usage: bench_vs_llamacpp_test.sh LIFELINE_BINARY MODEL.gguf
set -euo pipefail
LIFELINE_BIN="$1" MODEL="$2"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$T/llama-bench" <<FAKE
#!/usr/bin/env bash
echo llama >> "$T/calls"
for a in "\$@"; do [ "\$a" = "-o" ] && json=1; done
[ "\${json:-0}" = 1 ] || exit 3
cat <<'JSON'
[
  {"model_filename": "m.gguf", "n_prompt": 16, "n_gen": 0, "n_threads": 1, "avg_ts": 104.0,
   "stddev_ts": 9.0, "samples_ts": [110.0, 90.0, 100.0]},
  {"model_filename": "m.gguf", "n_prompt": 0, "n_gen": 8, "n_threads": 1, "avg_ts": 21.0,
   "stddev_ts": 4.0, "samples_ts": [30.0, 20.0, 10.0]}
]
JSON
FAKE
cat > "$T/lifeline" <<WRAP
#!/usr/bin/env bash
echo lifeline >> "$T/calls"
exec "$LIFELINE_BIN" "\$@"
WRAP
chmod +x "$T/llama-bench" "$T/lifeline"

out="$(LLAMA_BENCH="$T/llama-bench" LIFELINE="$T/lifeline" \
       "$ROOT/scripts/bench-vs-llamacpp.sh" -r 2 -t 1 -p 16 -n 8 "$MODEL" 2>/dev/null)"
echo "$out"
[ "$(tr '\n' ' ' < "$T/calls")" = "lifeline llama llama lifeline " ] ||
  fail "call order $(tr '\n' ' ' < "$T/calls")"
row="$(grep -F "| $(basename "$MODEL") |" <<<"$out")" || fail "no row for the model"
IFS='|' read -r _ _ a_pp b_pp r_pp a_tg b_tg r_tg share _ <<<"$row"
[ "$(echo $b_pp)" = "100.0" ] || fail "llama.cpp pp median $b_pp, want 100.0"
[ "$(echo $b_tg)" = "20.0" ] || fail "llama.cpp tg median $b_tg, want 20.0"
# The table rounds the medians to 0.1 and the ratio to 0.01: compare within that rounding.
ratio_ok() {  # printed_ratio lifeline_median llama_median
  awk -v r="${1%x}" -v a="$2" -v b="$3" 'BEGIN { w = a / b; d = r - w; if (d < 0) d = -d;
    exit !(d <= 0.006 + 0.06 / b) }'
}
ratio_ok "$(echo $r_pp)" "$a_pp" 100 || fail "pp ratio $r_pp for $a_pp / 100"
ratio_ok "$(echo $r_tg)" "$a_tg" 20 || fail "tg ratio $r_tg for $a_tg / 20"
awk -v a="$a_tg" 'BEGIN { exit !(a > 0) }' || fail "Lifeline tg median $a_tg"
[[ "$share" =~ %\ *$ ]] || fail "share column '$share'"

# expect_error RC MESSAGE LLAMA_BENCH [ARGS...]: the script exits RC and prints MESSAGE.
expect_error() {
  local want_rc="$1" want_msg="$2" bench="$3" err rc
  shift 3
  set +e
  err="$(LLAMA_BENCH="$bench" LIFELINE="$T/lifeline" "$ROOT/scripts/bench-vs-llamacpp.sh" "$@" 2>&1)"
  rc=$?
  set -e
  [ "$rc" = "$want_rc" ] || fail "exit $rc, want $want_rc ($want_msg)"
  grep -q "$want_msg" <<<"$err" || fail "message: $err"
}
# No llama-bench: exit 2 with the reason, nothing run.
expect_error 2 "llama-bench not found" "$T/none" "$MODEL"
# A llama-bench that fails: an error naming the tool, not a table of nan.
printf '#!/usr/bin/env bash\nexit 4\n' > "$T/broken"
chmod +x "$T/broken"
expect_error 1 "llama-bench failed on" "$T/broken" -r 1 -p 16 -n 8 "$MODEL"
echo PASS
