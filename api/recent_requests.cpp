#include "api/recent_requests.h"

#include <algorithm>
#include <cmath>

namespace lifeline::api {

namespace {

constexpr size_t kMaxIdBytes = 128;
constexpr size_t kMaxModelBytes = 256;

// A finite, non-negative number at `key` of `j`, else 0 (timings come from our own code, but
// a remote member's fields are relayed and must not poison the sums).
double Ms(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  const double v = it->get<double>();
  return std::isfinite(v) && v > 0 ? v : 0;
}

int64_t Count(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return 0;
  return std::max<int64_t>(0, it->get<int64_t>());
}

const nlohmann::json& Member(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

}  // namespace

RequestSplit SplitOfTimings(const nlohmann::json& t) {
  RequestSplit s;
  s.network_ms = Ms(t, "http_read_ms");
  s.service_ms = Ms(t, "validate_ms") + Ms(t, "template_ms") + Ms(t, "tokenize_ms") +
                 Ms(t, "queue_ms") + Ms(t, "kv_alloc_ms") + Ms(t, "model_load_ms") +
                 Ms(t, "handoff_ms");
  s.compute_ms = Ms(t, "prefill_ms") + Ms(t, "decode_ms") + Ms(t, "sampling_ms");
  s.remote_ms = Ms(t, "remote_ms");
  s.total_ms = Ms(t, "server_total_ms");
  const nlohmann::json& latency = Member(t, "latency");
  for (auto [key, out] : {std::pair{"ttft_ms", &s.ttft_ms}, std::pair{"ttfa_ms", &s.ttfa_ms}}) {
    if (latency.is_object() && latency.contains(key) && latency[key].is_number()) {
      const double v = latency[key].get<double>();
      *out = std::isfinite(v) && v >= 0 ? v : -1;
    }
  }
  const nlohmann::json& tokens = Member(t, "tokens");
  s.prompt_tokens = Count(tokens, "prompt");
  s.cached_tokens = Count(tokens, "cached");
  s.generated_tokens = Count(tokens, "generated");
  return s;
}

void RecentRequests::Record(std::string_view id, std::string_view model, RequestSplit s,
                            int64_t end_unix_ms) {
  s.id = std::string(id.substr(0, kMaxIdBytes));
  s.model = std::string(model.substr(0, kMaxModelBytes));
  s.end_unix_ms = end_unix_ms;
  std::lock_guard<std::mutex> lock(mu_);
  ring_[recorded_ % kCapacity] = std::move(s);
  ++recorded_;
}

nlohmann::json RecentRequests::Json(size_t max_entries) const {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t n = std::min<uint64_t>({recorded_, kCapacity, max_entries});
  nlohmann::json out = nlohmann::json::array();
  for (uint64_t i = recorded_ - n; i < recorded_; ++i) {
    const RequestSplit& s = ring_[i % kCapacity];
    out.push_back({{"id", s.id},
                   {"model", s.model},
                   {"end_unix_ms", s.end_unix_ms},
                   {"network_ms", s.network_ms},
                   {"service_ms", s.service_ms},
                   {"compute_ms", s.compute_ms},
                   {"remote_ms", s.remote_ms},
                   {"total_ms", s.total_ms},
                   {"ttft_ms", s.ttft_ms < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.ttft_ms)},
                   {"prompt_tokens", s.prompt_tokens},
                   {"cached_tokens", s.cached_tokens},
                   {"generated_tokens", s.generated_tokens}});
  }
  return out;
}

uint64_t RecentRequests::recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recorded_;
}

}  // namespace lifeline::api
