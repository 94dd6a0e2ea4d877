// libFuzzer harness for the GGUF reader (not part of the default build).
//
// Build and run from the repository root, e.g.:
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
//     -I. tests/fuzz/gguf_fuzz.cpp engine/gguf/*.cpp engine/kernels/ggml_type.cpp \
//     base/status.cpp -o gguf_fuzz
//   ./gguf_fuzz -max_len=65536 -rss_limit_mb=256 -malloc_limit_mb=64 corpus/
// A seed corpus: any small .gguf (../shared/models/stories260K.gguf, or files written by the
// writer tests). -malloc_limit_mb turns an oversized allocation into a reported failure.
//
// Beyond "no crash", every accepted file must satisfy the invariants the rest of the engine
// relies on; a violation aborts so the fuzzer records it.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "engine/gguf/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lifeline::GgufOpenOptions opts;
  opts.max_array_elems = 1 << 20;  // keep per-input work small
  auto f = lifeline::GgufFile::FromMemory(data, size, opts);
  if (!f.ok()) {
    if (f.status().message().empty()) std::abort();
    return 0;
  }
  const lifeline::GgufFile& file = **f;
  for (const auto& t : file.tensors()) {
    if (t.data < data || t.size_bytes > size ||
        static_cast<uint64_t>(t.data - data) > size - t.size_bytes) {
      std::abort();
    }
    volatile uint8_t sink = t.data[0] ^ t.data[t.size_bytes - 1];  // touch both ends
    (void)sink;
  }
  // Exercise the getters on every key with every accessor; results are ignored, only memory
  // safety matters here.
  for (const auto& kv : file.kvs()) {
    (void)file.GetUint(kv.key);
    (void)file.GetInt(kv.key);
    (void)file.GetFloat(kv.key);
    (void)file.GetBool(kv.key);
    (void)file.GetString(kv.key);
    (void)file.GetStringArray(kv.key);
    (void)file.GetFloatArray(kv.key);
    (void)file.GetInt32Array(kv.key);
  }
  return 0;
}
