# Sourced by the engine benchmark scripts: the synthetic benchmark models, made once with
# `lifeline make-model` (seed 1) into a cache folder: 110M Q8_0 and Q4_0 (dim 768, 12 layers,
# ffn 2048), then the TinyLlama-1.1B shape (dim 2048, 22 layers, 32 heads, 4 KV heads, ffn
# 5632) in every weight type Lifeline loads (llama.cpp's mixes for the K-quant file types).
# bench_models LIFELINE DIR [TYPES] prints their paths, one per line, making the missing ones.
# TYPES: comma-separated 1.1B file types instead of all of them (e.g. q4_0,q4_k_m,q8_0); the
# 110M models come first either way. Making the IQ4_NL and K-quant files takes minutes each
# (their quantizers search for scales); the F16 / BF16 files are 2.2 GB each.
BENCH_TYPES_ALL="q4_0,q4_1,q5_0,q5_1,q8_0,q2_k,q3_k_m,q4_k_m,q5_k_m,q6_k,iq4_nl,f16,bf16"
bench_models() {
  local lifeline="$1" dir="$2" types="${3:-$BENCH_TYPES_ALL}"
  mkdir -p "$dir"
  local specs=("110m 768 12 12 12 2048 q8_0" "110m 768 12 12 12 2048 q4_0") t
  for t in ${types//,/ }; do specs+=("1.1b 2048 22 32 4 5632 $t"); done
  local spec name dim layers heads kv ffn type out
  for spec in "${specs[@]}"; do
    read -r name dim layers heads kv ffn type <<<"$spec"
    out="$dir/$name-$type.gguf"
    [ -f "$out" ] || "$lifeline" make-model --arch llama --dim "$dim" --layers "$layers" \
      --heads "$heads" --kv-heads "$kv" --ffn "$ffn" --type "$type" --seed 1 -o "$out" >&2
    echo "$out"
  done
}
