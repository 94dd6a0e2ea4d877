// Small helpers shared by the micro-benchmark executables (kernels_bench, gemm_bench): comma
// lists on the command line, weight-type lists, and process CPU time for runs on a machine
// shared with other work.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/kernels/ggml_type.h"

namespace lifeline::bench {

// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
inline std::vector<std::string> SplitCsv(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const size_t end = comma == std::string_view::npos ? s.size() : comma;
    if (end > start) out.emplace_back(s.substr(start, end - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// "q8_0,q4_k" -> the types; nullopt if a name is unknown.
inline std::optional<std::vector<GgmlType>> ParseTypeList(std::string_view s) {
  std::vector<GgmlType> out;
  for (const auto& n : SplitCsv(s)) {
    const auto t = TypeFromName(n);
    if (!t) return std::nullopt;
    out.push_back(*t);
  }
  return out;
}

// CPU seconds of the whole process (all threads).
inline double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace lifeline::bench
