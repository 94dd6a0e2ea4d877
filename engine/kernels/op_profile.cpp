#include "engine/kernels/op_profile.h"

#include <algorithm>
#include <string_view>

#include "engine/kernels/ggml_type.h"

namespace lifeline {
namespace {
std::atomic<OpProfile*> g_profile{nullptr};
}  // namespace

void SetOpProfile(OpProfile* profile) { g_profile.store(profile, std::memory_order_release); }

OpProfile* CurrentOpProfile() { return g_profile.load(std::memory_order_acquire); }

void OpProfile::Add(const MatmulGroup& g, int64_t n_tokens, double seconds) {
  double bytes = 0, macs = 0;
  std::array<const uint8_t*, MatmulGroup::kMaxMatrices> ptrs{};
  for (int i = 0; i < g.n; ++i) {
    bytes += static_cast<double>(g.w[i].rows) * static_cast<double>(g.w[i].row_bytes);
    macs += static_cast<double>(n_tokens) * static_cast<double>(g.w[i].rows) *
            static_cast<double>(g.w[i].cols);
    ptrs[static_cast<size_t>(i)] = g.w[i].data;
  }
  const bool decode = n_tokens == 1;
  std::lock_guard<std::mutex> lock(mu_);
  // The key string is built once per distinct group (a model has a few hundred), not per
  // call: the profile should not add allocations to the products it times.
  auto [it, fresh] = keys_.try_emplace(ptrs);
  if (fresh) {
    for (int i = 0; i < g.n; ++i) {
      if (i > 0) it->second += " + ";
      it->second += std::string(TypeTraits(g.w[i].type).name) + " " +
                    std::to_string(g.w[i].rows) + "x" + std::to_string(g.w[i].cols);
    }
  }
  const std::string& key = it->second;
  OpProfileEntry& e = entries_[{key, decode}];
  if (e.calls == 0) {
    e.key = key;
    e.decode = decode;
  }
  ++e.calls;
  e.seconds += seconds;
  e.weight_bytes += bytes;
  e.macs += macs;
}

void OpProfile::AddStage(const char* name, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  for (OpStage& st : stages_) {
    if (std::string_view(st.name) == name) {  // by content: equal literals may differ in address
      ++st.calls;
      st.seconds += seconds;
      return;
    }
  }
  stages_.push_back({name, 1, seconds});
}

std::vector<OpStage> OpProfile::Stages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stages_;
}

OpStageTimer::OpStageTimer(const char* name) : profile_(CurrentOpProfile()), name_(name) {
  if (profile_ != nullptr) t0_ = std::chrono::steady_clock::now();
}

OpStageTimer::~OpStageTimer() {
  if (profile_ == nullptr) return;
  profile_->AddStage(
      name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
}

std::vector<OpProfileEntry> OpProfile::Entries() const {
  std::vector<OpProfileEntry> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, e] : entries_) out.push_back(e);
  }
  std::sort(out.begin(), out.end(),
            [](const OpProfileEntry& a, const OpProfileEntry& b) { return a.seconds > b.seconds; });
  return out;
}

double OpProfile::TotalSeconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  double s = 0;
  for (const auto& [k, e] : entries_) s += e.seconds;
  return s;
}

void OpProfile::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
  keys_.clear();
  stages_.clear();
}

}  // namespace lifeline
