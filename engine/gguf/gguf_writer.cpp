#include "engine/gguf/gguf_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <unordered_set>

#include "base/checked_math.h"

namespace lifeline {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint32_t kDefaultAlignment = 32;
constexpr char kAlignmentKey[] = "general.alignment";
constexpr size_t kIoBufferBytes = 1 << 20;

template <typename T>
void Append(std::vector<uint8_t>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));  // little-endian host (see gguf_file.cpp)
}

void AppendString(std::vector<uint8_t>* out, std::string_view s) {
  Append<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

template <typename T>
std::vector<uint8_t> EncodeScalar(GgufValueType type, T v) {
  std::vector<uint8_t> e;
  Append<uint32_t>(&e, static_cast<uint32_t>(type));
  Append<T>(&e, v);
  return e;
}

std::vector<uint8_t> EncodeArrayHeader(GgufValueType elem, uint64_t count) {
  std::vector<uint8_t> e;
  Append<uint32_t>(&e, static_cast<uint32_t>(GgufValueType::kArray));
  Append<uint32_t>(&e, static_cast<uint32_t>(elem));
  Append<uint64_t>(&e, count);
  return e;
}

// Closes the FILE and, unless released, removes what was written, so a failed Write() leaves
// no truncated model behind. Only regular files are removed (never e.g. a device node).
class OutputFile {
 public:
  explicit OutputFile(const std::string& path) : path_(path) {}
  ~OutputFile() {
    if (f_ == nullptr) return;
    std::fclose(f_);
    if (!keep_ && created_regular_) ::unlink(path_.c_str());
  }
  Status Open() {
    f_ = std::fopen(path_.c_str(), "wb");
    if (f_ == nullptr) {
      return IoError("GGUF writer: cannot create '" + path_ + "': " + std::strerror(errno));
    }
    struct stat st {};
    created_regular_ = ::fstat(fileno(f_), &st) == 0 && S_ISREG(st.st_mode);
    buffer_ = std::make_unique<char[]>(kIoBufferBytes);
    std::setvbuf(f_, buffer_.get(), _IOFBF, kIoBufferBytes);
    return Status::Ok();
  }
  Status Write(const void* data, size_t n) {
    if (n != 0 && std::fwrite(data, 1, n, f_) != n) return Failed("write");
    written_ += n;
    return Status::Ok();
  }
  Status PadTo(uint64_t alignment) {
    static const uint8_t kZeros[256] = {};
    uint64_t padded = 0;
    if (!CheckedPad(written_, alignment, &padded)) return Internal("GGUF writer: pad overflow");
    for (uint64_t left = padded - written_; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, sizeof(kZeros)));
      LL_RETURN_IF_ERROR(Write(kZeros, n));
      left -= n;
    }
    return Status::Ok();
  }
  Status Close() {
    FILE* f = f_;
    f_ = nullptr;
    const bool flushed = std::fflush(f) == 0;
    const int err = errno;
    const bool closed = std::fclose(f) == 0;
    if (!flushed || !closed) {
      if (created_regular_) ::unlink(path_.c_str());
      return IoError("GGUF writer: cannot finish '" + path_ + "': " +
                     std::strerror(flushed ? errno : err));
    }
    keep_ = true;
    return Status::Ok();
  }
  uint64_t written() const { return written_; }

 private:
  Status Failed(const char* what) {
    return IoError(std::string("GGUF writer: ") + what + " to '" + path_ + "' failed at byte " +
                   std::to_string(written_) + ": " + std::strerror(errno));
  }
  std::string path_;
  FILE* f_ = nullptr;
  std::unique_ptr<char[]> buffer_;  // must outlive f_ (setvbuf)
  uint64_t written_ = 0;
  bool created_regular_ = false;
  bool keep_ = false;
};

}  // namespace

void GgufWriter::Put(const std::string& key, std::vector<uint8_t> encoded) {
  auto [it, inserted] = kv_index_.emplace(key, kvs_.size());
  if (inserted) {
    kvs_.push_back(Kv{key, std::move(encoded)});
  } else {
    kvs_[it->second].encoded = std::move(encoded);
  }
}

