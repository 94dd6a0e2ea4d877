// CPU lists for --cpus: the accepted syntax, the errors (naming the flag and the bad piece),
// and pin-list resolution against the CPUs this process may run on.
#include "base/cpu_affinity.h"

#include <algorithm>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace lifeline {
namespace {

TEST(ParseCpuList, IdsAndRangesInTheOrderWritten) {
  auto r = ParseCpuList("0-3,6", "--cpus");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<int>{0, 1, 2, 3, 6}));
  r = ParseCpuList("7,2", "--cpus");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int>{7, 2}));
  r = ParseCpuList("5-5", "--cpus");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int>{5}));
  r = ParseCpuList("1023", "--cpus");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int>{1023}));
}

TEST(ParseCpuList, MalformedListsNameTheFlagAndThePiece) {
  for (const char* bad : {"", ",", "0,", "a", "1-", "-1", "3-1", "0-x", " 1", "1024", "99999",
                          "1.5", "+1", "0--2"}) {
    const auto r = ParseCpuList(bad, "--cpus");
    ASSERT_FALSE(r.ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--cpus"), std::string::npos) << r.status().message();
  }
  const auto twice = ParseCpuList("0-2,1", "--cpus");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("CPU 1 listed twice"), std::string::npos)
      << twice.status().message();
}

TEST(ResolvePinCpus, NothingAskedMeansNoPinning) {
  const auto r = ResolvePinCpus(false, "", 4, "--pin");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

#if defined(__linux__)
TEST(ResolvePinCpus, PinTakesTheFirstAllowedCpus) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const auto r = ResolvePinCpus(true, "", 1, "--pin");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (std::vector<int>{allowed[0]}));
  // More threads than allowed CPUs: refused, not doubled up on a core.
  const auto many = ResolvePinCpus(true, "", static_cast<int>(allowed.size()) + 1, "--pin");
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("--pin"), std::string::npos);
}

TEST(ResolvePinCpus, ListedCpusMustBeAllowedAndEnough) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  const int outside = allowed.back() + 1;  // never in the mask (ids ascend)
  const auto r = ResolvePinCpus(false, std::to_string(outside), 1, "--cpus");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("CPU " + std::to_string(outside)), std::string::npos)
      << r.status().message();
  const auto few = ResolvePinCpus(false, std::to_string(allowed[0]), 2, "--cpus");
  ASSERT_FALSE(few.ok());
  EXPECT_NE(few.status().message().find("for 2 compute threads"), std::string::npos)
      << few.status().message();
  const auto ok = ResolvePinCpus(false, std::to_string(allowed.back()), 1, "--cpus");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, (std::vector<int>{allowed.back()}));
}

TEST(PinCurrentThread, BindsTheCallingThreadOnly) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  std::vector<int> inside;
  std::thread t([&] {
    ASSERT_TRUE(PinCurrentThread(allowed.back()));
    inside = CurrentThreadCpus();
  });
  t.join();
  EXPECT_EQ(inside, (std::vector<int>{allowed.back()}));
  EXPECT_EQ(CurrentThreadCpus(), allowed);  // this thread untouched
  EXPECT_FALSE(PinCurrentThread(-1));
}
#endif

}  // namespace
}  // namespace lifeline
