// Streaming GGUF v3 writer: metadata and tensor table first, then tensor data written tensor
// by tensor from a caller callback, so a multi-GB model is never held in memory (at most one
// tensor's bytes at a time, and only if the callback builds it).
//
// Use: add KVs and tensor descriptors (name, type, shape); Write() lays out the header with
// aligned offsets, then calls `fill(index, dst, size_bytes)` for each tensor in order, where
// dst is a buffer of exactly that tensor's size (reused between tensors).
//
// Thread-safety: single-threaded builder.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/gguf/gguf_file.h"

namespace lifeline {

class GgufWriter {
 public:
  void SetAlignment(uint32_t alignment) { alignment_ = alignment; }

  void AddUint32(const std::string& key, uint32_t v);
  void AddInt32(const std::string& key, int32_t v);
  void AddUint64(const std::string& key, uint64_t v);
  void AddFloat32(const std::string& key, float v);
  void AddBool(const std::string& key, bool v);
  void AddString(const std::string& key, const std::string& v);
  void AddStringArray(const std::string& key, const std::vector<std::string>& v);
  void AddFloat32Array(const std::string& key, const std::vector<float>& v);
  void AddInt32Array(const std::string& key, const std::vector<int32_t>& v);
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
  uint32_t alignment_ = 32;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace lifeline
