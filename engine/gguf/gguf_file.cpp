// GGUF reader: mapping, bounds-checked parsing and validation of header, metadata and tensor
// table. Layout (little-endian), as defined by ggml's gguf format:
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x { string key | u32 value type | value }
//   n_tensors x { string name | u32 n_dims | i64 ne[n_dims] | u32 ggml type | u64 offset }
//   padding to the alignment | tensor data (offsets relative to here)
// where string = u64 length + bytes, and an array value = u32 element type + u64 count +
// elements (nested arrays repeat the array encoding per element).
#include "engine/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <numeric>
#include <utility>

#include "base/checked_math.h"
#include "engine/gguf/gguf_text.h"
#include "engine/gguf/mapping_guard.h"

namespace lifeline {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader memcpy's little-endian fields; a big-endian host needs byte swaps");

const char* GgufValueTypeName(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8: return "uint8";
    case GgufValueType::kInt8: return "int8";
    case GgufValueType::kUint16: return "uint16";
    case GgufValueType::kInt16: return "int16";
    case GgufValueType::kUint32: return "uint32";
    case GgufValueType::kInt32: return "int32";
    case GgufValueType::kFloat32: return "float32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "uint64";
    case GgufValueType::kInt64: return "int64";
    case GgufValueType::kFloat64: return "float64";
  }
  return "unknown";
}

uint64_t GgufValueTypeSize(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray: return 0;
  }
  return 0;
}

namespace {

constexpr uint32_t kMagicLe = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr std::string_view kAlignmentKey = "general.alignment";
// Smallest encodings of one record. A count in the file is rejected when count x minimum
// exceeds the bytes left, before anything is reserved for it.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;                  // key len, 1-byte key, type, u8
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // name, n_dims, ne[0], type, offset
constexpr uint64_t kMinStringBytes = 8;                          // length field of ""
constexpr uint64_t kMinArrayBytes = 4 + 8;                       // element type + count of []

std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0) return "(unformattable message)";
  return std::string(buf, std::min<size_t>(static_cast<size_t>(n), sizeof(buf) - 1));
}

bool KnownValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

