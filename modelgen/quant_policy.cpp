#include "modelgen/quant_policy.h"

#include <charconv>

namespace lifeline::modelgen {
namespace {

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// llama.cpp's use_more_bits: the first and last eighth of the layers, and every third layer in
// between, get the larger type in the *_M mixes.
bool UseMoreBits(int64_t i_layer, int64_t n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 ||
         (i_layer - n_layers / 8) % 3 == 2;
}

bool RowFits(GgmlType type, int64_t row_elems) {
  return row_elems % TypeTraits(type).block_elems == 0;
}

GgmlType OutputType(FileType ftype, GgmlType base, int64_t row_elems) {
  if (!RowFits(base, row_elems)) return GgmlType::kQ8_0;
  if (ftype == FileType::kMostlyQ8_0) return GgmlType::kQ8_0;
  return GgmlType::kQ6_K;
}

GgmlType AttnVType(const ModelTypeContext& m, FileType ftype, int64_t layer, GgmlType t) {
  const int64_t n_gqa = m.n_head_kv > 0 ? m.n_head / m.n_head_kv : 1;
  switch (ftype) {
    case FileType::kMostlyQ2_K:
      return n_gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
    case FileType::kMostlyQ3_K_M:
      return layer < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    case FileType::kMostlyQ3_K_L:
      return GgmlType::kQ5_K;
    case FileType::kMostlyQ4_K_M:
    case FileType::kMostlyQ5_K_M:
      return UseMoreBits(layer, m.n_layers) ? GgmlType::kQ6_K : t;
    case FileType::kMostlyQ4_K_S:
      return layer < 4 ? GgmlType::kQ5_K : t;
    case FileType::kMostlyIQ4_NL:
      return n_gqa >= 4 ? GgmlType::kQ5_K : t;
    default:
      return t;
  }
}

GgmlType FfnDownType(const ModelTypeContext& m, FileType ftype, int64_t layer, GgmlType t) {
  const int64_t n = m.n_layers;
  switch (ftype) {
    case FileType::kMostlyQ2_K:
      return GgmlType::kQ3_K;
    case FileType::kMostlyIQ4_NL:
      return layer < n / 8 ? GgmlType::kQ5_K : t;
    case FileType::kMostlyQ3_K_M:
      // llama.cpp keeps Q3_K only for Falcon's non-"more bits" layers; other archs get Q4_K.
      return layer < n / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
    case FileType::kMostlyQ3_K_L:
      return GgmlType::kQ5_K;
    case FileType::kMostlyQ4_K_M:
    case FileType::kMostlyQ5_K_M:
      return UseMoreBits(layer, n) ? GgmlType::kQ6_K : t;
    case FileType::kMostlyQ4_K_S:
      return layer < n / 8 ? GgmlType::kQ5_K : t;
    default:
      return t;
  }
}

GgmlType AttnOutputType(FileType ftype, GgmlType t) {
  switch (ftype) {
    case FileType::kMostlyQ2_K:
      return GgmlType::kQ3_K;
    case FileType::kMostlyQ3_K_M:
      return GgmlType::kQ4_K;
    case FileType::kMostlyQ3_K_L:
      return GgmlType::kQ5_K;
    default:
      return t;
  }
}

GgmlType AttnQkvType(FileType ftype, GgmlType t) {
  switch (ftype) {
    case FileType::kMostlyQ3_K_M:
    case FileType::kMostlyQ3_K_L:
      return GgmlType::kQ4_K;
    case FileType::kMostlyQ4_K_M:
      return GgmlType::kQ5_K;
    case FileType::kMostlyQ5_K_M:
      return GgmlType::kQ6_K;
    default:
      return t;
  }
}

// A K-quant needs rows of 256; when a row is shorter (or not a multiple), use the 32-block
// type of about the same size. F16 when even that doesn't fit.
GgmlType FallbackForRow(GgmlType t, int64_t row_elems) {
  if (RowFits(t, row_elems)) return t;
  GgmlType alt = GgmlType::kF16;
  switch (t) {
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K: alt = GgmlType::kIQ4_NL; break;
    case GgmlType::kQ4_K: alt = GgmlType::kQ5_0; break;
    case GgmlType::kQ5_K: alt = GgmlType::kQ5_1; break;
    case GgmlType::kQ6_K: alt = GgmlType::kQ8_0; break;
    default: break;
  }
  return RowFits(alt, row_elems) ? alt : GgmlType::kF16;
}

}  // namespace

const std::vector<FileTypeInfo>& AllFileTypes() {
  static const std::vector<FileTypeInfo> kTypes = {
      {FileType::kAllF32, "f32", GgmlType::kF32},
      {FileType::kMostlyF16, "f16", GgmlType::kF16},
      {FileType::kMostlyBF16, "bf16", GgmlType::kBF16},
      {FileType::kMostlyQ8_0, "q8_0", GgmlType::kQ8_0},
      {FileType::kMostlyQ4_0, "q4_0", GgmlType::kQ4_0},
      {FileType::kMostlyQ4_1, "q4_1", GgmlType::kQ4_1},
      {FileType::kMostlyQ5_0, "q5_0", GgmlType::kQ5_0},
      {FileType::kMostlyQ5_1, "q5_1", GgmlType::kQ5_1},
      {FileType::kMostlyQ2_K, "q2_k", GgmlType::kQ2_K},
      {FileType::kMostlyQ3_K_S, "q3_k_s", GgmlType::kQ3_K},
      {FileType::kMostlyQ3_K_M, "q3_k_m", GgmlType::kQ3_K},
      {FileType::kMostlyQ3_K_L, "q3_k_l", GgmlType::kQ3_K},
      {FileType::kMostlyQ4_K_S, "q4_k_s", GgmlType::kQ4_K},
      {FileType::kMostlyQ4_K_M, "q4_k_m", GgmlType::kQ4_K},
      {FileType::kMostlyQ5_K_S, "q5_k_s", GgmlType::kQ5_K},
      {FileType::kMostlyQ5_K_M, "q5_k_m", GgmlType::kQ5_K},
      {FileType::kMostlyQ6_K, "q6_k", GgmlType::kQ6_K},
      {FileType::kMostlyIQ4_NL, "iq4_nl", GgmlType::kIQ4_NL},
  };
  return kTypes;
}

std::optional<FileTypeInfo> FileTypeFromName(std::string_view name) {
  for (const auto& t : AllFileTypes()) {
    if (t.name == name) return t;
  }
  return std::nullopt;
}

std::optional<FileTypeInfo> FileTypeFromId(uint32_t id) {
  for (const auto& t : AllFileTypes()) {
    if (static_cast<uint32_t>(t.ftype) == id) return t;
  }
  return std::nullopt;
}

std::string FileTypeNamesJoined() {
  std::string out;
  for (const auto& t : AllFileTypes()) {
    if (!out.empty()) out += '|';
    out += t.name;
  }
  return out;
}

bool IsQuantizedFileType(FileType ftype) {
  return ftype != FileType::kAllF32 && ftype != FileType::kMostlyF16 &&
         ftype != FileType::kMostlyBF16;
}

bool IsQuantizableTensor(std::string_view name, int n_dims) {
  return EndsWith(name, "weight") && n_dims >= 2 && !Contains(name, "_norm.weight") &&
         !Contains(name, "ffn_gate_inp.weight");
}

std::optional<int64_t> LayerOfTensor(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const char* begin = name.data() + kPrefix.size();
  const char* end = name.data() + name.size();
  int64_t layer = 0;
  auto [p, ec] = std::from_chars(begin, end, layer);
  if (ec != std::errc() || p == begin || p == end || *p != '.') return std::nullopt;
  return layer;
}

GgmlType ChooseTensorType(const ModelTypeContext& model, FileType ftype, std::string_view name,
                          int64_t row_elems) {
  const auto info = FileTypeFromId(static_cast<uint32_t>(ftype));
  const GgmlType base = info ? info->base_type : GgmlType::kF32;
  // llama.cpp applies the per-tensor rules only when the file type is block-quantized.
  if (!IsQuantizedFileType(ftype)) return base;

  const int64_t layer = LayerOfTensor(name).value_or(0);
  GgmlType t = base;
  if (name == "output.weight" || (!model.has_output && name == "token_embd.weight")) {
    t = OutputType(ftype, base, row_elems);
  } else if (name == "token_embd.weight") {
    t = base;
  } else if (Contains(name, "attn_v.weight")) {
    t = AttnVType(model, ftype, layer, base);
  } else if (Contains(name, "ffn_down")) {
    t = FfnDownType(model, ftype, layer, base);
  } else if (Contains(name, "attn_output.weight")) {
    t = AttnOutputType(ftype, base);
  } else if (Contains(name, "attn_qkv.weight")) {
    t = AttnQkvType(ftype, base);
  }
  return FallbackForRow(t, row_elems);
}

}  // namespace lifeline::modelgen
