#include "bench/loadgen/record.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lifeline::loadgen {

namespace {

double Num(const nlohmann::json& j, const char* key, bool* found) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return 0;
  const double v = it->get<double>();
  if (!std::isfinite(v)) return 0;
  *found = true;
  return v;
}

int64_t NestedInt(const nlohmann::json& j, const char* outer, const char* inner) {
  if (!j.is_object()) return -1;
  auto o = j.find(outer);
  if (o == j.end() || !o->is_object()) return -1;
  auto i = o->find(inner);
  if (i == o->end() || !i->is_number_integer()) return -1;
  return i->get<int64_t>();
}

nlohmann::json NumOrNull(double v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); }

}  // namespace

const char* SloMetricName(SloMetric m) {
  switch (m) {
    case SloMetric::kTtft: return "ttft";
    case SloMetric::kTtfa: return "ttfa";
    case SloMetric::kE2e: break;
  }
  return "e2e";
}

double TtftOrE2e(const RequestRecord& r) { return r.x.ttft_ms >= 0 ? r.x.ttft_ms : r.x.e2e_ms; }

double TtfaOrE2e(const RequestRecord& r) {
  if (r.x.ttfa_ms >= 0) return r.x.ttfa_ms;
  // No answer event: without thinking either, the first token was the answer's (or there was
  // none); after thinking only, the answer never came before the end.
  return r.x.reasoning_events == 0 ? TtftOrE2e(r) : r.x.e2e_ms;
}

double RequestRecord::SloValue(SloMetric metric) const {
  if (!ok()) return std::numeric_limits<double>::infinity();
  switch (metric) {
    case SloMetric::kTtft: return TtftOrE2e(*this);
    case SloMetric::kTtfa: return TtfaOrE2e(*this);
    case SloMetric::kE2e: break;
  }
  return x.e2e_ms;
}

bool SplitLayers(const nlohmann::json& timings, double e2e_ms, double* network_ms,
                 double* service_ms, double* compute_ms) {
  if (!timings.is_object()) return false;
  // A server that names the layers in its Server-Timing header (Lifeline does; anyone may):
  // service and compute as it measured them, network the client's residual.
  if (timings.contains("service_ms") && timings.contains("compute_ms") &&
      timings["service_ms"].is_number() && timings["compute_ms"].is_number()) {
    *service_ms = timings["service_ms"].get<double>();
    *compute_ms = timings["compute_ms"].get<double>();
    *network_ms = std::max(0.0, e2e_ms - *service_ms - *compute_ms);
    return true;
  }
  bool lifeline = false;
  double service = 0;
  for (const char* k : {"validate_ms", "template_ms", "tokenize_ms", "queue_ms", "kv_alloc_ms",
                        "model_load_ms"}) {
    service += Num(timings, k, &lifeline);
  }
  double compute = 0;
  for (const char* k : {"prefill_ms", "decode_ms", "sampling_ms"}) {
    compute += Num(timings, k, &lifeline);
  }
  if (!lifeline) {
    bool llama = false;
    service = 0;
    compute = Num(timings, "prompt_ms", &llama) + Num(timings, "predicted_ms", &llama);
    if (!llama) return false;
  }
  *service_ms = service;
  *compute_ms = compute;
  *network_ms = std::max(0.0, e2e_ms - service - compute);
  return true;
}

void DeriveRecord(RequestRecord* rec) {
  HttpExchange& x = rec->x;
  if (x.completion_tokens >= 0) {
    rec->output_tokens = x.completion_tokens;
  } else if (int64_t g = NestedInt(x.timings, "tokens", "generated"); g >= 0) {
    rec->output_tokens = g;
  } else {
    rec->output_tokens = x.content_events;
  }
  rec->prompt_tokens = x.prompt_tokens >= 0 ? x.prompt_tokens
                                            : NestedInt(x.timings, "tokens", "prompt");
  // A non-streamed response shows all tokens at once: no per-token time to measure.
  if (rec->ok() && x.streamed && rec->output_tokens > 1 && x.ttft_ms >= 0 &&
      x.e2e_ms >= x.ttft_ms) {
    rec->tpot_ms = (x.e2e_ms - x.ttft_ms) / static_cast<double>(rec->output_tokens - 1);
  }
  if (rec->ok()) {
    SplitLayers(x.timings, x.e2e_ms, &rec->network_ms, &rec->service_ms, &rec->compute_ms);
    x.body.clear();
    x.body.shrink_to_fit();
  }
}

nlohmann::json RecordJson(const RequestRecord& r) {
  const HttpExchange& x = r.x;
  nlohmann::json j = {
      {"step", r.step},
      {"target", r.target},
      {"index", r.index},
      {"scheduled_ms", r.scheduled_ms},
      {"start_ms", r.start_ms},
      {"send_lag_ms", r.send_lag_ms},
      {"prompt_words", r.prompt_words},
      {"max_tokens", r.max_tokens},
      {"prompt_tokens", r.prompt_tokens < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.prompt_tokens)},
      {"output_tokens", r.output_tokens},
      {"status", x.http_status},
      {"error", x.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(x.error)},
      {"error_detail", x.error_detail.empty() ? nlohmann::json(nullptr)
                                              : nlohmann::json(x.error_detail)},
      {"served_model", x.served_model},
      {"finish_reason", x.finish_reason},
      {"dns_ms", NumOrNull(x.dns_ms)},
      {"connect_ms", NumOrNull(x.connect_ms)},
      {"ttfb_ms", NumOrNull(x.ttfb_ms)},
      {"ttft_ms", NumOrNull(x.ttft_ms)},
      {"ttfa_ms", NumOrNull(x.ttfa_ms)},
      {"e2e_ms", NumOrNull(x.e2e_ms)},
      {"tpot_ms", NumOrNull(r.tpot_ms)},
      {"itl_ms", x.itl_ms},
      {"reasoning_events", x.reasoning_events},
      {"layers", {{"network_ms", NumOrNull(r.network_ms)},
                  {"service_ms", NumOrNull(r.service_ms)},
                  {"compute_ms", NumOrNull(r.compute_ms)}}},
      {"server_timings", x.timings},
  };
  // Only retrieval requests carry inputs; a generation report keeps its fields as they were.
  if (r.inputs > 0) j["inputs"] = r.inputs;
  return j;
}

}  // namespace lifeline::loadgen
