// Facts about what is being measured, for the SLA verdict table: the model (GET /v1/models,
// `lifeline inspect --json` for a locally served file, the target spec, or the model name),
// the client machine's CPU (/proc/cpuinfo) and the server's degradation events (GET /v1/slo,
// optional: a 404 just means "not served").
//
// Ownership: values. Thread-safety: pure parsers plus blocking fetches on private loops.
// Failure: parsers never fail (missing facts stay ""); fetches return the HTTP outcome.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/loadgen/http_client.h"

namespace lifeline::loadgen {

struct ModelFacts {
  std::string id;            // model id the facts are about
  std::string parameters;    // "260K", "7.2B", ... ("" = unknown)
  std::string quantization;  // "Q8_0", "F32", ... ("" = unknown)
  int64_t context_length = 0;
  std::string source;        // where the facts came from, e.g. "/v1/models", "name"
};

// Picks `wanted` (or the first entry when empty or absent) from a /v1/models body and reads
// what it says: meta.n_params / meta.parameters, meta.quantization / meta.ftype,
// meta.context_length / max_model_len / meta.n_ctx_train.
ModelFacts FactsFromModelsList(const nlohmann::json& body, const std::string& wanted);

// Facts from `lifeline inspect --json` output: parameters = sum of tensor element counts,
// quantization = the tensor type holding the most bytes.
ModelFacts FactsFromInspectJson(const nlohmann::json& inspect);

// Guesses from a model name: "llama-7b-q4_k_m" -> parameters "7B", quantization "Q4_K_M".
std::string ParametersFromName(const std::string& name);
std::string QuantizationFromName(const std::string& name);

// Three significant digits: 260000 -> "260K", 6738415616 -> "6.74B", 950 -> "950".
std::string FormatParameterCount(double n);

struct HardwareFacts {
  std::string cpu_model;  // "model name" of the first processor ("" = unknown)
  int logical_cores = 0;  // number of "processor" entries
};

HardwareFacts ParseCpuInfo(const std::string& cpuinfo_text);
HardwareFacts LocalHardware();  // /proc/cpuinfo of this machine

struct SloEvent {
  double t_ms = 0;      // from the benchmark run's start (may be negative)
  std::string kind;     // "kind" / "type" / "event" / "level" of the entry
  std::string detail;   // "message" / "detail" / "reason"
};

// GET /v1/slo body: {"events": [...]} (Lifeline), {"degradations": [...]} or a bare array.
// Each entry is placed on the run's timeline by "age_ms" (ms before the response, which
// arrived `fetched_at_run_ms` after the run start; Lifeline's form, immune to clock offsets),
// else by "unix_ms" / "time_unix_ms" / "at_unix_ms" / "timestamp_ms", or "unix_s" /
// "timestamp" (seconds). Entries without a usable time are dropped. kind: "kind" / "type" /
// "event" / "level", else "CLASS: FROM -> TO" from Lifeline's "class", "from", "to".
std::vector<SloEvent> ParseSloEvents(const nlohmann::json& body, int64_t run_start_unix_ms,
                                     double fetched_at_run_ms);

struct TargetFacts {
  ModelFacts model;
  std::string models_status;  // "ok", "http 404", "connect: ..." for GET /v1/models
  std::vector<SloEvent> slo_events;
  std::string slo_status;     // "ok", "http 404" (not served), "connect: ...", "not fetched"
};

// GET base/v1/models; facts empty when it fails. `reachable` is false on a connect error.
TargetFacts FetchModelFacts(const Url& url, const std::string& model, const std::string& api_key,
                            double timeout_s, bool* reachable);
// GET base/v1/slo into facts->slo_events / slo_status.
void FetchSloEvents(const Url& url, const std::string& api_key, double timeout_s,
                    int64_t run_start_unix_ms, TargetFacts* facts);

}  // namespace lifeline::loadgen
