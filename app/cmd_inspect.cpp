// `lifeline inspect MODEL.gguf [--json]`: header, metadata and tensor table of a GGUF file.
// The file is validated by GgufFile::Open first; an invalid file prints one line
// `lifeline inspect: <error>` on stderr and exits 1.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_text.h"

namespace lifeline::app {
namespace {

constexpr uint64_t kTextArrayPreview = 8;    // elements shown per array in text mode
constexpr uint64_t kJsonArrayPreview = 16;   // elements kept per array in JSON
constexpr size_t kTextStringChars = 120;     // long strings (templates) are cut in text mode

struct InspectOptions {
  std::string path;
  bool json = false;
};

// Element i of a fixed-size array, as JSON. `data` is the validated payload in the mapping.
nlohmann::json FixedElement(GgufValueType t, const uint8_t* data, uint64_t i) {
  auto load = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, data + i * sizeof(v), sizeof(v));
    return v;
  };
  switch (t) {
    case GgufValueType::kUint8: return load(uint8_t{});
    case GgufValueType::kInt8: return load(int8_t{});
    case GgufValueType::kUint16: return load(uint16_t{});
    case GgufValueType::kInt16: return load(int16_t{});
    case GgufValueType::kUint32: return load(uint32_t{});
    case GgufValueType::kInt32: return load(int32_t{});
    case GgufValueType::kUint64: return load(uint64_t{});
    case GgufValueType::kInt64: return load(int64_t{});
    case GgufValueType::kFloat32: return load(float{});
    case GgufValueType::kFloat64: return load(double{});
    case GgufValueType::kBool: return load(uint8_t{}) != 0;
    case GgufValueType::kString:
    case GgufValueType::kArray: break;
  }
  return nullptr;
}

nlohmann::json ScalarJson(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64: return v.u64;
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64: return v.i64;
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: return v.f64;
    case GgufValueType::kBool: return v.b;
    case GgufValueType::kString: return std::string(v.str);
    case GgufValueType::kArray: break;
  }
  return nullptr;
}

// Arrays: {"type": element type, "count": n, "values": first `limit` elements}. Elements of
// nested arrays are not decoded (shown as null).
nlohmann::json ValueJson(const GgufValue& v, uint64_t limit) {
  if (v.type != GgufValueType::kArray) return ScalarJson(v);
  nlohmann::json values = nlohmann::json::array();
  const uint64_t n = std::min(v.array_count, limit);
  for (uint64_t i = 0; i < n; ++i) {
    if (v.array_type == GgufValueType::kString) {
      values.push_back(std::string(v.strings[i]));
    } else {
      values.push_back(FixedElement(v.array_type, v.array_data, i));
    }
  }
  return {{"type", GgufValueTypeName(v.array_type)}, {"count", v.array_count},
          {"values", std::move(values)}};
}

std::string ShapeText(const GgufTensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

std::string ValueText(const GgufValue& v) {
  if (v.type == GgufValueType::kString) {
    return "\"" + SanitizeForMessage(v.str, kTextStringChars) + "\"";
  }
  if (v.type != GgufValueType::kArray) {
    return ScalarJson(v).dump();
  }
  std::string s = std::string("[") + GgufValueTypeName(v.array_type) + " x " +
                  std::to_string(v.array_count) + "]";
  if (v.array_type == GgufValueType::kArray || v.array_count == 0) return s;
  s += " ";
  const uint64_t n = std::min(v.array_count, kTextArrayPreview);
  for (uint64_t i = 0; i < n; ++i) {
    s += i ? ", " : "";
    s += v.array_type == GgufValueType::kString
             ? "\"" + SanitizeForMessage(v.strings[i], 32) + "\""
             : FixedElement(v.array_type, v.array_data, i).dump();
  }
  if (v.array_count > n) s += ", ...";
  return s;
}

void PrintText(const GgufFile& f) {
  std::printf("GGUF version %" PRIu32 ", %" PRIu64 " bytes, alignment %" PRIu64
              ", data offset %" PRIu64 "\n",
              f.version(), f.file_size(), f.alignment(), f.data_offset());
  std::printf("\n%zu metadata keys:\n", f.kvs().size());
  for (const GgufKv& kv : f.kvs()) {
    const std::string type = kv.value.type == GgufValueType::kArray
                                 ? "array"
                                 : GgufValueTypeName(kv.value.type);
    std::printf("  %-44s %-8s %s\n", SanitizeForMessage(kv.key).c_str(), type.c_str(),
                ValueText(kv.value).c_str());
  }
  uint64_t total_bytes = 0, total_elems = 0;
  std::printf("\n%zu tensors:\n", f.tensors().size());
  std::printf("  %-36s %-6s %-22s %12s %12s\n", "name", "type", "shape", "offset", "bytes");
  for (const GgufTensorInfo& t : f.tensors()) {
    const std::string_view type = TypeTraits(t.type).name;
    std::printf("  %-36s %-6.*s %-22s %12" PRIu64 " %12" PRIu64 "\n",
                SanitizeForMessage(t.name).c_str(), static_cast<int>(type.size()), type.data(),
                ShapeText(t).c_str(), t.offset, t.size_bytes);
    total_bytes += t.size_bytes;
    total_elems += t.n_elements();
  }
  std::printf("\ntotal: %" PRIu64 " parameters, %" PRIu64 " bytes of tensor data\n",
              total_elems, total_bytes);
}

void PrintJson(const GgufFile& f) {
  nlohmann::json metadata = nlohmann::json::object();
  for (const GgufKv& kv : f.kvs()) metadata[kv.key] = ValueJson(kv.value, kJsonArrayPreview);
  nlohmann::json tensors = nlohmann::json::array();
  for (const GgufTensorInfo& t : f.tensors()) {
    tensors.push_back({{"name", t.name},
                       {"type", std::string(TypeTraits(t.type).name)},
                       {"shape", std::vector<int64_t>(t.ne, t.ne + t.n_dims)},
                       {"offset", t.offset},
                       {"size_bytes", t.size_bytes}});
  }
  nlohmann::json out = {{"version", f.version()},     {"alignment", f.alignment()},
                        {"data_offset", f.data_offset()}, {"file_size", f.file_size()},
                        {"metadata", std::move(metadata)}, {"tensors", std::move(tensors)}};
  // Strings in a GGUF need not be valid UTF-8: replace bad bytes rather than throw.
  std::puts(out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

int RunInspect(const InspectOptions& opts) {
  auto file = GgufFile::Open(opts.path);
  if (!file.ok()) {
    std::fprintf(stderr, "lifeline inspect: %s\n", file.status().ToString().c_str());
    return 1;
  }
  try {
    if (opts.json) {
      PrintJson(**file);
    } else {
      PrintText(**file);
    }
  } catch (const std::exception& e) {  // nlohmann or allocation failure
    std::fprintf(stderr, "lifeline inspect: %s\n", e.what());
    return 1;
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

CommandFn RegisterInspect(CLI::App& root) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App* cmd = root.add_subcommand("inspect", "Show a GGUF file's metadata and tensor table");
  cmd->add_option("model", opts->path, "GGUF file to inspect")->required();
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of text");
  return [opts] { return RunInspect(*opts); };
}

}  // namespace lifeline::app
