// The corruption matrix: each entry is the small valid image (written by GgufWriter) with one
// defect patched in at a byte position taken from the independent hand-assembled layout
// (BuildSmallRaw marks), or a tiny hand-assembled file where the defect changes the layout.
#include <cstdint>
#include <limits>
#include <string>

#include "gguf/gguf_test_util.h"

namespace lifeline::testing {
namespace {

std::string AtByte(size_t pos) { return "at byte " + std::to_string(pos); }

class MatrixBuilder {
 public:
  MatrixBuilder() : raw_(BuildSmallRaw()), base_(WriteSmallWithWriter()) {}

  const RawGguf& raw() const { return raw_; }
  size_t size() const { return base_.size(); }

  void U32(const std::string& name, const std::string& mark, uint32_t v,
           std::vector<std::string> expect) {
    std::vector<uint8_t> b = base_;
    PatchU32(&b, raw_.at(mark), v);
    out_.push_back({name, std::move(b), std::move(expect)});
  }
  void U64(const std::string& name, const std::string& mark, uint64_t v,
           std::vector<std::string> expect) {
    std::vector<uint8_t> b = base_;
    PatchU64(&b, raw_.at(mark), v);
    out_.push_back({name, std::move(b), std::move(expect)});
  }
  void Two64(const std::string& name, const std::string& m1, uint64_t v1, const std::string& m2,
             uint64_t v2, std::vector<std::string> expect) {
    std::vector<uint8_t> b = base_;
    PatchU64(&b, raw_.at(m1), v1);
    PatchU64(&b, raw_.at(m2), v2);
    out_.push_back({name, std::move(b), std::move(expect)});
  }
  // Overwrites bytes (same length) starting `skip` bytes after a mark.
  void Text(const std::string& name, const std::string& mark, size_t skip, std::string_view text,
            std::vector<std::string> expect) {
    std::vector<uint8_t> b = base_;
    std::copy(text.begin(), text.end(), b.begin() + static_cast<long>(raw_.at(mark) + skip));
    out_.push_back({name, std::move(b), std::move(expect)});
  }
  void Raw(const std::string& name, const RawGguf& r, std::vector<std::string> expect) {
    out_.push_back({name, r.bytes(), std::move(expect)});
  }
  std::vector<Corruption> Take() { return std::move(out_); }

