# Shared by scripts/bench-slo.sh and scripts/bench-slo-matrix.sh (sourced, not run): build
# `lifeline` when missing, and the two synthetic cascade models they serve, made once into a
# cache. Expects LIFELINE, BUILD_DIR, MODEL_DIR and BENCH_NAME (the prefix of messages) set.

# (a) build lifeline if needed.
if [ ! -x "$LIFELINE" ]; then
  echo "$BENCH_NAME: building $LIFELINE" >&2
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$BUILD_DIR" -j "${LIFELINE_JOBS:-2}" lifeline
fi

# (b) the synthetic models, made once into the cache (same seed and vocabulary size, so a
# prompt tokenizes the same way for both): heavy = the 110M shape, light = 256 x 4.
mkdir -p "$MODEL_DIR"
bench_make_model() {  # file dim layers heads kv_heads ffn
  local out="$MODEL_DIR/$1"
  if [ ! -f "$out" ]; then
    echo "$BENCH_NAME: making $out" >&2
    "$LIFELINE" make-model --arch llama --dim "$2" --layers "$3" --heads "$4" --kv-heads "$5" \
      --ffn "$6" --vocab 32000 --type q8_0 --seed 1 -o "$out.tmp" >&2
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}
HEAVY="$(bench_make_model 110m-q8_0.gguf 768 12 12 12 2048)"
LIGHT="$(bench_make_model light-256x4-q8_0.gguf 256 4 8 2 768)"
