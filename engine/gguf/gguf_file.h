// GGUF (v2, v3) model file reader. Maps the file read-only (optionally mlock'd), parses the
// header, every metadata key/value (all value types, nested arrays) and the tensor table,
// and validates all of it before anything else may look: the file is hostile input.
//
// Validation (each failure is a kDataLoss Status naming the field and its byte offset):
//   - magic, version in {2, 3}, counts within the GgufOpenOptions caps and within what the
//     bytes left could hold (checked before anything is reserved);
//   - every length/count/shape/offset through overflow-checked arithmetic;
//   - metadata value types known; duplicate keys rejected; general.alignment a power of two
//     within [1, kMaxAlignment] and of type uint32;
//   - tensors: name unique and non-empty, n_dims in [1, 4], every ne >= 1, element count and
//     byte size representable, type a known ggml type, ne[0] a multiple of the type's block,
//     offset aligned, data [offset, offset+size) inside the file, no two tensors overlapping;
//   - arrays may nest up to max_array_depth levels; bool scalars must be 0 or 1.
// No allocation is driven by an unchecked number: strings and arrays are views into the
// mapping (copied only after their length is checked against the bytes left).
//
// Ownership: GgufFile owns the mapping (Open) or borrows the caller's bytes (FromMemory); every
// view/pointer it hands out lives as long as it (and, for FromMemory, as long as those bytes).
// Thread-safety: immutable after Open(); safe to read from any thread.
// Failure: Open/FromMemory return a Status (kDataLoss for a bad file, kNotFound/kIo for the OS).
// A file truncated or rewritten in place by someone else while mapped: the mapping is guarded
// (mapping_guard.h), so a read past the new end sees zeros instead of killing the process
// with SIGBUS; Integrity() then reports it (and any change of the file's size or mtime), and
// the owner must stop trusting what it computed. GgufOpenOptions::copy_to_memory reads the
// file into private memory instead, which nothing outside can change.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/kernels/ggml_type.h"

namespace lifeline {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

const char* GgufValueTypeName(GgufValueType t);
// Bytes of one element of a fixed-size type; 0 for kString, kArray and unknown ids.
uint64_t GgufValueTypeSize(GgufValueType t);

// One metadata value. Scalars are held by value; strings and arrays point into the mapping.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  // Scalars (the member matching `type` is meaningful; integers are widened).
  uint64_t u64 = 0;
  int64_t i64 = 0;
  double f64 = 0;
  bool b = false;
  std::string_view str;  // kString
  // kArray: element type and count; `array_data` points at the first element in the mapping.
  // For arrays of strings, elements are (u64 length, bytes) records; use GgufFile helpers.
  GgufValueType array_type = GgufValueType::kUint8;
  uint64_t array_count = 0;
  const uint8_t* array_data = nullptr;
  uint64_t array_bytes = 0;         // total bytes of the array payload (validated)
  // Filled for top-level arrays of strings (validated views); arrays nested inside arrays are
  // validated but only described by array_data / array_bytes.
  std::vector<std::string_view> strings;
};

struct GgufKv {
  std::string key;
  GgufValue value;
  uint64_t file_offset = 0;  // where the key record starts, for error messages
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ggml order: ne[0] is the contiguous (row) dimension
  uint64_t offset = 0;           // relative to the data section start
  uint64_t size_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping, aligned as the file says
  uint64_t file_offset = 0;       // where the table entry starts, for error messages
  uint64_t n_elements() const {
    return static_cast<uint64_t>(ne[0]) * ne[1] * ne[2] * ne[3];
  }
};

struct GgufOpenOptions {
  bool mlock = false;
  // Read the whole file into private anonymous memory instead of mapping it (`serve
  // --no-mmap`): loading costs a full read and the page cache no longer shares the bytes,
  // but truncating or rewriting the file afterwards cannot affect this process.
  bool copy_to_memory = false;
  // Caps on what a file can make us allocate or walk (metadata is copied into std::string /
  // vectors for keys and names only; arrays stay in the mapping).
  uint64_t max_tensors = 1 << 16;
  uint64_t max_kv = 1 << 16;
  uint64_t max_string_bytes = 1 << 24;      // one string value
  uint64_t max_array_elems = 1ull << 26;    // one array
  uint64_t max_alignment = 1 << 16;
  uint32_t max_array_depth = 4;             // an array of arrays is depth 2
};

class GgufFile {
 public:
  static Result<std::unique_ptr<GgufFile>> Open(const std::string& path,
                                                const GgufOpenOptions& opts = {});
  // Parses an in-memory image (tests, fuzzing). The bytes must outlive the GgufFile.
  static Result<std::unique_ptr<GgufFile>> FromMemory(const uint8_t* data, uint64_t size,
                                                      const GgufOpenOptions& opts = {});
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  uint64_t alignment() const { return alignment_; }
  // Absolute offset of tensor data: the end of the tensor table padded to the alignment. With
  // no tensors it may lie past the end of the file (vocab-only files are not padded).
  uint64_t data_offset() const { return data_offset_; }
  // True when Open() was asked to mlock and the kernel agreed (RLIMIT_MEMLOCK may refuse; that
  // is not an error).
  bool locked() const { return locked_; }
  // The path Open() was given ("" for in-memory images).
  const std::string& path() const { return path_; }
  // Ok while the bytes are still the file's as opened; DataLoss naming the file once a read
  // of the mapping faulted (the file shrank under it) or the opened file's size or
  // modification time changed (rewritten in place). A file replaced by rename keeps the old
  // inode mapped, which is intact: not a change. Always Ok for copies and in-memory images.
  // A fstat per call; the fault check alone is an atomic load (ReadFaulted).
  Status Integrity() const;
  bool ReadFaulted() const;

  // Tells the kernel the mapped pages wholly inside [p, p + bytes) will not be read again
  // (a loader that copied those tensors elsewhere): they leave the process's resident set
  // and are re-read from the file if touched after all (zeros for a copy_to_memory image). No-op for in-memory images, locked
  // mappings, or a range outside the mapping.
  void ReleasePages(const uint8_t* p, uint64_t bytes) const;

  const std::vector<GgufKv>& kvs() const { return kvs_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufKv* FindKv(std::string_view key) const;
  const GgufTensorInfo* FindTensor(std::string_view name) const;

  // Typed getters: NotFound when absent (callers apply defaults), DataLoss when the stored
  // type does not fit (e.g. a string where a uint32 is expected, a negative value for an
  // unsigned field, a value beyond the target type's range).
  Result<uint64_t> GetUint(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;  // accepts f32/f64 (and ints)
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string_view> GetString(std::string_view key) const;
  // Arrays: element type must match (DataLoss naming key, expected and actual types).
  Result<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  Result<std::vector<float>> GetFloatArray(std::string_view key) const;
  Result<std::vector<int32_t>> GetInt32Array(std::string_view key) const;  // int32/uint32 elements

 private:
  GgufFile() = default;
  Status Parse(const GgufOpenOptions& opts);

  // Mapping (owned when mapped_ is true).
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  bool locked_ = false;
  bool copied_ = false;      // copy_to_memory: anonymous memory, not the file
  std::string path_;
  int fd_ = -1;              // the mapped file, kept open to fstat the same inode
  int guard_slot_ = -1;      // mapping_guard.h slot, -1 when unguarded
  int64_t opened_mtime_ns_ = 0;

  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  // Lookup indexes; the keys are views into the file bytes (stable, unlike the std::strings
  // in kvs_/tensors_ while those vectors grow).
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace lifeline
