#include "base/cpu_affinity.h"

#include <algorithm>
#include <charconv>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace lifeline {
namespace {

// One decimal id in [0, kMaxCpuId]; false on anything else (sign, blanks, overflow).
bool ParseId(std::string_view s, int* out) {
  if (s.empty() || s.size() > 4) return false;
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v > kMaxCpuId) return false;
  *out = v;
  return true;
}

#if defined(__linux__)
// The ids set in an affinity mask, ascending.
std::vector<int> CpusIn(const cpu_set_t& set) {
  std::vector<int> cpus;
  for (int c = 0; c <= kMaxCpuId && c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}
#endif

}  // namespace

Result<std::vector<int>> ParseCpuList(std::string_view list, std::string_view what) {
  const std::string name(what);
  if (list.empty()) return InvalidArgument(name + ": empty CPU list (expected e.g. 0-3,6)");
  std::vector<int> cpus;
  std::vector<bool> seen(kMaxCpuId + 1, false);
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view piece = list.substr(start, comma - start);
    const size_t dash = piece.find('-');
    int lo = 0, hi = 0;
    bool ok;
    if (dash == std::string_view::npos) {
      ok = ParseId(piece, &lo);
      hi = lo;
    } else {
      ok = ParseId(piece.substr(0, dash), &lo) && ParseId(piece.substr(dash + 1), &hi);
    }
    if (!ok || hi < lo) {
      return InvalidArgument(name + ": bad CPU list entry '" + std::string(piece) +
                             "' (expected ids or ranges in [0, " + std::to_string(kMaxCpuId) +
                             "], e.g. 0-3,6)");
    }
    for (int c = lo; c <= hi; ++c) {
      if (seen[static_cast<size_t>(c)]) {
        return InvalidArgument(name + ": CPU " + std::to_string(c) + " listed twice");
      }
      seen[static_cast<size_t>(c)] = true;
      cpus.push_back(c);
    }
    start = comma + 1;
  }
  return cpus;
}

std::vector<int> AllowedCpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CpusIn(set);
#endif
  return {};
}

bool PinCurrentThread(int cpu) {
#if defined(__linux__)
  if (cpu < 0 || cpu > kMaxCpuId || cpu >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
#else
  (void)cpu;
  return false;
#endif
}

std::vector<int> CurrentThreadCpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0) return CpusIn(set);
#endif
  return {};
}

Result<std::vector<int>> ResolvePinCpus(bool pin, std::string_view cpus_flag, int n_threads,
                                        std::string_view flag) {
  const std::string name(flag);
  if (!pin && cpus_flag.empty()) return std::vector<int>{};
  const std::vector<int> allowed = AllowedCpus();
  if (allowed.empty()) return Unimplemented(name + ": thread pinning is not supported here");
  std::vector<int> cpus;
  if (!cpus_flag.empty()) {
    LL_ASSIGN_OR_RETURN(cpus, ParseCpuList(cpus_flag, name));
    for (int c : cpus) {
      if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
        return InvalidArgument(name + ": CPU " + std::to_string(c) +
                               " is not one this process may run on (" + CpuListString(allowed) +
                               ")");
      }
    }
  } else {
    cpus = allowed;
  }
  if (static_cast<int64_t>(cpus.size()) < n_threads) {
    return InvalidArgument(name + ": " + std::to_string(cpus.size()) + " CPU(s) (" +
                           CpuListString(cpus) + ") for " + std::to_string(n_threads) +
                           " compute threads; give at least one CPU per thread or fewer threads");
  }
  cpus.resize(static_cast<size_t>(n_threads));
  return cpus;
}

std::string CpuListString(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(cpus[i]);
  }
  return s;
}

}  // namespace lifeline
