// Streaming GGUF v3 writer: metadata and tensor table first, then tensor data written tensor
// by tensor from a caller callback, so a multi-GB model is never held in memory (at most one
// tensor's bytes at a time, and only if the callback builds it).
//
// Use: add KVs and tensor descriptors (name, type, shape); Write() lays out the header with
// aligned offsets, then calls `fill(index, dst, size_bytes)` for each tensor in order, where
// dst is a buffer of exactly that tensor's size (reused between tensors, zeroed before each
// call). Adding a key that is already present replaces its value in place (so a copied
// header can be edited). If SetAlignment() differs from the default 32, or a
// general.alignment KV is present, Write() stores general.alignment as uint32 = the alignment.
// Layout written: header, KVs, tensor infos, zero padding to the alignment, then each tensor's
// data padded to the alignment (as ggml's writer does), so other GGUF readers accept it.
//
// Ownership: copies everything it is given (CopyKv copies the bytes out of the source file).
// Thread-safety: single-threaded builder; Write() is const and may be called repeatedly.
// Failure: invalid descriptors (bad alignment, shape, duplicate tensor name, misuse of
// AddArray) are reported by Write() as kInvalidArgument; OS failures as kIo; a failing fill
// callback's Status is returned with the tensor named. On failure the partial file is removed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/gguf/gguf_file.h"

namespace lifeline {

class GgufWriter {
 public:
  void SetAlignment(uint32_t alignment) { alignment_ = alignment; }

  void AddUint8(const std::string& key, uint8_t v);
  void AddInt8(const std::string& key, int8_t v);
  void AddUint16(const std::string& key, uint16_t v);
  void AddInt16(const std::string& key, int16_t v);
  void AddUint32(const std::string& key, uint32_t v);
  void AddInt32(const std::string& key, int32_t v);
  void AddUint64(const std::string& key, uint64_t v);
  void AddInt64(const std::string& key, int64_t v);
  void AddFloat32(const std::string& key, float v);
  void AddFloat64(const std::string& key, double v);
  void AddBool(const std::string& key, bool v);
  void AddString(const std::string& key, const std::string& v);
  void AddStringArray(const std::string& key, const std::vector<std::string>& v);
  void AddFloat32Array(const std::string& key, const std::vector<float>& v);
  void AddInt32Array(const std::string& key, const std::vector<int32_t>& v);
  // Array of any fixed-size element type (not kString / kArray): `count` elements of
  // GgufValueTypeSize(elem_type) bytes each, little-endian, read from `elems`.
  void AddArray(const std::string& key, GgufValueType elem_type, const void* elems,
                uint64_t count);
  // Copies a KV (any type, arrays included) from an existing file, e.g. the vocab.
  void CopyKv(const GgufFile& src, const GgufKv& kv);

  // ne in ggml order (ne[0] = row length). Returns the tensor index.
  size_t AddTensor(const std::string& name, GgmlType type, std::vector<int64_t> ne);

  using FillFn = std::function<Status(size_t index, uint8_t* dst, uint64_t size_bytes)>;
  Status Write(const std::string& path, const FillFn& fill) const;

 private:
  struct Kv {
    std::string key;
    std::vector<uint8_t> encoded;  // value type + payload, GGUF encoding
  };
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
  };
  void Put(const std::string& key, std::vector<uint8_t> encoded);
  std::vector<uint8_t> EncodeHeader(const std::vector<uint64_t>& offsets) const;

  uint32_t alignment_ = 32;
  std::vector<Kv> kvs_;
  std::unordered_map<std::string, size_t> kv_index_;  // key -> index in kvs_
  std::vector<Tensor> tensors_;
  std::string deferred_error_;  // misuse noticed by an Add* call, reported by Write()
};

}  // namespace lifeline
