// CPU feature detection and table selection. Detection is cross-checked against the kernel's
// own view of the CPU (/proc/cpuinfo flags) where that file exists.
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "engine/kernels/dispatch.h"

namespace lifeline {
namespace {

TEST(Dispatch, ParseIsaLevel) {
  EXPECT_EQ(ParseIsaLevel("scalar"), IsaLevel::kScalar);
  EXPECT_EQ(ParseIsaLevel("avx2"), IsaLevel::kAvx2);
  EXPECT_EQ(ParseIsaLevel("avx512"), IsaLevel::kAvx512);
  EXPECT_EQ(ParseIsaLevel(""), std::nullopt);
  EXPECT_EQ(ParseIsaLevel("AVX2"), std::nullopt);
  EXPECT_EQ(ParseIsaLevel("avx"), std::nullopt);
  EXPECT_EQ(ParseIsaLevel("avx512 "), std::nullopt);
  for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    EXPECT_EQ(ParseIsaLevel(IsaLevelName(l)), l);
  }
}

TEST(Dispatch, LevelFromFeatures) {
  CpuFeatures f;
  EXPECT_EQ(IsaFromFeatures(f), IsaLevel::kScalar);
  f.avx2 = f.fma = true;
  EXPECT_EQ(IsaFromFeatures(f), IsaLevel::kScalar) << "AVX2 without F16C is not enough";
  f.f16c = true;
  EXPECT_EQ(IsaFromFeatures(f), IsaLevel::kAvx2);
  f.avx512f = f.avx512bw = f.avx512dq = f.avx512vl = true;
  EXPECT_EQ(IsaFromFeatures(f), IsaLevel::kAvx2) << "AVX-512 without VNNI stays at AVX2";
  f.avx512vnni = true;
  EXPECT_EQ(IsaFromFeatures(f), IsaLevel::kAvx512);
  f.avx512bw = false;
  EXPECT_EQ(IsaFromFeatures(f), IsaLevel::kAvx2);
}

TEST(Dispatch, KernelsForClampsToTheCpu) {
  for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    const KernelTable& t = KernelsFor(l);
    ASSERT_NE(t.matmul, nullptr);
    EXPECT_EQ(t.isa, l <= DetectIsa() ? l : DetectIsa());
  }
  EXPECT_EQ(BestKernels().isa, DetectIsa());
  EXPECT_EQ(&KernelsFor(IsaLevel::kScalar), &KernelsFor(IsaLevel::kScalar)) << "tables are shared";
}

std::set<std::string> ProcCpuFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      std::set<std::string> flags;
      std::istringstream words(line.substr(line.find(':') + 1));
      std::string w;
      while (words >> w) flags.insert(w);
      return flags;
    }
  }
  return {};
}

TEST(Dispatch, DetectionAgreesWithProcCpuinfo) {
#if !defined(LIFELINE_X86)
  EXPECT_EQ(DetectIsa(), IsaLevel::kScalar);
  GTEST_SKIP() << "not an x86 build";
#else
  const std::set<std::string> flags = ProcCpuFlags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  // The kernel lists a flag only when the OS also enabled the state it needs.
  const CpuFeatures f = DetectCpuFeatures();
  EXPECT_EQ(f.avx2, flags.count("avx2") == 1);
  EXPECT_EQ(f.fma, flags.count("fma") == 1);
  EXPECT_EQ(f.f16c, flags.count("f16c") == 1);
  EXPECT_EQ(f.avx512f, flags.count("avx512f") == 1);
  EXPECT_EQ(f.avx512bw, flags.count("avx512bw") == 1);
  EXPECT_EQ(f.avx512dq, flags.count("avx512dq") == 1);
  EXPECT_EQ(f.avx512vl, flags.count("avx512vl") == 1);
  EXPECT_EQ(f.avx512vnni, flags.count("avx512_vnni") == 1);
  EXPECT_EQ(f.avx512bf16, flags.count("avx512_bf16") == 1);
  std::printf("detected ISA level: %s (avx512_bf16: %d)\n",
              std::string(IsaLevelName(DetectIsa())).c_str(), f.avx512bf16 ? 1 : 0);
#endif
}

}  // namespace
}  // namespace lifeline
