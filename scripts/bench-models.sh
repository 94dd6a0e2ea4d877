# Sourced by the engine benchmark scripts: the synthetic benchmark models, made once with
# `lifeline make-model` (seed 1) into a cache folder: 110M Q8_0 and Q4_0 (dim 768, 12 layers,
# ffn 2048), then the TinyLlama-1.1B shape (dim 2048, 22 layers, 32 heads, 4 KV heads, ffn
# 5632) in every weight type Lifeline loads (llama.cpp's mixes for the K-quant file types).
# bench_models LIFELINE DIR [TYPES] prints their paths, one per line, making the missing ones
# (bench_model below makes and prints one).
# TYPES: comma-separated 1.1B file types instead of all of them (e.g. q4_0,q4_k_m,q8_0); the
# 110M models come first either way. Making the IQ4_NL and K-quant files takes minutes each
# (their quantizers search for scales); the F16 / BF16 files are 2.2 GB each.
BENCH_TYPES_ALL="q4_0,q4_1,q5_0,q5_1,q8_0,q2_k,q3_k_m,q4_k_m,q5_k_m,q6_k,iq4_nl,f16,bf16"
bench_models() {
  local lifeline="$1" dir="$2" types="${3:-$BENCH_TYPES_ALL}" t
  bench_model "$lifeline" "$dir" 110m-q8_0
  bench_model "$lifeline" "$dir" 110m-q4_0
  for t in ${types//,/ }; do bench_model "$lifeline" "$dir" "1.1b-$t"; done
}
# bench_model LIFELINE DIR NAME: one of them, NAME = 110m-TYPE or 1.1b-TYPE; prints its path,
# making it first when missing (written to a temporary name, so an interrupted make leaves
# nothing that looks finished).
bench_model() {
  local lifeline="$1" dir="$2" name="$3" shape
  case "$name" in
    110m-*) shape="768 12 12 12 2048" ;;
    1.1b-*) shape="2048 22 32 4 5632" ;;
    *) echo "bench_model: unknown model '$name' (110m-TYPE or 1.1b-TYPE)" >&2; return 1 ;;
  esac
  local dim layers heads kv ffn out="$dir/$name.gguf"
  read -r dim layers heads kv ffn <<<"$shape"
  mkdir -p "$dir"
  if [ ! -f "$out" ]; then
    "$lifeline" make-model --arch llama --dim "$dim" --layers "$layers" --heads "$heads" \
      --kv-heads "$kv" --ffn "$ffn" --type "${name#*-}" --seed 1 -o "$out.tmp" >&2 || return 1
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}
