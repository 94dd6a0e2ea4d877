// Which ggml type each tensor of a model gets for a "mostly X" file type. One function shared
// by make-model (synthetic weights) and quantize (re-encoding), so both write files laid out the
// way llama.cpp's llama-quantize lays them out for the same file type.
//
// The rules follow llama.cpp's llama-quant.cpp (llama_tensor_get_type) for the file types we
// produce, without importance matrix and for dense (non-MoE) models:
//   - only 2-D tensors whose name ends in "weight" and that are not norms are re-typed; the
//     rest keep their type (norms, biases: F32);
//   - F32/F16/BF16 file types: every re-typed tensor gets that type, nothing else;
//   - output.weight (or token_embd.weight when the model has no output.weight) gets Q6_K,
//     except in Q8_0 files (stays Q8_0) and when its row length isn't a multiple of the file
//     type's block (Q8_0);
//   - per-layer bumps: attn_v / ffn_down / attn_output for the K-quant mixes (Q2_K, Q3_K_*,
//     Q4_K_*, Q5_K_M) with llama.cpp's use_more_bits(layer) pattern; for IQ4_NL files attn_v
//     (with 4+ query heads per KV head) and the first eighth of ffn_down get Q5_K;
//   - a row length not divisible by the chosen type's block falls back Q4_K->Q5_0,
//     Q5_K->Q5_1, Q6_K->Q8_0, Q2_K and Q3_K->IQ4_NL (as current llama.cpp does) and to F16 if
//     that still doesn't fit.
//
// Thread-safety: pure functions over constant tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/kernels/ggml_type.h"

namespace lifeline::modelgen {

// llama.cpp's LLAMA_FTYPE numbering (written to general.file_type).
enum class FileType : uint32_t {
  kAllF32 = 0,
  kMostlyF16 = 1,
  kMostlyQ4_0 = 2,
  kMostlyQ4_1 = 3,
  kMostlyQ8_0 = 7,
  kMostlyQ5_0 = 8,
  kMostlyQ5_1 = 9,
  kMostlyQ2_K = 10,
  kMostlyQ3_K_S = 11,
  kMostlyQ3_K_M = 12,
  kMostlyQ3_K_L = 13,
  kMostlyQ4_K_S = 14,
  kMostlyQ4_K_M = 15,
  kMostlyQ5_K_S = 16,
  kMostlyQ5_K_M = 17,
  kMostlyQ6_K = 18,
  kMostlyIQ4_NL = 25,
  kMostlyBF16 = 32,
};

struct FileTypeInfo {
  FileType ftype;
  std::string_view name;  // as given to --type: "q4_k_m"
  GgmlType base_type;     // the type most weight matrices get
};

// All file types make-model and quantize accept, in a stable order (for --help and errors).
const std::vector<FileTypeInfo>& AllFileTypes();
std::optional<FileTypeInfo> FileTypeFromName(std::string_view name);
std::optional<FileTypeInfo> FileTypeFromId(uint32_t id);
// "f32|f16|...": for error messages and --help.
std::string FileTypeNamesJoined();

// What the policy needs to know about the model beyond one tensor.
struct ModelTypeContext {
  int64_t n_layers = 0;      // block_count
  int64_t n_head = 1;        // attention.head_count
  int64_t n_head_kv = 1;     // attention.head_count_kv
  bool has_output = true;    // false when the classifier is tied to token_embd
};

// True for the tensors a file type re-encodes: 2-D (or more) tensors named "*weight" that are
// not norms. Everything else is copied with its type unchanged.
bool IsQuantizableTensor(std::string_view name, int n_dims);

// Type for one quantizable tensor. `row_elems` is ne[0]. Returns the final type after the
// block-divisibility fallback (always a type whose block divides row_elems, or F16).
GgmlType ChooseTensorType(const ModelTypeContext& model, FileType ftype, std::string_view name,
                          int64_t row_elems);

// The layer number of "blk.N.*" tensors, nullopt for others.
std::optional<int64_t> LayerOfTensor(std::string_view name);

// True for file types whose base type is a block-quantized type (not F32/F16/BF16).
bool IsQuantizedFileType(FileType ftype);

}  // namespace lifeline::modelgen