// Bounds-checked reads over the image. Every accessor checks the bytes left first; a failed
// read leaves the position unchanged so the caller can report where it stopped.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }
  const uint8_t* ptr() const { return base_ + pos_; }

  template <typename T>
  bool Read(T* out) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(out, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool Skip(uint64_t n) {
    if (remaining() < n) return false;
    pos_ += n;
    return true;
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// Everything Parse() produces, moved into the GgufFile on success.
struct Parsed {
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<GgufKv> kvs;
  std::vector<GgufTensorInfo> tensors;
  std::unordered_map<std::string_view, size_t> kv_index;
  std::unordered_map<std::string_view, size_t> tensor_index;
};

class Parser {
 public:
  Parser(const uint8_t* base, uint64_t size, const GgufOpenOptions& opts)
      : c_(base, size), opts_(opts) {}

  Status Run(Parsed* out) {
    out_ = out;
    uint64_t n_tensors = 0, n_kv = 0;
    LL_RETURN_IF_ERROR(ParseHeader(&n_tensors, &n_kv));
    LL_RETURN_IF_ERROR(ParseKvs(n_kv));
    LL_RETURN_IF_ERROR(ApplyAlignment());
    LL_RETURN_IF_ERROR(ParseTensorTable(n_tensors));
    LL_RETURN_IF_ERROR(PlaceTensorData());
    return CheckNoOverlap();
  }

 private:
  Status Truncated(const std::string& ctx, const char* field, uint64_t need) const {
    return DataLoss(Fmt("%s: %s at byte %" PRIu64 " needs %" PRIu64
                        " bytes but the file ends at byte %" PRIu64,
                        ctx.c_str(), field, c_.pos(), need, c_.size()));
  }

  template <typename T>
  Status ReadField(const std::string& ctx, const char* field, T* out) {
    if (!c_.Read(out)) return Truncated(ctx, field, sizeof(T));
    return Status::Ok();
  }

  // A u64 count of records that each need at least `min_bytes`: capped, and no larger than the
  // bytes left could hold, so reserving `count` elements is justified by the file's size.
  Status CheckCount(const std::string& ctx, const char* field, uint64_t field_pos,
                    uint64_t count, uint64_t cap, uint64_t min_bytes) const {
    if (count > cap) {
      return DataLoss(Fmt("%s: %s %" PRIu64 " at byte %" PRIu64 " exceeds the cap %" PRIu64,
                          ctx.c_str(), field, count, field_pos, cap));
    }
    if (count > c_.remaining() / min_bytes) {
      return DataLoss(Fmt("%s: %s %" PRIu64 " at byte %" PRIu64 " needs at least %" PRIu64
                          " bytes each but only %" PRIu64 " bytes are left",
                          ctx.c_str(), field, count, field_pos, min_bytes, c_.remaining()));
    }
    return Status::Ok();
  }

  Status ReadString(const std::string& ctx, const char* field, std::string_view* out) {
    const uint64_t len_pos = c_.pos();
    uint64_t len = 0;
    if (!c_.Read(&len)) return Truncated(ctx, field, 8);
    if (len > opts_.max_string_bytes) {
      return DataLoss(Fmt("%s: %s length %" PRIu64 " at byte %" PRIu64 " exceeds the cap %" PRIu64,
                          ctx.c_str(), field, len, len_pos, opts_.max_string_bytes));
    }
    if (len > c_.remaining()) {
      return DataLoss(Fmt("%s: %s length %" PRIu64 " at byte %" PRIu64
                          " runs past the end of the file (%" PRIu64 " bytes left)",
                          ctx.c_str(), field, len, len_pos, c_.remaining()));
    }
    *out = std::string_view(reinterpret_cast<const char*>(c_.ptr()), len);
    c_.Skip(len);
    return Status::Ok();
  }

  Status ParseHeader(uint64_t* n_tensors, uint64_t* n_kv) {
    const std::string ctx = "header";
    uint32_t magic = 0;
    LL_RETURN_IF_ERROR(ReadField(ctx, "magic", &magic));
    if (magic != kMagicLe) {
      return DataLoss(Fmt("header: magic at byte 0 is 0x%08" PRIx32
                          " (\"%s\"), expected \"GGUF\"",
                          __builtin_bswap32(magic),
                          SanitizeForMessage(std::string_view(
                              reinterpret_cast<const char*>(c_.ptr()) - 4, 4)).c_str()));
    }
    uint32_t version = 0;
    LL_RETURN_IF_ERROR(ReadField(ctx, "version", &version));
    if (version != 2 && version != 3) {
      // A byte-swapped small number means a big-endian file, which ggml can write.
      const uint32_t swapped = __builtin_bswap32(version);
      const char* hint = (swapped == 2 || swapped == 3) ? " (a big-endian file?)" : "";
      return DataLoss(Fmt("unsupported GGUF version %" PRIu32 " at byte 4%s; supported: 2, 3",
                          version, hint));
    }
    out_->version = version;
    const uint64_t nt_pos = c_.pos();
    LL_RETURN_IF_ERROR(ReadField(ctx, "n_tensors", n_tensors));
    const uint64_t nkv_pos = c_.pos();
    LL_RETURN_IF_ERROR(ReadField(ctx, "n_kv", n_kv));
    LL_RETURN_IF_ERROR(
        CheckCount(ctx, "n_kv", nkv_pos, *n_kv, opts_.max_kv, kMinKvBytes));
    LL_RETURN_IF_ERROR(CheckCount(ctx, "n_tensors", nt_pos, *n_tensors, opts_.max_tensors,
                                  kMinTensorInfoBytes));
    return Status::Ok();
  }

  Status ParseKvs(uint64_t n_kv) {
    out_->kvs.reserve(n_kv);
    out_->kv_index.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) {
      const uint64_t rec_pos = c_.pos();
      std::string ctx = Fmt("kv %" PRIu64 " (at byte %" PRIu64 ")", i, rec_pos);
      std::string_view key;
      LL_RETURN_IF_ERROR(ReadString(ctx, "key", &key));
      if (key.empty()) return DataLoss(ctx + ": key is empty");
      ctx = Fmt("kv %" PRIu64 " '%s' (at byte %" PRIu64 ")", i,
                SanitizeForMessage(key).c_str(), rec_pos);
      auto [it, inserted] = out_->kv_index.emplace(key, out_->kvs.size());
      if (!inserted) {
        return DataLoss(Fmt("%s: duplicate key (first defined by kv %zu at byte %" PRIu64 ")",
                            ctx.c_str(), it->second, out_->kvs[it->second].file_offset));
      }
      GgufKv kv;
      kv.key = std::string(key);
      kv.file_offset = rec_pos;
      const uint64_t type_pos = c_.pos();
      uint32_t type = 0;
      LL_RETURN_IF_ERROR(ReadField(ctx, "value type", &type));
      if (!KnownValueType(type)) {
        return DataLoss(Fmt("%s: value type %" PRIu32 " at byte %" PRIu64
                            " is not a known GGUF value type",
                            ctx.c_str(), type, type_pos));
      }
      kv.value.type = static_cast<GgufValueType>(type);
      LL_RETURN_IF_ERROR(ParseValue(ctx, &kv.value));
      out_->kvs.push_back(std::move(kv));
    }
    return Status::Ok();
  }

  template <typename T>
  Status ReadScalar(const std::string& ctx, GgufValue* v) {
    T x{};
    if (!c_.Read(&x)) return Truncated(ctx, GgufValueTypeName(v->type), sizeof(T));
    if constexpr (std::is_floating_point_v<T>) {
      v->f64 = x;
    } else if constexpr (std::is_signed_v<T>) {
      v->i64 = x;
    } else {
      v->u64 = x;
    }
    return Status::Ok();
  }

  // Scalar or array value of type v->type (already read).
  Status ParseValue(const std::string& ctx, GgufValue* v) {
    switch (v->type) {
      case GgufValueType::kUint8: return ReadScalar<uint8_t>(ctx, v);
      case GgufValueType::kInt8: return ReadScalar<int8_t>(ctx, v);
      case GgufValueType::kUint16: return ReadScalar<uint16_t>(ctx, v);
      case GgufValueType::kInt16: return ReadScalar<int16_t>(ctx, v);
      case GgufValueType::kUint32: return ReadScalar<uint32_t>(ctx, v);
      case GgufValueType::kInt32: return ReadScalar<int32_t>(ctx, v);
      case GgufValueType::kUint64: return ReadScalar<uint64_t>(ctx, v);
      case GgufValueType::kInt64: return ReadScalar<int64_t>(ctx, v);
      case GgufValueType::kFloat32: return ReadScalar<float>(ctx, v);
      case GgufValueType::kFloat64: return ReadScalar<double>(ctx, v);
      case GgufValueType::kBool: {
        const uint64_t pos = c_.pos();
        uint8_t b = 0;
        if (!c_.Read(&b)) return Truncated(ctx, "bool", 1);
        if (b > 1) {
          return DataLoss(Fmt("%s: bool value %u at byte %" PRIu64 " is not 0 or 1",
                              ctx.c_str(), b, pos));
        }
        v->b = b != 0;
        return Status::Ok();
      }
      case GgufValueType::kString: return ReadString(ctx, "string value", &v->str);
      case GgufValueType::kArray: return ParseArray(ctx, /*depth=*/1, /*keep_strings=*/true, v);
    }
    return Internal(ctx + ": unhandled value type");
  }

  // Array body: element type, count, elements. `depth` is 1 for a top-level array. Work is
  // linear in the bytes consumed: fixed-size elements are skipped in one step and every string
  // or nested array consumes at least 8 bytes.
  Status ParseArray(const std::string& ctx, uint32_t depth, bool keep_strings, GgufValue* v) {
    const uint64_t start = c_.pos();
    uint32_t elem_type = 0;
    LL_RETURN_IF_ERROR(ReadField(ctx, "array element type", &elem_type));
    if (!KnownValueType(elem_type)) {
      return DataLoss(Fmt("%s: array element type %" PRIu32 " at byte %" PRIu64
                          " is not a known GGUF value type",
                          ctx.c_str(), elem_type, start));
    }
    const auto et = static_cast<GgufValueType>(elem_type);
    if (et == GgufValueType::kArray && depth + 1 > opts_.max_array_depth) {
      return DataLoss(Fmt("%s: array at byte %" PRIu64 " nests arrays deeper than %" PRIu32
                          " levels",
                          ctx.c_str(), start, opts_.max_array_depth));
    }
    const uint64_t count_pos = c_.pos();
    uint64_t count = 0;
    LL_RETURN_IF_ERROR(ReadField(ctx, "array count", &count));
    const uint64_t elem_size = GgufValueTypeSize(et);
    const uint64_t min_bytes = elem_size != 0                   ? elem_size
                               : et == GgufValueType::kString ? kMinStringBytes
                                                               : kMinArrayBytes;
    LL_RETURN_IF_ERROR(
        CheckCount(ctx, "array count", count_pos, count, opts_.max_array_elems, min_bytes));
    v->array_type = et;
    v->array_count = count;
    v->array_data = c_.ptr();
    if (elem_size != 0) {
      c_.Skip(count * elem_size);  // count <= remaining / elem_size: cannot overflow or overrun
    } else if (et == GgufValueType::kString) {
      if (keep_strings) v->strings.reserve(count);
      for (uint64_t i = 0; i < count; ++i) {
        std::string_view s;
        LL_RETURN_IF_ERROR(ReadString(ctx, "array string element", &s));
        if (keep_strings) v->strings.push_back(s);
      }
    } else {
      for (uint64_t i = 0; i < count; ++i) {
        GgufValue inner;
        inner.type = GgufValueType::kArray;
        LL_RETURN_IF_ERROR(ParseArray(ctx, depth + 1, /*keep_strings=*/false, &inner));
      }
    }
    v->array_bytes = c_.pos() - (count_pos + 8);
    return Status::Ok();
  }

  Status ApplyAlignment() {
    auto it = out_->kv_index.find(kAlignmentKey);
    if (it == out_->kv_index.end()) return Status::Ok();
    const GgufKv& kv = out_->kvs[it->second];
    const std::string ctx =
        Fmt("kv %zu '%s' (at byte %" PRIu64 ")", it->second, kv.key.c_str(), kv.file_offset);
    if (kv.value.type != GgufValueType::kUint32) {
      return DataLoss(Fmt("%s: type is %s, expected uint32", ctx.c_str(),
                          GgufValueTypeName(kv.value.type)));
    }
    const uint64_t a = kv.value.u64;
    if (!IsPowerOfTwo(a)) {
      return DataLoss(Fmt("%s: alignment %" PRIu64 " is not a power of two", ctx.c_str(), a));
    }
    if (a > opts_.max_alignment) {
      return DataLoss(Fmt("%s: alignment %" PRIu64 " exceeds the cap %" PRIu64, ctx.c_str(), a,
                          opts_.max_alignment));
    }
    out_->alignment = a;
    return Status::Ok();
  }

  Status ParseTensorTable(uint64_t n_tensors) {
    // Re-check against what is left after the metadata, then reserve.
    LL_RETURN_IF_ERROR(CheckCount("tensor table", "n_tensors", 8, n_tensors, opts_.max_tensors,
                                  kMinTensorInfoBytes));
    out_->tensors.reserve(n_tensors);
    out_->tensor_index.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
      GgufTensorInfo t;
      LL_RETURN_IF_ERROR(ParseTensorInfo(i, &t));
      out_->tensors.push_back(std::move(t));
    }
    return Status::Ok();
  }

  Status ParseTensorInfo(uint64_t i, GgufTensorInfo* t) {
    const uint64_t rec_pos = c_.pos();
    t->file_offset = rec_pos;
    std::string ctx = Fmt("tensor %" PRIu64 " (table entry %" PRIu64 " at byte %" PRIu64 ")", i,
                          i, rec_pos);
    std::string_view name;
    LL_RETURN_IF_ERROR(ReadString(ctx, "name", &name));
    if (name.empty()) return DataLoss(ctx + ": name is empty");
    ctx = Fmt("tensor '%s' (table entry %" PRIu64 " at byte %" PRIu64 ")",
              SanitizeForMessage(name).c_str(), i, rec_pos);
    auto [it, inserted] = out_->tensor_index.emplace(name, out_->tensors.size());
    if (!inserted) {
      return DataLoss(Fmt("%s: duplicate tensor name (first in table entry %zu at byte %" PRIu64
                          ")",
                          ctx.c_str(), it->second, out_->tensors[it->second].file_offset));
    }
    t->name = std::string(name);
    const uint64_t ndims_pos = c_.pos();
    uint32_t n_dims = 0;
    LL_RETURN_IF_ERROR(ReadField(ctx, "n_dims", &n_dims));
    if (n_dims < 1 || n_dims > 4) {
      return DataLoss(Fmt("%s: n_dims %" PRIu32 " at byte %" PRIu64 " is outside [1, 4]",
                          ctx.c_str(), n_dims, ndims_pos));
    }
    t->n_dims = static_cast<int>(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne_pos = c_.pos();
      LL_RETURN_IF_ERROR(ReadField(ctx, "ne", &t->ne[d]));
      if (t->ne[d] < 1) {
        return DataLoss(Fmt("%s: ne[%" PRIu32 "] = %" PRId64 " at byte %" PRIu64
                            " must be >= 1",
                            ctx.c_str(), d, t->ne[d], ne_pos));
      }
    }
    const uint64_t type_pos = c_.pos();
    uint32_t type_id = 0;
    LL_RETURN_IF_ERROR(ReadField(ctx, "type", &type_id));
    const std::optional<GgmlTypeTraits> traits = GetTypeTraits(type_id);
    if (!traits) {
      return DataLoss(Fmt("%s: type id %" PRIu32 " at byte %" PRIu64
                          " is not a known ggml type",
                          ctx.c_str(), type_id, type_pos));
    }
    t->type = traits->type;
    const uint64_t offset_pos = c_.pos();
    LL_RETURN_IF_ERROR(ReadField(ctx, "offset", &t->offset));
    LL_RETURN_IF_ERROR(CheckShape(ctx, *traits, t));
    if (t->offset % out_->alignment != 0) {
      return DataLoss(Fmt("%s: offset %" PRIu64 " at byte %" PRIu64
                          " is not a multiple of the alignment %" PRIu64,
                          ctx.c_str(), t->offset, offset_pos, out_->alignment));
    }
    return Status::Ok();
  }

  // Element count and byte size, both through checked math.
  Status CheckShape(const std::string& ctx, const GgmlTypeTraits& traits, GgufTensorInfo* t) {
    const std::string shape = Fmt("[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                                  t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    uint64_t n = 1;
    for (int d = 0; d < 4; ++d) {
      if (!CheckedMul(n, static_cast<uint64_t>(t->ne[d]), &n) ||
          n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return DataLoss(Fmt("%s: element count of shape %s overflows int64", ctx.c_str(),
                            shape.c_str()));
      }
    }
    if (t->ne[0] % traits.block_elems != 0) {
      return DataLoss(Fmt("%s: ne[0] = %" PRId64 " is not a multiple of the %.*s block size %" PRId64,
                          ctx.c_str(), t->ne[0], static_cast<int>(traits.name.size()),
                          traits.name.data(), traits.block_elems));
    }
    std::optional<uint64_t> bytes = RowBytes(t->type, t->ne[0]);
    uint64_t size = bytes.value_or(0);
    bool ok = bytes.has_value();
    for (int d = 1; d < 4 && ok; ++d) ok = CheckedMul(size, static_cast<uint64_t>(t->ne[d]), &size);
    if (!ok) {
      return DataLoss(Fmt("%s: byte size of %.*s shape %s overflows uint64", ctx.c_str(),
                          static_cast<int>(traits.name.size()), traits.name.data(),
                          shape.c_str()));
    }
    t->size_bytes = size;
    return Status::Ok();
  }

  Status PlaceTensorData() {
    uint64_t data_start = 0;
    if (!CheckedPad(c_.pos(), out_->alignment, &data_start)) {
      return DataLoss(Fmt("tensor table: end at byte %" PRIu64
                          " cannot be padded to the alignment %" PRIu64,
                          c_.pos(), out_->alignment));
    }
    out_->data_offset = data_start;
    const uint64_t file_size = c_.size();
    for (size_t i = 0; i < out_->tensors.size(); ++i) {
      GgufTensorInfo& t = out_->tensors[i];
      uint64_t begin = 0, end = 0;
      if (!CheckedAdd(data_start, t.offset, &begin) || !CheckedAdd(begin, t.size_bytes, &end) ||
          end > file_size) {
        return DataLoss(Fmt("%s: data [offset %" PRIu64 ", size %" PRIu64
                            ") ends past the file size %" PRIu64
                            " (data section starts at byte %" PRIu64 ")",
                            TensorCtx(i).c_str(), t.offset, t.size_bytes, file_size,
                            data_start));
      }
      t.data = c_.ptr() - c_.pos() + begin;
    }
    return Status::Ok();
  }

  Status CheckNoOverlap() const {
    const auto& ts = out_->tensors;
    std::vector<size_t> order(ts.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return ts[a].offset < ts[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const GgufTensorInfo& prev = ts[order[k - 1]];
      const GgufTensorInfo& cur = ts[order[k]];
      // prev.offset + prev.size_bytes was bounded by the file size above: no overflow.
      if (prev.offset + prev.size_bytes > cur.offset) {
        return DataLoss(Fmt("%s: data [offset %" PRIu64 ", size %" PRIu64
                            ") overlaps tensor '%s' (table entry %zu) data [offset %" PRIu64
                            ", size %" PRIu64 ")",
                            TensorCtx(order[k]).c_str(), cur.offset, cur.size_bytes,
                            SanitizeForMessage(prev.name).c_str(), order[k - 1], prev.offset,
                            prev.size_bytes));
      }
    }
    return Status::Ok();
  }

  std::string TensorCtx(size_t i) const {
    const GgufTensorInfo& t = out_->tensors[i];
    return Fmt("tensor '%s' (table entry %zu at byte %" PRIu64 ")",
               SanitizeForMessage(t.name).c_str(), i, t.file_offset);
  }

  Cursor c_;
  const GgufOpenOptions& opts_;
  Parsed* out_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path,
                                                 const GgufOpenOptions& opts) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string msg = "cannot open '" + path + "': " + std::strerror(err);
    return err == ENOENT ? NotFound(std::move(msg)) : IoError(std::move(msg));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("'" + path + "' is not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  void* addr = nullptr;
  if (size > 0 && opts.copy_to_memory) {
    addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return ResourceExhausted("cannot allocate " + std::to_string(size) + " bytes to copy '" +
                               path + "' into memory: " + std::strerror(err));
    }
    uint64_t done = 0;
    while (done < size) {
      const ssize_t n = ::pread(fd, static_cast<uint8_t*>(addr) + done,
                                std::min<uint64_t>(size - done, 1u << 30),
                                static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n < 0 ? errno : 0;
        ::munmap(addr, size);
        ::close(fd);
        return IoError("cannot read '" + path + "' at byte " + std::to_string(done) + ": " +
                       (n < 0 ? std::strerror(err) : "unexpected end of file"));
      }
      done += static_cast<uint64_t>(n);
    }
    (void)::mprotect(addr, size, PROT_READ);
  } else if (size > 0) {  // mmap of 0 bytes fails; an empty file is reported as truncated
    addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return IoError("cannot map '" + path + "' (" + std::to_string(size) +
                     " bytes): " + std::strerror(err));
    }
  }

  std::unique_ptr<GgufFile> f(new GgufFile());
  f->base_ = static_cast<const uint8_t*>(addr);
  f->size_ = size;
  f->mapped_ = size > 0;
  f->copied_ = opts.copy_to_memory;
  f->path_ = path;
  if (f->mapped_ && !f->copied_) {
    // Kept open so Integrity() can fstat the inode that is mapped, not whatever the path
    // names now.
    f->fd_ = fd;
    f->opened_mtime_ns_ = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
                          st.st_mtim.tv_nsec;
    f->guard_slot_ = GuardMapping(addr, size, path);
  } else {
    ::close(fd);
  }
  if (opts.mlock && f->mapped_) f->locked_ = ::mlock(addr, size) == 0;
  Status s = f->Parse(opts);
  if (!s.ok()) return Status(s.code(), path + ": " + s.message());
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::FromMemory(const uint8_t* data, uint64_t size,
                                                       const GgufOpenOptions& opts) {
  if (data == nullptr && size != 0) return InvalidArgument("GGUF image: null data with size > 0");
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->base_ = data;
  f->size_ = size;
  LL_RETURN_IF_ERROR(f->Parse(opts));
  return f;
}

void GgufFile::ReleasePages(const uint8_t* p, uint64_t bytes) const {
  // For a copy (copy_to_memory) the released pages are gone for good (zeros if touched):
  // the contract is that they are not read again.
  if (!mapped_ || locked_ || p < base_ || bytes > size_ ||
      static_cast<uint64_t>(p - base_) > size_ - bytes) {
    return;
  }
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

GgufFile::~GgufFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!mapped_) return;
  UnguardMapping(guard_slot_);  // before the range may be reused by another mapping
  void* addr = const_cast<uint8_t*>(base_);
  if (locked_) ::munlock(addr, size_);
  ::munmap(addr, size_);
}

