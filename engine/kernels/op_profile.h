// Per-product timing for benchmarks: when a profile is installed, every RunMatmulGroup call
// (kernel_table.h; the model's products all go through it) adds its wall time and weight bytes
// to an entry keyed by the group's matrices (type and shape) and whether it was a decode
// product (one token) or a batch. `bench-model --profile-ops` installs one around its
// generation runs and prints the table: which products stream below the bandwidth the others
// reach, and how much of a token is fixed per-product cost.
//
// Off by default: with no profile installed a product pays one atomic load.
// Thread-safety: Set/Current are atomic; Add locks (products run one at a time per pool
// owner, and several engines may share a profile).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/kernels/kernel_table.h"

namespace lifeline {

struct OpProfileEntry {
  std::string key;        // "q4_0 2048x2048 + q4_0 256x2048" (type rows x cols per matrix)
  bool decode = false;    // one token per product
  int64_t calls = 0;
  double seconds = 0;     // wall time inside RunMatmulGroup, summed
  double weight_bytes = 0;  // bytes of the group's matrices, summed over calls
  double gb_per_s() const { return seconds > 0 ? weight_bytes / seconds / 1e9 : 0; }
};

class OpProfile {
 public:
  void Add(const MatmulGroup& g, int64_t n_tokens, double seconds);
  // Entries, most time first.
  std::vector<OpProfileEntry> Entries() const;
  double TotalSeconds() const;
  void Reset();

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, bool>, OpProfileEntry> entries_;
  std::map<std::array<const uint8_t*, MatmulGroup::kMaxMatrices>, std::string> keys_;
};

// The installed profile (nullptr: none). Install one only while no product is running.
void SetOpProfile(OpProfile* profile);
OpProfile* CurrentOpProfile();

}  // namespace lifeline
