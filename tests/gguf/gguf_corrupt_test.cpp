// Hostile-input tests: the small valid image truncated at every byte, the corruption matrix
// (one defect each, error must name the field and byte), and seeded random byte mutations.
#include <cstring>
#include <memory>
#include <random>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"

namespace lifeline {
namespace {

using testing::BuildSmallRaw;
using testing::CorruptionMatrix;
using testing::RawGguf;
using testing::SmallImage;
using testing::WriteSmallWithWriter;

// Parses a private copy of exactly `size` bytes so that any read past the end lands outside
// the allocation (visible to ASan).
Result<std::unique_ptr<GgufFile>> ParseCopy(const uint8_t* data, size_t size,
                                            std::unique_ptr<uint8_t[]>* keep) {
  *keep = std::make_unique<uint8_t[]>(size == 0 ? 1 : size);
  if (size != 0) std::memcpy(keep->get(), data, size);
  return GgufFile::FromMemory(keep->get(), size);
}

TEST(GgufCorrupt, SmallImageIsValidAndMatchesItsLayout) {
  const RawGguf raw = BuildSmallRaw();
  const std::vector<uint8_t> bytes = WriteSmallWithWriter();
  auto f = GgufFile::FromMemory(bytes.data(), bytes.size());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->version(), 3u);
  EXPECT_EQ((*f)->kvs().size(), 4u);
  ASSERT_EQ((*f)->tensors().size(), 3u);
  EXPECT_EQ((*f)->data_offset(), raw.at("data"));
  EXPECT_EQ((*f)->kvs()[2].file_offset, raw.at("kv2"));
  EXPECT_EQ((*f)->tensors()[1].file_offset, raw.at("t1"));
  EXPECT_EQ(raw.at("data") + SmallImage::kDataBytes, bytes.size());  // no trailing padding
}

TEST(GgufCorrupt, EveryTruncationFailsCleanly) {
  const std::vector<uint8_t> bytes = WriteSmallWithWriter();
  ASSERT_GT(bytes.size(), 200u);
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::unique_ptr<uint8_t[]> copy;
    auto f = ParseCopy(bytes.data(), len, &copy);
    ASSERT_FALSE(f.ok()) << "truncated to " << len << " bytes still parsed";
    EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << len;
    EXPECT_FALSE(f.status().message().empty());
    EXPECT_EQ(f.status().message().find('\n'), std::string::npos);
  }
}

TEST(GgufCorrupt, MatrixFailsNamingTheField) {
  const std::vector<testing::Corruption> matrix = CorruptionMatrix();
  ASSERT_GE(matrix.size(), 40u);
  for (const auto& c : matrix) {
    SCOPED_TRACE(c.name);
    std::unique_ptr<uint8_t[]> copy;
    auto f = ParseCopy(c.bytes.data(), c.bytes.size(), &copy);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << f.status().ToString();
    const std::string& msg = f.status().message();
    for (const auto& want : c.expect) {
      EXPECT_NE(msg.find(want), std::string::npos) << "message: " << msg << "\nwanted: " << want;
    }
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(GgufCorrupt, Version2IsAccepted) {
  std::vector<uint8_t> bytes = WriteSmallWithWriter();
  testing::PatchU32(&bytes, BuildSmallRaw().at("version"), 2);
  auto f = GgufFile::FromMemory(bytes.data(), bytes.size());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->version(), 2u);
}

TEST(GgufCorrupt, NestedArraysWithinTheDepthCapParse) {
  // kv "nest": array of 2 arrays of uint16 ([7], [8, 9]) then a depth-4 chain of single arrays.
  RawGguf r;
  r.Put("GGUF", 4).U32(3).U64(0).U64(2);
  r.Str("nest").U32(9).U32(9).U64(2);
  r.U32(2).U64(1).Put("\x07\x00", 2);
  r.U32(2).U64(2).Put("\x08\x00\x09\x00", 4);
  r.Str("deep").U32(9);
  for (int level = 1; level < 4; ++level) r.U32(9).U64(1);  // depths 1..3 hold arrays
  r.U32(0).U64(1).U8(5);                                    // depth 4 holds one uint8
  auto f = GgufFile::FromMemory(r.bytes().data(), r.size());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const GgufKv* nest = (*f)->FindKv("nest");
  ASSERT_NE(nest, nullptr);
  EXPECT_EQ(nest->value.array_type, GgufValueType::kArray);
  EXPECT_EQ(nest->value.array_count, 2u);
  EXPECT_EQ(nest->value.array_bytes, (4 + 8 + 2) + (4 + 8 + 4u));
  const GgufKv* deep = (*f)->FindKv("deep");
  ASSERT_NE(deep, nullptr);
  // Payload after the top-level count: two nested (type, count) headers, then (uint8, 1, 5).
  EXPECT_EQ(deep->value.array_bytes, 2 * 12u + (4 + 8 + 1));
}

TEST(GgufCorrupt, SeededRandomMutationsNeverCrash) {
  const std::vector<uint8_t> base = WriteSmallWithWriter();
  std::mt19937_64 rng(12345);
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = base;
    const int n_flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n_flips; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    std::unique_ptr<uint8_t[]> copy;
    auto f = ParseCopy(b.data(), b.size(), &copy);
    if (!f.ok()) {
      EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << f.status().ToString();
      continue;
    }
    ++accepted;  // e.g. a flipped data byte: then every tensor must still lie inside the file
    for (const auto& t : (*f)->tensors()) {
      ASSERT_GE(t.data, copy.get());
      ASSERT_LE(t.data + t.size_bytes, copy.get() + b.size());
    }
  }
  EXPECT_GT(accepted, 0);  // mutations inside tensor data are harmless
}

}  // namespace
}  // namespace lifeline