bool GgufFile::ReadFaulted() const { return MappingFaulted(guard_slot_); }

Status GgufFile::Integrity() const {
  if (ReadFaulted()) {
    return DataLoss("model file '" + path_ + "': reading byte " +
                    std::to_string(MappingFaultOffset(guard_slot_)) +
                    " faulted (SIGBUS): the file was truncated while in use");
  }
  if (fd_ < 0) return Status::Ok();
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return Status::Ok();  // cannot tell: no news is good news
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
                           st.st_mtim.tv_nsec;
  if (static_cast<uint64_t>(st.st_size) != size_) {
    return DataLoss("model file '" + path_ + "' changed size while in use (" +
                    std::to_string(size_) + " -> " + std::to_string(st.st_size) + " bytes)");
  }
  if (mtime_ns != opened_mtime_ns_) {
    return DataLoss("model file '" + path_ + "' was modified in place while in use");
  }
  return Status::Ok();
}

Status GgufFile::Parse(const GgufOpenOptions& opts) {
  Parsed p;
  try {
    LL_RETURN_IF_ERROR(Parser(base_, size_, opts).Run(&p));
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory while parsing the GGUF metadata (" +
                             std::to_string(size_) + "-byte file)");
  }
  version_ = p.version;
  alignment_ = p.alignment;
  data_offset_ = p.data_offset;
  kvs_ = std::move(p.kvs);
  tensors_ = std::move(p.tensors);
  kv_index_ = std::move(p.kv_index);
  tensor_index_ = std::move(p.tensor_index);
  return Status::Ok();
}

const GgufKv* GgufFile::FindKv(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace lifeline
