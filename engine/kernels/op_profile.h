// Per-product timing for benchmarks: when a profile is installed, every RunMatmulGroup call
// (kernel_table.h; the model's products all go through it) adds its wall time and weight bytes
// to an entry keyed by the group's matrices (type and shape) and whether it was a decode
// product (one token) or a batch. `bench-model --profile-ops` installs one around its
// generation runs and prints the table: which products stream below the bandwidth the others
// reach, and how much of a token is fixed per-product cost. Around its prompt runs it installs
// a second one, whose stages (AddStage: the activation quantization inside the products, and
// the model's attention, RoPE + KV writes and embedding outside them) say where a prefill
// step's time goes besides the GEMMs.
//
// Off by default: with no profile installed a product pays one atomic load.
// Thread-safety: Set/Current are atomic; Add locks (products run one at a time per pool
// owner, and several engines may share a profile).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
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
  double macs = 0;          // multiply-adds: n_tokens x rows x cols of every matrix, summed
  double gb_per_s() const { return seconds > 0 ? weight_bytes / seconds / 1e9 : 0; }
  double gops() const { return seconds > 0 ? 2 * macs / seconds / 1e9 : 0; }
};

// Wall time of one named stage (a static string), summed over calls.
struct OpStage {
  const char* name = "";
  int64_t calls = 0;
  double seconds = 0;
};

class OpProfile {
 public:
  void Add(const MatmulGroup& g, int64_t n_tokens, double seconds);
  // `name` must outlive the profile (a string literal); stages are keyed by its text.
  void AddStage(const char* name, double seconds);
  // Entries, most time first.
  std::vector<OpProfileEntry> Entries() const;
  // Stages in the order they were first added.
  std::vector<OpStage> Stages() const;
  double TotalSeconds() const;
  void Reset();

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, bool>, OpProfileEntry> entries_;
  std::map<std::array<const uint8_t*, MatmulGroup::kMaxMatrices>, std::string> keys_;
  std::vector<OpStage> stages_;
};

// Times a scope as a stage of the installed profile (nothing when none is installed).
class OpStageTimer {
 public:
  explicit OpStageTimer(const char* name);
  ~OpStageTimer();
  OpStageTimer(const OpStageTimer&) = delete;
  OpStageTimer& operator=(const OpStageTimer&) = delete;

 private:
  OpProfile* profile_;
  const char* name_;
  std::chrono::steady_clock::time_point t0_;
};

// The installed profile (nullptr: none). Install one only while no product is running.
void SetOpProfile(OpProfile* profile);
OpProfile* CurrentOpProfile();

}  // namespace lifeline
