// libFuzzer harness for the tool-call parsers (not part of the default build; the test suite
// runs a deterministic mutation pass with the same check, tests/toolcall/robustness_test.cpp).
// Whole-output and streamed parsing must agree for any output, format and chunking, every
// result must be well formed (tests/toolcall/agreement.h), and nothing may crash.
//
// Build and run from the repository root, e.g.:
//   clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
//     -I. -Itests tests/fuzz/toolcall_fuzz.cpp text/toolcall/*.cpp base/status.cpp \
//     -o toolcall_fuzz
//   ./toolcall_fuzz -max_len=4096 -rss_limit_mb=512 -timeout=2 tests/fuzz/toolcall_corpus/
//
// Input layout: byte 0 picks the format (value % 6, in ToolCallFormat's order: '2' is
// hermes), byte 1 the options (bit 0: starts_in_thinking; the byte is also the id seed),
// byte 2 the number of chunk boundaries (value % 8), then one byte per boundary (its position
// is that byte scaled to the output's length), then the output text.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "toolcall/agreement.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lifeline::toolcall;
  if (size < 3) return 0;
  const auto format = static_cast<ToolCallFormat>(data[0] % 6);
  ToolCallParseOptions options;
  options.starts_in_thinking = (data[1] & 1) != 0;
  options.id_seed = data[1];
  const size_t n_cuts = data[2] % 8;
  if (size < 3 + n_cuts) return 0;
  const std::string_view output(reinterpret_cast<const char*>(data + 3 + n_cuts),
                                size - 3 - n_cuts);
  std::vector<size_t> cuts;
  for (size_t i = 0; i < n_cuts; ++i) cuts.push_back(data[3 + i] * (output.size() + 1) / 256);
  std::sort(cuts.begin(), cuts.end());
  const std::string problem = lifeline::toolcall::testing::CheckAgreement(format, output, cuts, options);
  if (!problem.empty()) {
    std::fprintf(stderr, "toolcall_fuzz: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
