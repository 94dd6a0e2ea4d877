# Sourced by the engine benchmark scripts: the synthetic benchmark models (110M and
# TinyLlama-1.1B shapes, seed 1), made once with `lifeline make-model` into a cache folder.
# bench_models LIFELINE DIR prints their paths, one per line, making the missing ones.
bench_models() {
  local lifeline="$1" dir="$2"
  mkdir -p "$dir"
  local spec name dim layers heads kv ffn type out
  for spec in "110m 768 12 12 12 2048 q8_0" "110m 768 12 12 12 2048 q4_0" \
              "1.1b 2048 22 32 4 5632 q4_0" "1.1b 2048 22 32 4 5632 q4_k_m" \
              "1.1b 2048 22 32 4 5632 q8_0"; do
    read -r name dim layers heads kv ffn type <<<"$spec"
    out="$dir/$name-$type.gguf"
    [ -f "$out" ] || "$lifeline" make-model --arch llama --dim "$dim" --layers "$layers" \
      --heads "$heads" --kv-heads "$kv" --ffn "$ffn" --type "$type" --seed 1 -o "$out" >&2
    echo "$out"
  done
}
