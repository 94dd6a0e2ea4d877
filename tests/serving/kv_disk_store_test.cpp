// KvDiskStore: a block written is read back byte for byte, also by a store opened later on the
// same folder (a restart); a file whose header names another model identity, or whose tokens
// differ from the asked ones, is not loaded; capacity deletes the oldest files; a leftover
// temporary file of an interrupted write is cleaned up at open.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "base/kv_block.h"
#include "serving/kv_disk_store.h"

namespace lifeline::serving {
namespace {

constexpr uint64_t kBlockBytes = 4096;

std::vector<int32_t> Tokens(int32_t first) {
  std::vector<int32_t> t(kKvBlockTokens);
  std::iota(t.begin(), t.end(), first);
  return t;
}
std::vector<uint8_t> Bytes(uint8_t seed) {
  std::vector<uint8_t> b(kBlockBytes);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(seed + i * 7);
  return b;
}

class KvDiskStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("lifeline-kvdisk-unit-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<KvDiskStore> Open(uint64_t identity, uint64_t capacity = 1 << 20) {
    auto s = KvDiskStore::Open(dir_, identity, kBlockBytes, capacity);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  std::filesystem::path dir_;
};

TEST_F(KvDiskStoreTest, WrittenBlocksAreReadBackAlsoAfterARestart) {
  {
    auto s = Open(7);
    s->Write(11, Tokens(0), Bytes(1));
    s->Write(12, Tokens(16), Bytes(2));
    s->Flush();
    std::vector<uint8_t> out(kBlockBytes);
    ASSERT_TRUE(s->Read(11, Tokens(0), out));
    EXPECT_EQ(out, Bytes(1));
    EXPECT_EQ(s->Stats().written, 2);
  }
  auto again = Open(7);
  EXPECT_EQ(again->Stats().found_at_start, 2);
  std::vector<uint8_t> out(kBlockBytes);
  ASSERT_TRUE(again->Read(12, Tokens(16), out));
  EXPECT_EQ(out, Bytes(2));
  EXPECT_FALSE(again->Read(12, Tokens(17), out)) << "other tokens: not this block";
  EXPECT_TRUE(again->Holds(12)) << "a collision is not corruption: the file stays";
}

TEST_F(KvDiskStoreTest, AFileOfAnotherModelIsRefused) {
  {
    auto s = Open(7);
    s->Write(11, Tokens(0), Bytes(1));
    s->Flush();
  }
  // The file moved into model 8's folder: its header still names model 7.
  auto other = Open(8);
  std::filesystem::copy_file(Open(7)->PathOf(11), other->PathOf(11));
  auto reopened = Open(8);
  ASSERT_TRUE(reopened->Holds(11));
  std::vector<uint8_t> out(kBlockBytes, 0);
  EXPECT_FALSE(reopened->Read(11, Tokens(0), out));
  EXPECT_EQ(out, std::vector<uint8_t>(kBlockBytes, 0)) << "nothing was loaded";
  EXPECT_EQ(reopened->Stats().rejected, 1);
  EXPECT_FALSE(std::filesystem::exists(reopened->PathOf(11)));
}

TEST_F(KvDiskStoreTest, CapacityDeletesTheOldestAndLeftoversAreCleaned) {
  const uint64_t file = 40 + kKvBlockTokens * 4 + kBlockBytes + 8;
  auto s = Open(7, 2 * file);
  s->Write(1, Tokens(0), Bytes(1));
  s->Flush();
  s->Write(2, Tokens(16), Bytes(2));
  s->Flush();
  s->Write(3, Tokens(32), Bytes(3));
  s->Flush();
  EXPECT_FALSE(s->Holds(1));
  EXPECT_TRUE(s->Holds(2) && s->Holds(3));
  EXPECT_EQ(s->Stats().dropped, 1);
  EXPECT_LE(s->Stats().bytes, 2 * file);
  { std::ofstream(s->folder() / "0000000000000009.kvb.tmp") << "half"; }
  s.reset();
  auto again = Open(7, 2 * file);
  EXPECT_FALSE(std::filesystem::exists(again->folder() / "0000000000000009.kvb.tmp"));
  EXPECT_EQ(again->Stats().found_at_start, 2);
}

}  // namespace
}  // namespace lifeline::serving