 private:
  RawGguf raw_;
  std::vector<uint8_t> base_;
  std::vector<Corruption> out_;
};

}  // namespace

std::vector<Corruption> CorruptionMatrix() {
  MatrixBuilder m;
  const RawGguf& r = m.raw();
  const uint64_t kHuge = 1ull << 62;
  const uint64_t kSizeMaxOver4 = std::numeric_limits<uint64_t>::max() / 4;

  // Header.
  m.Text("bad magic", "magic", 0, "XGUF", {"magic", AtByte(0), "expected \"GGUF\""});
  m.U32("version 1", "version", 1, {"unsupported GGUF version 1"});
  m.U32("version 99", "version", 99, {"unsupported GGUF version 99"});
  m.U32("big-endian version", "version", 0x03000000u, {"big-endian"});
  m.U64("n_tensors huge", "n_tensors", kHuge, {"n_tensors", AtByte(8), "cap"});
  m.U64("n_kv huge", "n_kv", kHuge, {"n_kv", AtByte(16), "cap"});
  m.U64("n_kv beyond the bytes", "n_kv", 1000, {"n_kv 1000", "bytes each"});
  m.U64("n_tensors beyond the bytes", "n_tensors", 1000, {"n_tensors 1000", "bytes each"});
  m.U64("one tensor more than stored", "n_tensors", 4, {"table entry 3"});

  // Metadata.
  m.U64("key length 2^63", "kv0", 1ull << 63,
        {"kv 0", "key length 9223372036854775808", AtByte(r.at("kv0"))});
  m.U64("string value length 2^63", "kv0.value", 1ull << 63,
        {"kv 0 'general.architecture'", "string value length", AtByte(r.at("kv0.value"))});
  m.U64("string value past the end", "kv0.value", m.size(),
        {"string value length", "runs past the end of the file"});
  m.U32("unknown value type", "kv0.type", 13, {"value type 13", AtByte(r.at("kv0.type"))});
  m.U32("unknown array element type", "kv2.elem_type", 42,
        {"kv 2 'test.scores'", "array element type 42"});
  m.U64("array count huge", "kv2.count", kHuge,
        {"kv 2 'test.scores'", "array count", AtByte(r.at("kv2.count"))});
  m.U64("string array count beyond the bytes", "kv3.count", 1ull << 25,
        {"kv 3 'test.tokens'", "array count 33554432", "bytes each"});
  m.U64("array string length 2^63", "kv3.s0", 1ull << 63, {"array string element length"});
  m.Text("duplicate key", "kv3", 8, "test.scores",
         {"kv 3 'test.scores'", "duplicate key", "kv 2"});
  m.U32("alignment 0", "kv1.value", 0, {"general.alignment", "alignment 0 is not a power of two"});
  m.U32("alignment 3", "kv1.value", 3, {"general.alignment", "alignment 3 is not a power of two"});
  m.U32("alignment 2^30", "kv1.value", 1u << 30,
        {"general.alignment", "alignment 1073741824 exceeds the cap"});
  m.U32("alignment of type int32", "kv1.type", 5,
        {"general.alignment", "type is int32, expected uint32"});
  m.U32("alignment of type float32", "kv1.type", 6, {"type is float32, expected uint32"});
  m.U32("bool value 32", "kv1.type", 7, {"bool value 32"});

  // Tensor table.
  const std::string t0 = "tensor 't.f32' (table entry 0 at byte " + std::to_string(r.at("t0")) + ")";
  const std::string t1 = "tensor 't.q8' (table entry 1 at byte " + std::to_string(r.at("t1")) + ")";
  const std::string t2 = "tensor 't.f16' (table entry 2 at byte " + std::to_string(r.at("t2")) + ")";
  m.U32("unknown tensor type 4", "t0.type", 4, {t0, "type id 4", AtByte(r.at("t0.type"))});
  m.U32("unknown tensor type 99", "t0.type", 99, {t0, "type id 99"});
  m.U32("unknown tensor type 2^32-1", "t0.type", 0xffffffffu, {t0, "type id 4294967295"});
  m.U32("n_dims 0", "t0.ndims", 0, {t0, "n_dims 0", AtByte(r.at("t0.ndims"))});
  m.U32("n_dims 5", "t0.ndims", 5, {t0, "n_dims 5"});
  m.U64("ne0 = 0", "t0.ne0", 0, {t0, "ne[0] = 0", AtByte(r.at("t0.ne0"))});
  m.U64("ne1 = -2", "t0.ne1", static_cast<uint64_t>(-2), {t0, "ne[1] = -2"});
  m.U64("ne0 = INT64_MIN", "t0.ne0", 1ull << 63, {t0, "ne[0] = -9223372036854775808"});
  m.Two64("ne0 = SIZE_MAX/4 (size fits, end wraps)", "t0.ne0", kSizeMaxOver4, "t0.ne1", 1,
          {t0, "ends past the file size"});
  m.U64("ne0 = SIZE_MAX/4 x ne1 2", "t0.ne0", kSizeMaxOver4, {t0, "byte size", "overflows"});
  m.U64("1-D F16 ne0 = SIZE_MAX/4", "t2.ne0", kSizeMaxOver4, {t2, "ends past the file size"});
  m.Two64("element count overflow", "t0.ne0", 1ull << 32, "t0.ne1", 1ull << 32,
          {t0, "element count", "overflows"});
  m.U64("ne0 not a multiple of the block", "t1.ne0", 33,
        {t1, "ne[0] = 33", "q8_0 block size 32"});
  m.U64("misaligned offset", "t1.offset", 40,
        {t1, "offset 40", AtByte(r.at("t1.offset")), "not a multiple of the alignment 32"});
  m.U64("offset + size past EOF", "t2.offset", 128,
        {t2 + ": data [offset 128, size 32) ends past the file size " + std::to_string(m.size())});
  m.U64("offset + size wraps", "t2.offset", 0 - 32ull, {t2, "ends past the file size"});
  m.U64("overlapping tensors", "t2.offset", 64,
        {t2 + ": data [offset 64, size 32) overlaps tensor 't.q8'"});
  m.U64("two tensors at offset 0", "t1.offset", 0, {"overlaps", "'t.f32'", "'t.q8'"});
  m.Text("duplicate tensor name", "t2", 8, "t.f32", {"tensor 't.f32' (table entry 2", "duplicate tensor name"});

  // Defects that change the layout: tiny hand-assembled files.
  {
    RawGguf e;
    e.Put("GGUF", 4).U32(3).U64(0).U64(1).Str("").U32(0).U8(7).Zeros(8);
    m.Raw("empty key", e, {"kv 0 (at byte 24): key is empty"});
  }
  {
    RawGguf e;
    e.Put("GGUF", 4).U32(3).U64(1).U64(0).Str("").U32(1).I64(32).U32(0).U64(0).PadTo(32).Zeros(128);
    m.Raw("empty tensor name", e, {"table entry 0 at byte 24", "name is empty"});
  }
  {
    RawGguf e;
    e.Put("GGUF", 4).U32(3).U64(0).U64(1).Str("bomb").U32(9);
    for (int level = 0; level < 64; ++level) e.U32(9).U64(1);
    e.U32(0).U64(0);
    m.Raw("nested-array depth bomb", e, {"kv 0 'bomb'", "nests arrays deeper than 4 levels"});
  }
  {
    RawGguf e;
    e.Put("GGUF", 4).U32(3).U64(0).U64(1).Str("nest").U32(9).U32(9).U64(1).U32(4).U64(1ull << 40);
    m.Raw("inner array count huge", e, {"kv 0 'nest'", "array count 1099511627776"});
  }
  return m.Take();
}

}  // namespace lifeline::testing
