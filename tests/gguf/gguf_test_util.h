// Test helpers for the GGUF suite: a byte-level GGUF assembler that is independent of
// GgufWriter (it appends little-endian fields exactly as the format describes them and records
// the byte position of named fields), the small reference image used by the writer and
// corruption tests, and temp-file helpers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf_writer.h"

namespace lifeline::testing {

class RawGguf {
 public:
  RawGguf& U8(uint8_t v) { return Put(&v, 1); }
  RawGguf& U32(uint32_t v) { return Put(&v, 4); }
  RawGguf& U64(uint64_t v) { return Put(&v, 8); }
  RawGguf& I64(int64_t v) { return Put(&v, 8); }
  RawGguf& F32(float v) { return Put(&v, 4); }
  RawGguf& Str(std::string_view s) { U64(s.size()); return Put(s.data(), s.size()); }
  RawGguf& Put(const void* p, size_t n);
  RawGguf& Zeros(size_t n);
  RawGguf& PadTo(size_t alignment);
  // Remembers the current size under `name` (the position of the next field appended).
  RawGguf& Mark(const std::string& name);
  size_t at(const std::string& name) const;  // aborts the test binary on an unknown mark
  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  std::map<std::string, size_t> marks_;
};

// The small valid image: 4 KVs (string, general.alignment = 32, f32 array, string array) and
// 3 tensors (F32 [4, 2] at 0, Q8_0 [32] at 32, F16 [16] at 96; data ends at 128, the end of
// the file, so every truncation cuts into something required).
struct SmallImage {
  static constexpr uint64_t kDataBytes = 128;
  static uint8_t DataByte(size_t tensor, uint64_t j) {
    return static_cast<uint8_t>(tensor * 37 + j * 3 + 1);
  }
};
RawGguf BuildSmallRaw();                       // hand-assembled, with marks (see .cpp)
void BuildSmallWithWriter(GgufWriter* w);      // the same content through GgufWriter
Status FillSmall(size_t index, uint8_t* dst, uint64_t size_bytes);
std::vector<uint8_t> WriteSmallWithWriter();   // writes to a temp file and reads it back

std::string TempPath(const std::string& stem);  // unique path in the test temp dir
std::vector<uint8_t> ReadFileBytes(const std::string& path);
void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes);

void PatchU32(std::vector<uint8_t>* b, size_t pos, uint32_t v);
void PatchU64(std::vector<uint8_t>* b, size_t pos, uint64_t v);

// One hostile variant of the small image and the text its error must contain.
struct Corruption {
  std::string name;
  std::vector<uint8_t> bytes;
  std::vector<std::string> expect;  // substrings of the error message (field, byte offset)
};
std::vector<Corruption> CorruptionMatrix();

}  // namespace lifeline::testing
