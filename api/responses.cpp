#include "api/responses.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "api/http_message.h"

namespace lifeline::api {

using json = nlohmann::json;

namespace {

std::string FormatMs(double ms) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", ms);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

bool IsTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '-' || c == '.';
}

}  // namespace

json ResponseEnvelope(const CompletionContext& ctx, bool chunk) {
  const char* object = ctx.is_chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                   : "text_completion";
  return json{{"id", ctx.id}, {"object", object}, {"created", ctx.created_unix_s},
              {"model", ctx.model}};
}

json UsageJson(const Usage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
              {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}}};
}

std::string SseEvent(const json& payload) {
  std::string out = "data: ";
  out += DumpJson(payload);
  out += "\n\n";
  return out;
}

namespace {

double MsOr0(const json& timings, const char* key) {
  auto it = timings.find(key);
  return it != timings.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

std::string ServerTimingHeader(const json& timings) {
  if (!timings.is_object()) return {};
  constexpr std::string_view kSuffix = "_ms";
  std::string out;
  // The three layers first (network: reading the request; compute: the model's passes,
  // sampling, or a remote member's upstream time; service: the rest), summing to
  // server_total, so any client reading the standard header sees the product's split.
  if (auto total = timings.find("server_total_ms"); total != timings.end() && total->is_number()) {
    const double total_ms = total->get<double>();
    const double network = MsOr0(timings, "http_read_ms");
    const double compute = MsOr0(timings, "prefill_ms") + MsOr0(timings, "decode_ms") +
                           MsOr0(timings, "sampling_ms") + MsOr0(timings, "remote_ms");
    const double service = std::max(0.0, total_ms - network - compute);
    if (std::isfinite(total_ms)) {
      out = "network;dur=" + FormatMs(network) + ", service;dur=" + FormatMs(service) +
            ", compute;dur=" + FormatMs(compute);
    }
  }
  for (auto it = timings.begin(); it != timings.end(); ++it) {
    const std::string& key = it.key();
    if (key.size() <= kSuffix.size() || !key.ends_with(kSuffix) || !it->is_number()) continue;
    const double ms = it->get<double>();
    if (!std::isfinite(ms)) continue;
    std::string name;
    for (char c : std::string_view(key).substr(0, key.size() - kSuffix.size())) {
      name += IsTokenChar(c) ? c : '_';
    }
    if (!out.empty()) out += ", ";
    out += name + ";dur=" + FormatMs(ms);
  }
  // Milestones, not phases: the first token and the first answer token (a thinking model's
  // answer starts after its thinking), from the first request byte.
  if (auto lat = timings.find("latency"); lat != timings.end() && lat->is_object()) {
    for (const char* key : {"ttft", "ttfa"}) {
      auto v = lat->find(std::string(key) + "_ms");
      if (v == lat->end() || !v->is_number() || !std::isfinite(v->get<double>()) ||
          v->get<double>() < 0) {
        continue;
      }
      if (!out.empty()) out += ", ";
      out += std::string(key) + ";dur=" + FormatMs(v->get<double>());
    }
  }
  return out;
}

std::string ThinkingHeader(const json& timings) {
  if (!timings.is_object()) return {};
  auto ext = timings.find("lifeline");
  if (ext == timings.end() || !ext->is_object()) return {};
  auto r = ext->find("reasoning");
  if (r == ext->end() || !r->is_object()) return {};
  std::string out = "tokens=" + std::to_string(r->value("tokens", int64_t{0})) +
                    "; budget=" + std::to_string(r->value("budget_tokens", int64_t{-1}));
  if (const int64_t asked = r->value("requested_budget_tokens", int64_t{-1});
      asked != r->value("budget_tokens", int64_t{-1})) {
    out += "; requested=" + std::to_string(asked);
  }
  if (auto by = r->find("shortened_by"); by != r->end() && by->is_string()) {
    out += "; shortened-by=" + by->get<std::string>();
  }
  if (r->value("cut", false)) out += "; cut";
  return out;
}

}  // namespace lifeline::api