void GgufWriter::AddUint8(const std::string& k, uint8_t v) { Put(k, EncodeScalar(GgufValueType::kUint8, v)); }
void GgufWriter::AddInt8(const std::string& k, int8_t v) { Put(k, EncodeScalar(GgufValueType::kInt8, v)); }
void GgufWriter::AddUint16(const std::string& k, uint16_t v) { Put(k, EncodeScalar(GgufValueType::kUint16, v)); }
void GgufWriter::AddInt16(const std::string& k, int16_t v) { Put(k, EncodeScalar(GgufValueType::kInt16, v)); }
void GgufWriter::AddUint32(const std::string& k, uint32_t v) { Put(k, EncodeScalar(GgufValueType::kUint32, v)); }
void GgufWriter::AddInt32(const std::string& k, int32_t v) { Put(k, EncodeScalar(GgufValueType::kInt32, v)); }
void GgufWriter::AddUint64(const std::string& k, uint64_t v) { Put(k, EncodeScalar(GgufValueType::kUint64, v)); }
void GgufWriter::AddInt64(const std::string& k, int64_t v) { Put(k, EncodeScalar(GgufValueType::kInt64, v)); }
void GgufWriter::AddFloat32(const std::string& k, float v) { Put(k, EncodeScalar(GgufValueType::kFloat32, v)); }
void GgufWriter::AddFloat64(const std::string& k, double v) { Put(k, EncodeScalar(GgufValueType::kFloat64, v)); }
void GgufWriter::AddBool(const std::string& k, bool v) {
  Put(k, EncodeScalar<uint8_t>(GgufValueType::kBool, v ? 1 : 0));
}

void GgufWriter::AddString(const std::string& key, const std::string& v) {
  std::vector<uint8_t> e;
  Append<uint32_t>(&e, static_cast<uint32_t>(GgufValueType::kString));
  AppendString(&e, v);
  Put(key, std::move(e));
}

void GgufWriter::AddStringArray(const std::string& key, const std::vector<std::string>& v) {
  std::vector<uint8_t> e = EncodeArrayHeader(GgufValueType::kString, v.size());
  size_t total = e.size();
  for (const auto& s : v) total += 8 + s.size();
  e.reserve(total);
  for (const auto& s : v) AppendString(&e, s);
  Put(key, std::move(e));
}

void GgufWriter::AddFloat32Array(const std::string& key, const std::vector<float>& v) {
  AddArray(key, GgufValueType::kFloat32, v.data(), v.size());
}

void GgufWriter::AddInt32Array(const std::string& key, const std::vector<int32_t>& v) {
  AddArray(key, GgufValueType::kInt32, v.data(), v.size());
}

void GgufWriter::AddArray(const std::string& key, GgufValueType elem_type, const void* elems,
                          uint64_t count) {
  const uint64_t elem_bytes = GgufValueTypeSize(elem_type);
  if (elem_bytes == 0) {
    deferred_error_ = "GGUF writer: AddArray for key '" + key + "' needs a fixed-size element " +
                      "type, got " + GgufValueTypeName(elem_type);
    return;
  }
  std::vector<uint8_t> e = EncodeArrayHeader(elem_type, count);
  const auto* p = static_cast<const uint8_t*>(elems);
  e.insert(e.end(), p, p + count * elem_bytes);
  Put(key, std::move(e));
}

void GgufWriter::CopyKv(const GgufFile& src, const GgufKv& kv) {
  const GgufValue& v = kv.value;
  switch (v.type) {
    case GgufValueType::kUint8: return AddUint8(kv.key, static_cast<uint8_t>(v.u64));
    case GgufValueType::kInt8: return AddInt8(kv.key, static_cast<int8_t>(v.i64));
    case GgufValueType::kUint16: return AddUint16(kv.key, static_cast<uint16_t>(v.u64));
    case GgufValueType::kInt16: return AddInt16(kv.key, static_cast<int16_t>(v.i64));
    case GgufValueType::kUint32: return AddUint32(kv.key, static_cast<uint32_t>(v.u64));
    case GgufValueType::kInt32: return AddInt32(kv.key, static_cast<int32_t>(v.i64));
    case GgufValueType::kUint64: return AddUint64(kv.key, v.u64);
    case GgufValueType::kInt64: return AddInt64(kv.key, v.i64);
    case GgufValueType::kFloat32: return AddFloat32(kv.key, static_cast<float>(v.f64));
    case GgufValueType::kFloat64: return AddFloat64(kv.key, v.f64);
    case GgufValueType::kBool: return AddBool(kv.key, v.b);
    case GgufValueType::kString: return AddString(kv.key, std::string(v.str));
    case GgufValueType::kArray: {
      // The payload was validated by the reader and keeps its GGUF encoding (strings and
      // nested arrays included): copy the bytes as they are.
      std::vector<uint8_t> e = EncodeArrayHeader(v.array_type, v.array_count);
      e.insert(e.end(), v.array_data, v.array_data + v.array_bytes);
      return Put(kv.key, std::move(e));
    }
  }
  deferred_error_ = "GGUF writer: CopyKv for key '" + kv.key + "' has an unknown value type";
}

size_t GgufWriter::AddTensor(const std::string& name, GgmlType type, std::vector<int64_t> ne) {
  tensors_.push_back(Tensor{name, type, std::move(ne)});
  return tensors_.size() - 1;
}

