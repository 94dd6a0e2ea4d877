// GgufWriter: byte-exact output against the hand-assembled layout, round trips of every value
// type and several tensor types through GgufFile, alignment, replacement, CopyKv, and errors.
#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "engine/gguf/gguf_writer.h"
#include "gguf/gguf_test_util.h"

namespace lifeline {
namespace {

using testing::ReadFileBytes;
using testing::TempPath;

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Writes `w` with a deterministic fill (byte j of tensor i = i * 11 + j * 7) and opens it.
std::unique_ptr<GgufFile> WriteAndOpen(const GgufWriter& w, std::string* path_out = nullptr) {
  const std::string path = TempPath("rt.gguf");
  Status s = w.Write(path, [](size_t i, uint8_t* dst, uint64_t n) {
    for (uint64_t j = 0; j < n; ++j) dst[j] = static_cast<uint8_t>(i * 11 + j * 7);
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  auto f = GgufFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (path_out) *path_out = path;
  else std::remove(path.c_str());  // the mapping stays valid after unlink
  return f.ok() ? std::move(f).value() : nullptr;
}

TEST(GgufWriter, SmallImageIsByteIdenticalToTheHandAssembledLayout) {
  const std::vector<uint8_t> written = testing::WriteSmallWithWriter();
  const std::vector<uint8_t> expected = testing::BuildSmallRaw().bytes();
  ASSERT_EQ(written.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(written[i], expected[i]) << "first difference at byte " << i;
  }
}

TEST(GgufWriter, ScalarsOfEveryTypeRoundTrip) {
  GgufWriter w;
  w.AddUint8("u8", 255);
  w.AddInt8("i8", -128);
  w.AddUint16("u16", 65535);
  w.AddInt16("i16", -32768);
  w.AddUint32("u32", 4294967295u);
  w.AddInt32("i32", std::numeric_limits<int32_t>::min());
  w.AddUint64("u64", std::numeric_limits<uint64_t>::max());
  w.AddInt64("i64", std::numeric_limits<int64_t>::min());
  w.AddFloat32("f32", -0.15625f);  // exact in binary
  w.AddFloat64("f64", 1e300);
  w.AddBool("yes", true);
  w.AddBool("no", false);
  w.AddString("empty", "");
  w.AddString("text", std::string("a\0b \xe2\x96\x81 z", 8));  // embedded NUL and UTF-8
  auto f = WriteAndOpen(w);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->kvs().size(), 14u);
  EXPECT_EQ(f->tensors().size(), 0u);
  EXPECT_EQ(f->FindKv("u8")->value.type, GgufValueType::kUint8);
  EXPECT_EQ(*f->GetUint("u8"), 255u);
  EXPECT_EQ(*f->GetInt("i8"), -128);
  EXPECT_EQ(*f->GetUint("u16"), 65535u);
  EXPECT_EQ(*f->GetInt("i16"), -32768);
  EXPECT_EQ(*f->GetUint("u32"), 4294967295u);
  EXPECT_EQ(*f->GetInt("i32"), -2147483648ll);
  EXPECT_EQ(*f->GetUint("u64"), 18446744073709551615ull);
  EXPECT_EQ(*f->GetInt("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->FindKv("f32")->value.type, GgufValueType::kFloat32);
  EXPECT_EQ(*f->GetFloat("f32"), -0.15625);
  EXPECT_EQ(*f->GetFloat("f64"), 1e300);
  EXPECT_TRUE(*f->GetBool("yes"));
  EXPECT_FALSE(*f->GetBool("no"));
  EXPECT_EQ(*f->GetString("empty"), "");
  EXPECT_EQ(*f->GetString("text"), std::string_view("a\0b \xe2\x96\x81 z", 8));
}

TEST(GgufWriter, ArraysRoundTrip) {
  GgufWriter w;
  w.AddStringArray("s", {"", "<s>", std::string(300, 'x'), "\xe2\x96\x81the"});
  w.AddFloat32Array("f", {0.f, -1.f, 3.5f, std::numeric_limits<float>::infinity()});
  w.AddInt32Array("i", {-7, 0, 2147483647});
  const uint32_t u32[] = {0, 1, 2147483647u};
  w.AddArray("u", GgufValueType::kUint32, u32, 3);
  const uint8_t bools[] = {1, 0, 1};
  w.AddArray("b", GgufValueType::kBool, bools, 3);
  const double f64[] = {0.5, -2.25};
  w.AddArray("d", GgufValueType::kFloat64, f64, 2);
  const int16_t i16[] = {-3, 4};
  w.AddArray("h", GgufValueType::kInt16, i16, 2);
  w.AddFloat32Array("empty", {});
  auto f = WriteAndOpen(w);
  ASSERT_NE(f, nullptr);
  auto s = f->GetStringArray("s");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 4u);
  EXPECT_EQ((*s)[0], "");
  EXPECT_EQ((*s)[1], "<s>");
  EXPECT_EQ((*s)[2], std::string(300, 'x'));
  EXPECT_EQ((*s)[3], "\xe2\x96\x81the");
  auto fl = f->GetFloatArray("f");
  ASSERT_TRUE(fl.ok());
  EXPECT_EQ(*fl, (std::vector<float>{0.f, -1.f, 3.5f, std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(*f->GetInt32Array("i"), (std::vector<int32_t>{-7, 0, 2147483647}));
  EXPECT_EQ(*f->GetInt32Array("u"), (std::vector<int32_t>{0, 1, 2147483647}));
  const GgufValue& b = f->FindKv("b")->value;
  EXPECT_EQ(b.array_type, GgufValueType::kBool);
  ASSERT_EQ(b.array_bytes, 3u);
  EXPECT_EQ(std::memcmp(b.array_data, bools, 3), 0);
  const GgufValue& d = f->FindKv("d")->value;
  EXPECT_EQ(d.array_type, GgufValueType::kFloat64);
  ASSERT_EQ(d.array_bytes, 16u);
  EXPECT_EQ(std::memcmp(d.array_data, f64, 16), 0);
  EXPECT_EQ(f->FindKv("h")->value.array_bytes, 4u);
  EXPECT_EQ(f->GetFloatArray("empty")->size(), 0u);
}

TEST(GgufWriter, TensorsOfSeveralTypesGetAlignedOffsetsAndTheirBytes) {
  GgufWriter w;
  w.AddTensor("f32", GgmlType::kF32, {3, 5});     // 60 bytes
  w.AddTensor("f16", GgmlType::kF16, {8, 2});     // 32
  w.AddTensor("bf16", GgmlType::kBF16, {4});      // 8
  w.AddTensor("q4_0", GgmlType::kQ4_0, {64, 3});  // 2 blocks x 18 x 3 = 108
  w.AddTensor("q8_0", GgmlType::kQ8_0, {32, 2});  // 34 x 2 = 68
  w.AddTensor("q4_k", GgmlType::kQ4_K, {256, 2}); // 144 x 2 = 288
  w.AddTensor("q6_k", GgmlType::kQ6_K, {256});    // 210
  w.AddTensor("i32", GgmlType::kI32, {5, 1, 1, 1});  // 20, four dims
  const uint64_t sizes[] = {60, 32, 8, 108, 68, 288, 210, 20};
  const uint64_t offsets[] = {0, 64, 96, 128, 256, 352, 640, 864};  // each padded to 32
  auto f = WriteAndOpen(w);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->tensors().size(), 8u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->FindKv("general.alignment"), nullptr);  // default alignment is implicit
  EXPECT_EQ(f->data_offset() % 32, 0u);
  for (size_t i = 0; i < 8; ++i) {
    const GgufTensorInfo& t = f->tensors()[i];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.size_bytes, sizes[i]);
    EXPECT_EQ(t.offset, offsets[i]);
    ASSERT_EQ(t.data, f->FindTensor(t.name)->data);
    for (uint64_t j = 0; j < t.size_bytes; ++j) {
      ASSERT_EQ(t.data[j], static_cast<uint8_t>(i * 11 + j * 7)) << "byte " << j;
    }
  }
  EXPECT_EQ(f->tensors()[7].n_dims, 4);
  EXPECT_EQ(f->tensors()[3].ne[1], 3);
  // Padded after the last tensor as well: 864 + 20 -> 896.
  EXPECT_EQ(f->file_size(), f->data_offset() + 896);
}

TEST(GgufWriter, CustomAlignmentIsStoredAndHonoured) {
  GgufWriter w;
  w.SetAlignment(64);
  w.AddTensor("a", GgmlType::kF32, {3});
  w.AddTensor("b", GgmlType::kF32, {5});
  auto f = WriteAndOpen(w);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->FindKv("general.alignment")->value.type, GgufValueType::kUint32);
  EXPECT_EQ(*f->GetUint("general.alignment"), 64u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->tensors()[1].offset, 64u);
  for (const auto& t : f->tensors()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u) << t.name;  // mapping is page-aligned
  }
}

TEST(GgufWriter, AddingAKeyAgainReplacesItInPlace) {
  GgufWriter w;
  w.AddUint32("x", 1);
  w.AddString("y", "keep");
  w.AddString("x", "two");
  auto f = WriteAndOpen(w);
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->kvs().size(), 2u);
  EXPECT_EQ(f->kvs()[0].key, "x");
  EXPECT_EQ(*f->GetString("x"), "two");
}

TEST(GgufWriter, CopyKvReproducesEveryValueIncludingNestedArrays) {
  // Source: hand-assembled, with a nested array (array of arrays of uint16) and a string array.
  testing::RawGguf r;
  r.Put("GGUF", 4).U32(3).U64(0).U64(4);
  r.Str("nest").U32(9).U32(9).U64(2).U32(2).U64(1).Put("\x07\x00", 2).U32(8).U64(1).Str("z");
  r.Str("names").U32(9).U32(8).U64(2).Str("ab").Str("");
  r.Str("pi").U32(6).F32(3.25f);
  r.Str("flag").U32(7).U8(1);
  auto src = GgufFile::FromMemory(r.bytes().data(), r.size());
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  GgufWriter w;
  for (const auto& kv : (*src)->kvs()) w.CopyKv(**src, kv);
  std::string path;
  auto f = WriteAndOpen(w, &path);
  ASSERT_NE(f, nullptr);
  // Same metadata, same order, same encoding: the KV section bytes are identical.
  const std::vector<uint8_t> out = ReadFileBytes(path);
  std::remove(path.c_str());
  ASSERT_GE(out.size(), r.size());
  EXPECT_EQ(std::memcmp(out.data(), r.bytes().data(), r.size()), 0);
  EXPECT_EQ(*f->GetFloat("pi"), 3.25);
  EXPECT_EQ(f->FindKv("nest")->value.array_count, 2u);
}

TEST(GgufWriter, FillFailureIsReturnedAndNoFileIsLeft) {
  GgufWriter w;
  w.AddTensor("first", GgmlType::kF32, {4});
  w.AddTensor("second", GgmlType::kF32, {4});
  const std::string path = TempPath("fail.gguf");
  Status s = w.Write(path, [](size_t i, uint8_t*, uint64_t) {
    return i == 1 ? NotFound("source tensor missing") : Status::Ok();
  });
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("'second'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("source tensor missing"), std::string::npos);
  EXPECT_FALSE(FileExists(path));
}

TEST(GgufWriter, CannotCreateIsAnIoError) {
  GgufWriter w;
  const std::string path = TempPath("no/such/dir/x.gguf");
  Status s = w.Write(path, testing::FillSmall);
  EXPECT_EQ(s.code(), StatusCode::kIo);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
}

TEST(GgufWriter, WriteFailureIsAnIoError) {
  if (!FileExists("/dev/full")) GTEST_SKIP() << "/dev/full not available";
  GgufWriter w;
  w.AddTensor("big", GgmlType::kF32, {1 << 20});  // 4 MiB, beyond the stdio buffer
  Status s = w.Write("/dev/full", [](size_t, uint8_t*, uint64_t) { return Status::Ok(); });
  EXPECT_EQ(s.code(), StatusCode::kIo) << s.ToString();
  EXPECT_TRUE(FileExists("/dev/full"));  // a device is never unlinked
}

TEST(GgufWriter, InvalidDescriptorsAreRejected) {
  auto write = [](const GgufWriter& w) { return w.Write(TempPath("bad.gguf"), testing::FillSmall); };
  {
    GgufWriter w;
    w.SetAlignment(48);
    EXPECT_EQ(write(w).code(), StatusCode::kInvalidArgument);
  }
  {
    GgufWriter w;
    w.AddTensor("q", GgmlType::kQ4_K, {128});  // not a whole 256-element block
    Status s = write(w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("ne[0] = 128"), std::string::npos) << s.message();
  }
  {
    GgufWriter w;
    w.AddTensor("same", GgmlType::kF32, {1});
    w.AddTensor("same", GgmlType::kF32, {1});
    EXPECT_EQ(write(w).code(), StatusCode::kInvalidArgument);
  }
  {
    GgufWriter w;
    w.AddTensor("dims", GgmlType::kF32, {1, 1, 1, 1, 1});
    EXPECT_EQ(write(w).code(), StatusCode::kInvalidArgument);
  }
  {
    GgufWriter w;
    w.AddTensor("zero", GgmlType::kF32, {4, 0});
    EXPECT_EQ(write(w).code(), StatusCode::kInvalidArgument);
  }
  {
    GgufWriter w;
    w.AddArray("x", GgufValueType::kString, nullptr, 0);
    EXPECT_EQ(write(w).code(), StatusCode::kInvalidArgument);
  }
  {
    GgufWriter w;
    w.AddUint8("", 1);
    EXPECT_EQ(write(w).code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace lifeline
