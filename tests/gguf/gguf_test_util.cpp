#include "gguf/gguf_test_util.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

namespace lifeline::testing {

RawGguf& RawGguf::Put(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  bytes_.insert(bytes_.end(), b, b + n);
  return *this;
}

RawGguf& RawGguf::Zeros(size_t n) {
  bytes_.resize(bytes_.size() + n, 0);
  return *this;
}

RawGguf& RawGguf::PadTo(size_t alignment) {
  while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  return *this;
}

RawGguf& RawGguf::Mark(const std::string& name) {
  marks_[name] = bytes_.size();
  return *this;
}

size_t RawGguf::at(const std::string& name) const {
  auto it = marks_.find(name);
  if (it == marks_.end()) {
    std::fprintf(stderr, "RawGguf: unknown mark '%s'\n", name.c_str());
    std::abort();
  }
  return it->second;
}

RawGguf BuildSmallRaw() {
  RawGguf r;
  r.Mark("magic").Put("GGUF", 4).Mark("version").U32(3);
  r.Mark("n_tensors").U64(3).Mark("n_kv").U64(4);
  // kv0: string
  r.Mark("kv0").Str("general.architecture").Mark("kv0.type").U32(8);
  r.Mark("kv0.value").Str("llama");
  // kv1: general.alignment = 32 (uint32)
  r.Mark("kv1").Str("general.alignment").Mark("kv1.type").U32(4).Mark("kv1.value").U32(32);
  // kv2: array of 3 float32
  r.Mark("kv2").Str("test.scores").Mark("kv2.type").U32(9).Mark("kv2.elem_type").U32(6);
  r.Mark("kv2.count").U64(3).F32(1.5f).F32(-2.0f).F32(0.25f);
  // kv3: array of 2 strings
  r.Mark("kv3").Str("test.tokens").U32(9).U32(8).Mark("kv3.count").U64(2);
  r.Mark("kv3.s0").Str("a").Str("bc");
  // Tensor table: name, n_dims, ne[], ggml type, offset.
  r.Mark("t0").Str("t.f32").Mark("t0.ndims").U32(2).Mark("t0.ne0").I64(4).Mark("t0.ne1").I64(2);
  r.Mark("t0.type").U32(0).Mark("t0.offset").U64(0);
  r.Mark("t1").Str("t.q8").Mark("t1.ndims").U32(1).Mark("t1.ne0").I64(32);
  r.Mark("t1.type").U32(8).Mark("t1.offset").U64(32);
  r.Mark("t2").Str("t.f16").Mark("t2.ndims").U32(1).Mark("t2.ne0").I64(16);
  r.Mark("t2.type").U32(1).Mark("t2.offset").U64(96);
  r.Mark("table_end").PadTo(32).Mark("data");
  // Data: F32 [4,2] = 32 bytes, Q8_0 [32] = one 34-byte block (+30 pad), F16 [16] = 32 bytes.
  for (uint64_t j = 0; j < 32; ++j) r.U8(SmallImage::DataByte(0, j));
  for (uint64_t j = 0; j < 34; ++j) r.U8(SmallImage::DataByte(1, j));
  r.Zeros(30);
  for (uint64_t j = 0; j < 32; ++j) r.U8(SmallImage::DataByte(2, j));
  return r;
}

void BuildSmallWithWriter(GgufWriter* w) {
  w->AddString("general.architecture", "llama");
  w->AddUint32("general.alignment", 32);
  w->AddFloat32Array("test.scores", {1.5f, -2.0f, 0.25f});
  w->AddStringArray("test.tokens", {"a", "bc"});
  w->AddTensor("t.f32", GgmlType::kF32, {4, 2});
  w->AddTensor("t.q8", GgmlType::kQ8_0, {32});
  w->AddTensor("t.f16", GgmlType::kF16, {16});
}

Status FillSmall(size_t index, uint8_t* dst, uint64_t size_bytes) {
  for (uint64_t j = 0; j < size_bytes; ++j) dst[j] = SmallImage::DataByte(index, j);
  return Status::Ok();
}

std::vector<uint8_t> WriteSmallWithWriter() {
  GgufWriter w;
  BuildSmallWithWriter(&w);
  const std::string path = TempPath("small.gguf");
  Status s = w.Write(path, FillSmall);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<uint8_t> bytes = ReadFileBytes(path);
  std::remove(path.c_str());
  return bytes;
}

std::string TempPath(const std::string& stem) {
  static std::atomic<int> counter{0};  // unique names within one test process
  std::string dir = ::testing::TempDir();
  if (!dir.empty() && dir.back() != '/') dir += '/';
  return dir + "lifeline_gguf_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter.fetch_add(1)) + "_" + stem;
}

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

void PatchU32(std::vector<uint8_t>* b, size_t pos, uint32_t v) {
  ASSERT_LE(pos + 4, b->size());
  std::memcpy(b->data() + pos, &v, 4);
}

void PatchU64(std::vector<uint8_t>* b, size_t pos, uint64_t v) {
  ASSERT_LE(pos + 8, b->size());
  std::memcpy(b->data() + pos, &v, 8);
}

}  // namespace lifeline::testing