std::vector<uint8_t> GgufWriter::EncodeHeader(const std::vector<uint64_t>& offsets) const {
  const bool add_alignment_kv =
      alignment_ != kDefaultAlignment && kv_index_.find(kAlignmentKey) == kv_index_.end();
  std::vector<uint8_t> h;
  Append<uint32_t>(&h, 0x46554747);  // "GGUF"
  Append<uint32_t>(&h, kVersion);
  Append<uint64_t>(&h, tensors_.size());
  Append<uint64_t>(&h, kvs_.size() + (add_alignment_kv ? 1 : 0));
  const std::vector<uint8_t> alignment_value = EncodeScalar(GgufValueType::kUint32, alignment_);
  for (const Kv& kv : kvs_) {
    AppendString(&h, kv.key);
    const auto& value = kv.key == kAlignmentKey ? alignment_value : kv.encoded;
    h.insert(h.end(), value.begin(), value.end());
  }
  if (add_alignment_kv) {
    AppendString(&h, kAlignmentKey);
    h.insert(h.end(), alignment_value.begin(), alignment_value.end());
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    AppendString(&h, t.name);
    Append<uint32_t>(&h, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) Append<int64_t>(&h, d);
    Append<uint32_t>(&h, static_cast<uint32_t>(t.type));
    Append<uint64_t>(&h, offsets[i]);
  }
  return h;
}

Status GgufWriter::Write(const std::string& path, const FillFn& fill) const {
  if (!deferred_error_.empty()) return InvalidArgument(deferred_error_);
  if (!IsPowerOfTwo(alignment_)) {
    return InvalidArgument("GGUF writer: alignment " + std::to_string(alignment_) +
                           " is not a power of two");
  }
  for (const Kv& kv : kvs_) {
    if (kv.key.empty()) return InvalidArgument("GGUF writer: a metadata key is empty");
  }
  // Validate descriptors and lay out the data section: [offset, offset + size) per tensor.
  std::vector<uint64_t> offsets(tensors_.size()), sizes(tensors_.size());
  std::unordered_set<std::string_view> names;
  uint64_t cursor = 0, max_size = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    const std::string what = "GGUF writer: tensor '" + t.name + "' (index " + std::to_string(i) + ")";
    if (t.name.empty()) return InvalidArgument(what + ": name is empty");
    if (!names.insert(t.name).second) return InvalidArgument(what + ": duplicate name");
    if (t.ne.empty() || t.ne.size() > 4) {
      return InvalidArgument(what + ": " + std::to_string(t.ne.size()) + " dims, expected 1..4");
    }
    for (int64_t d : t.ne) {
      if (d < 1) return InvalidArgument(what + ": dimension " + std::to_string(d) + " < 1");
    }
    std::optional<uint64_t> size = RowBytes(t.type, t.ne[0]);
    if (!size) {
      return InvalidArgument(what + ": ne[0] = " + std::to_string(t.ne[0]) +
                             " is not a whole number of " +
                             std::string(TypeTraits(t.type).name) + " blocks");
    }
    bool ok = true;
    for (size_t d = 1; d < t.ne.size() && ok; ++d) {
      ok = CheckedMul(*size, static_cast<uint64_t>(t.ne[d]), &*size);
    }
    if (!ok || !CheckedPad(cursor, alignment_, &offsets[i]) ||
        !CheckedAdd(offsets[i], *size, &cursor)) {
      return InvalidArgument(what + ": size overflows");
    }
    sizes[i] = *size;
    max_size = std::max(max_size, *size);
  }

  try {
    const std::vector<uint8_t> header = EncodeHeader(offsets);
    std::vector<uint8_t> buf(max_size);  // one tensor at a time, reused
    OutputFile out(path);
    LL_RETURN_IF_ERROR(out.Open());
    LL_RETURN_IF_ERROR(out.Write(header.data(), header.size()));
    LL_RETURN_IF_ERROR(out.PadTo(alignment_));
    const uint64_t data_start = out.written();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (out.written() != data_start + offsets[i]) return Internal("GGUF writer: layout drift");
      std::memset(buf.data(), 0, sizes[i]);
      Status s = fill(i, buf.data(), sizes[i]);
      if (!s.ok()) {
        return Status(s.code(), "GGUF writer: filling tensor '" + tensors_[i].name + "' (index " +
                                    std::to_string(i) + "): " + s.message());
      }
      LL_RETURN_IF_ERROR(out.Write(buf.data(), sizes[i]));
      LL_RETURN_IF_ERROR(out.PadTo(alignment_));
    }
    return out.Close();
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("GGUF writer: out of memory (largest tensor " +
                             std::to_string(max_size) + " bytes)");
  } catch (const std::exception& e) {
    // A throwing fill callback must not unwind through callers that expect a Status.
    return Internal(std::string("GGUF writer: exception while writing '") + path + "': " + e.what());
  }
}

}  // namespace lifeline
