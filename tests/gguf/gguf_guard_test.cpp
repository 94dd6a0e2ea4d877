// A model file that changes under its mapping (mapping_guard.h, GgufFile::Integrity): a
// truncated file's pages read as zeros instead of killing the process with SIGBUS, and the
// file reports the fault; a rewrite in place is reported by size / mtime; a replacement by
// rename is not a change (the old inode stays mapped, intact); a copy_to_memory image is
// immune; a SIGBUS outside every guarded mapping still kills, as without the guard.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/gguf/gguf_file.h"
#include "gguf/gguf_test_util.h"
#include "test_paths.h"

namespace lifeline {
namespace {

using testing::TempPath;

// A private copy of stories260K (the test truncates and rewrites it).
std::string CopyOfStories() {
  const std::string path = TempPath("guard") + ".gguf";
  std::filesystem::copy_file(testing::SharedPath("models/stories260K.gguf"), path,
                             std::filesystem::copy_options::overwrite_existing);
  return path;
}

// The last tensor: its bytes lie at the end of the file, past any small truncation.
const GgufTensorInfo& LastTensor(const GgufFile& f) {
  const GgufTensorInfo* last = &f.tensors().front();
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.data > last->data) last = &t;
  }
  return *last;
}

uint8_t ReadByte(const uint8_t* p) { return *static_cast<const volatile uint8_t*>(p); }

TEST(GgufGuard, ATruncatedFileReadsAsZerosAndReportsTheFault) {
  const std::string path = CopyOfStories();
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const GgufTensorInfo& t = LastTensor(**f);
  const uint8_t* p = t.data + t.size_bytes - 1;
  (void)ReadByte(p);  // resident before the truncation
  EXPECT_TRUE((*f)->Integrity().ok());
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  // Without the guard this read ends the process with SIGBUS.
  EXPECT_EQ(ReadByte(p), 0);
  EXPECT_TRUE((*f)->ReadFaulted());
  const Status s = (*f)->Integrity();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("SIGBUS"), std::string::npos) << s.message();
  // A read on another thread (a compute pool worker) is handled the same way.
  uint8_t other = 1;
  std::thread([&] { other = ReadByte(t.data); }).join();
  EXPECT_EQ(other, 0);
  std::filesystem::remove(path);
}

TEST(GgufGuard, ARewriteInPlaceIsReportedByItsSizeOrModificationTime) {
  const std::string path = CopyOfStories();
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE((*f)->Integrity().ok());
  // Same size, different bytes, a later mtime (set explicitly: a coarse clock could leave
  // it equal).
  {
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const char junk[16] = "overwritten!!!!";
    ASSERT_EQ(::pwrite(fd, junk, sizeof junk, 1000), static_cast<ssize_t>(sizeof junk));
    const timespec times[2] = {{0, UTIME_OMIT}, {1'900'000'000, 0}};
    ASSERT_EQ(::futimens(fd, times), 0);
    ::close(fd);
  }
  const Status s = (*f)->Integrity();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("modified in place"), std::string::npos) << s.message();
  EXPECT_FALSE((*f)->ReadFaulted());
  std::filesystem::remove(path);
}

TEST(GgufGuard, AReplacementByRenameLeavesTheMappedFileIntact) {
  const std::string path = CopyOfStories();
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::string other = TempPath("guard-new") + ".gguf";
  {
    std::FILE* out = std::fopen(other.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    std::fputs("not a model", out);
    std::fclose(out);
  }
  ASSERT_EQ(std::rename(other.c_str(), path.c_str()), 0);
  EXPECT_TRUE((*f)->Integrity().ok()) << (*f)->Integrity().ToString();
  const GgufTensorInfo& t = LastTensor(**f);
  (void)ReadByte(t.data + t.size_bytes - 1);
  EXPECT_FALSE((*f)->ReadFaulted());
  std::filesystem::remove(path);
}

TEST(GgufGuard, ACopyInMemoryIsImmuneToTheFile) {
  const std::string path = CopyOfStories();
  GgufOpenOptions o;
  o.copy_to_memory = true;
  auto f = GgufFile::Open(path, o);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const GgufTensorInfo& t = LastTensor(**f);
  const std::vector<uint8_t> want = testing::ReadFileBytes(path);
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  const uint64_t offset = (*f)->data_offset() + t.offset + t.size_bytes - 1;
  EXPECT_EQ(ReadByte(t.data + t.size_bytes - 1), want[offset]);
  EXPECT_TRUE((*f)->Integrity().ok());
  EXPECT_FALSE((*f)->ReadFaulted());
  std::filesystem::remove(path);
}

// The guard only claims faults in its own ranges: an unguarded mapping of a truncated file
// still ends the process with SIGBUS (checked in a child process).
TEST(GgufGuard, AFaultOutsideGuardedMappingsStillKills) {
  const std::string path = CopyOfStories();
  auto guarded = GgufFile::Open(path);  // installs the handler
  ASSERT_TRUE(guarded.ok());
  const std::string raw_path = TempPath("unguarded") + ".gguf";
  std::filesystem::copy_file(path, raw_path, std::filesystem::copy_options::overwrite_existing);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(raw_path.c_str(), O_RDONLY);
    void* m = ::mmap(nullptr, 1 << 20, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED || ::truncate(raw_path.c_str(), 0) != 0) _exit(3);
    (void)ReadByte(static_cast<const uint8_t*>(m) + 512 * 1024);
    _exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status)) << "exit status " << status;
  if (WIFSIGNALED(status)) EXPECT_EQ(WTERMSIG(status), SIGBUS);
  std::filesystem::remove(path);
  std::filesystem::remove(raw_path);
}

}  // namespace
}  // namespace lifeline
