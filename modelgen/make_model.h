// make-model: writes a synthetic model with random weights as a standard GGUF file (llama.cpp
// names, shapes, metadata keys and file-type numbering), for tests and benchmarks of any shape
// and weight type without downloading a model.
//
// Memory: tensors are produced inside the GGUF writer's fill callback, one tensor buffer at a
// time, row by row (a row is drawn in f32 and quantized straight into the tensor buffer), so
// peak memory is about the largest tensor plus one f32 row per thread.
// Determinism: each row's values come from a generator seeded by (seed, tensor name, row), so
// the same options give a byte-identical file for any thread count, and the f32 values of a
// tensor don't depend on --type (a q4_0 file is the f32 file quantized).
//
// Thread-safety: MakeModel may run concurrently with other calls (no shared state); it uses
// `threads` threads of its own. Fails with InvalidArgument naming the flag for bad options,
// with the reader's / writer's Status for unreadable --vocab-from or unwritable output.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "modelgen/model_plan.h"
#include "modelgen/quant_policy.h"

namespace lifeline::modelgen {

struct MakeModelOptions {
  ModelShape shape;
  FileType ftype = FileType::kAllF32;
  uint64_t seed = 0;
  int threads = 1;
  std::string vocab_from;  // a GGUF file whose tokenizer.* keys are copied; empty: built-in
  std::string out_path;
  std::string name;        // general.name; empty: "synthetic-<arch>-<dim>x<layers>"
};

inline constexpr int kMaxToolThreads = 256;
// general.quantization_version: the revision of the block formats written (ggml's
// GGML_QNT_VERSION); readers reject files whose quantized blocks use another revision.
inline constexpr uint32_t kQuantizationVersion = 2;

Status MakeModel(const MakeModelOptions& opts);

}  // namespace lifeline::modelgen
