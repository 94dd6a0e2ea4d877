// SLO configuration: scenario classes with P95 targets, user-role multipliers, the model
// cascade (local GGUF models and remote OpenAI-compatible backends, heavy -> light), and the
// parameters of the latency windows, batch controller, degradation ladder and admission.
// Built-in defaults (DefaultSloConfig) work with no file; a TOML file (`serve --config`)
// overrides them key by key. docs/slo.md lists every key with its default.
//
// Resolve() turns a request's SLO fields (class, role, explicit deadline) into its budget.
//
// Ownership: value types. Thread-safety: immutable after parsing; const methods are safe
// from any thread. Failure: ParseSloConfig returns InvalidArgument naming the source, line,
// key, value and limit ("slo.toml:12: ladder.recover_ticks = 0 is below the minimum 1");
// Resolve returns InvalidArgument naming `slo_class`, `user_role` or `deadline_ms`.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "slo/histogram.h"

namespace lifeline::slo {

inline constexpr double kMaxBudgetMs = 3'600'000;  // 1 h: largest target or deadline accepted

// How long a class's requests may think (thinking models, docs/reasoning.md), in tokens;
// -1: unlimited. The request's thinking_budget_tokens, else its reasoning_effort's entry,
// else default_budget_tokens; never above max_budget_tokens; then scaled by the ladder's
// thinking rung (`scale`, from the knobs at submission; 1: none).
struct ThinkingPolicy {
  int64_t default_budget_tokens = -1;
  int64_t max_budget_tokens = -1;
  std::array<int64_t, 4> effort_budget_tokens = {0, 512, 2048, 8192};  // minimal..high
  double scale = 1.0;
};

struct SloClass {
  std::string name;                  // [a-z0-9_-]{1,64}
  std::optional<double> ttft_p95_ms;  // time to first token
  // Time to the first answer token: a thinking model's answer comes after its thinking,
  // which a TTFT target does not see (docs/reasoning.md).
  std::optional<double> ttfa_p95_ms;
  ThinkingPolicy thinking;
  std::optional<double> e2e_p95_ms;   // end to end (first request byte .. last byte)
  std::optional<double> tpot_p95_ms;  // time per output token after the first
  int32_t priority = 0;               // higher runs first (scheduler: priority desc)
  int32_t max_level = 4;              // highest ladder level this class may reach (0..4)
  // A queued request that can no longer have its first token within its budget (docs/slo.md,
  // "Late requests"): false (on_late = "shed", the default) ends it at once with 429 and
  // Retry-After; true ("serve") keeps it queued and discloses the miss in its answer.
  bool serve_late = false;
};

// One cascade member: a local model (path) or a remote OpenAI-compatible backend (url, model).
struct ModelEntry {
  std::string name;          // what requests name in `model`; unique
  std::string path;          // local GGUF file; empty for remote members
  std::string url;           // remote base URL (http:// or https://), e.g. http://h:8000/v1
  std::string remote_model;  // the `model` sent to the remote backend
  bool in_cascade = true;    // false: served when named, never a fallback target
  int32_t max_queue_requests = 256;     // bounded queue per model (admission)
  int64_t max_queue_tokens = 1 << 20;   // queued prompt tokens per model (admission)
  int64_t source_line = 0;  // line of its [[models]] table in the config file; 0: not from one

  bool remote() const { return !url.empty(); }
};

struct ControllerParams {
  int64_t tick_ms = 200;             // how often the owner of the timer calls Tick
  int64_t min_samples = 20;          // fewer samples in a window: no signal (never raises)
  double batch_high_ratio = 1.1;     // P95 > 1.1 x target: halve the batch
  double batch_low_ratio = 0.9;      // P95 < 0.9 x target: double the batch
  int64_t batch_adjust_interval_ms = 1000;  // at most one halve/double per model per interval
};

// Adaptive batch limits plus a Triton-style batching window, per local model.
struct BatchParams {
  int32_t initial = 64;              // max running sequences at start
  int32_t floor = 4;                 // halving never goes below
  int32_t cap = 128;                 // doubling never goes above (the max batch)
  int32_t step_tokens_per_seq = 8;   // max_step_tokens = max(min_step_tokens, batch x this)
  int64_t min_step_tokens = 128;
  std::vector<int32_t> preferred_batch_sizes;  // ascending, each in [1, cap]; empty = none
  double max_queue_delay_ms = 0;     // wait up to this for a preferred size; 0 = never wait
};

struct LadderParams {
  double enter_ratio = 1.0;          // P95 > enter_ratio x target: raise one level
  double recover_ratio = 0.9;        // P95 < recover_ratio x target counts as a healthy tick
  int32_t recover_ticks = 10;        // consecutive healthy ticks before lowering one level
  int64_t min_dwell_ms = 5000;       // time in a level before it may be lowered
  int64_t raise_interval_ms = 1000;  // time in a level before it may be raised again
  // After a transition, a raise also needs the samples recorded since it (whole window
  // buckets newer than the transition, at least min_samples) to be over target; false: the
  // whole window alone decides, so one burst of slow samples can climb several levels.
  bool raise_needs_fresh_samples = true;
  int32_t max_level = 4;             // default for classes without their own max_level
  int64_t truncate_max_tokens = 256; // level >= 1: max_tokens capped to this
  // ... and to what fits the e2e budget at the measured decode speed, but never below this
  // floor (nor below nothing: a request asking for fewer keeps its own max_tokens). 64
  // tokens is about 45 English words, a short paragraph: the smallest answer still useful
  // as an answer. A request that cannot have that much within its budget keeps the floor
  // and is ended by the deadline stop at its deadline instead, which reports the cut. A
  // floor above truncate_max_tokens is lowered to it.
  int64_t truncate_min_tokens = 64;
  // Level >= 2, requests with allow_context_trim: old chat turns are dropped until the prompt
  // fits this many tokens (or what the TTFT budget leaves at the measured prefill speed).
  int64_t trim_to_tokens = 2048;
  int32_t event_log_size = 256;      // transitions kept in memory (oldest dropped)
  // The thinking rung, below level 1 (docs/reasoning.md): a class over target whose requests
  // think first halves its thinking budgets (at most once per raise_interval_ms, judged on
  // fresh samples as a raise is) down to this fraction, and only then raises the level;
  // healthy ticks double it back before anything else recovers. 1 turns the rung off.
  double min_thinking_scale = 0.125;
};

struct AdmissionParams {
  bool predictive = true;            // reject/route on predicted TTFT; false: queue limits only
  double ewma_alpha = 0.2;           // weight of the newest speed measurement
  // Multiplies the predicted service time (queue, step in flight, own prefill): the
  // prediction is a mean at the EWMA speed while the budget is a P95, so it leaves room for
  // step-time spread (1 + ~1.65 x a ~10% coefficient of variation of step times).
  double prediction_margin = 1.15;
  // Closed-loop correction of that margin, per class: each controller tick multiplies the
  // class's scale by at least margin_raise_factor (sqrt of P95 / target, at most 1.25) while
  // its TTFT P95 is over target and divides it by
  // margin_lower_factor while the P95 is under 0.8 x target, within [1, max_margin_scale].
  // Admission predicts with prediction_margin x scale, so a predictor that is optimistic
  // under this load (step-time spread, HTTP and client threads sharing the cores) routes or
  // sheds earlier until the admitted P95 is back within target. 1: off.
  double max_margin_scale = 4.0;
  double margin_raise_factor = 1.05;
  double margin_lower_factor = 1.02;
  // A speed estimate with no measurement for this long is stale: one request predicted to
  // miss is admitted as a probe (at most one per this interval), and the next measurement
  // replaces the stale average. 0: never stale.
  int64_t speed_stale_ms = 5000;
  int32_t max_retry_after_s = 60;    // Retry-After is clamped to [1, this]
  int32_t not_ready_retry_after_s = 1;  // Retry-After of a 503 while the model is not ready
};

// [autotune]: guarded tuning of each class's TTFT P95 target from the cliff the server learns
// live (docs/economics.md "Guarded tuning"; slo/autotune.h). Off unless enabled.
struct AutotuneParams {
  bool enabled = false;
  double margin = 0.10;       // the goal: cliff x (1 - margin)
  double max_step = 0.10;     // one move changes the target by at most this fraction
  double min_factor = 0.5;    // the target stays within [min_factor, max_factor] x the configured one
  double max_factor = 2.0;
  int32_t stable_refits = 3;  // consecutive significant estimates, each inside the one before's interval
  int64_t min_interval_ms = 1'800'000;  // at most one move per class per interval
};

struct SloConfig {
  std::string default_class = "interactive";
  std::vector<SloClass> classes;                        // sorted by name
  std::vector<std::pair<std::string, double>> roles;    // name -> budget multiplier, sorted
  std::vector<ModelEntry> models;                       // cascade order: heavy -> light
  WindowSpec window;                                    // 12 x 2.5 s = 30 s
  ControllerParams controller;
  BatchParams batching;
  LadderParams ladder;
  AdmissionParams admission;
  AutotuneParams autotune;

  const SloClass* FindClass(std::string_view name) const;
  std::optional<double> RoleMultiplier(std::string_view role) const;
  const ModelEntry* FindModel(std::string_view name) const;
  // The next cascade member after `model` (lighter), skipping in_cascade = false entries;
  // nullptr when `model` is the last one or not a cascade member.
  const ModelEntry* NextInCascade(std::string_view model) const;
};

// The presets: interactive (default), chat, customer-service, medical, code-completion,
// risk-control, video-call, asr; roles doctor 0.8, agent 1.0, user 1.3; no models.
SloConfig DefaultSloConfig();

// Parses TOML text over the defaults. `source_name` prefixes error messages.
Result<SloConfig> ParseSloConfig(std::string_view toml_text, std::string_view source_name);
Result<SloConfig> LoadSloConfigFile(const std::string& path);

// Every local [[models]] entry's `path` names an existing, readable regular file (relative
// paths from the working directory, like --model's). `serve` calls it after loading its
// config file, so a misspelt path stops the start instead of passing unnoticed; the parser
// itself never touches the file system (tools read configs of other machines; the fuzzer).
// Error: "FILE:LINE: models[I] ('NAME').path: 'PATH' does not exist" (or "is a directory,
// not a file", "is not a regular file", "cannot be read: <reason>").
Status CheckModelFiles(const SloConfig& config, std::string_view source_name);

// The SLO fields of one request, header and body already merged by the caller (the header
// X-SLO-Class / X-User-Role wins over the body's slo_class / user_role).
struct RequestSloFields {
  std::string slo_class;              // empty: the default class; matched case-insensitively
  std::string user_role;              // empty: multiplier 1
  std::optional<double> deadline_ms;  // explicit end-to-end budget from arrival
  bool allow_context_trim = false;
};

struct RequestBudget {
  std::string slo_class;
  int32_t priority = 0;
  double multiplier = 1.0;
  // First-token budget: the class TTFT target x multiplier, never later than the e2e budget;
  // the e2e budget alone when the class has no TTFT target. Always set.
  double ttft_budget_ms = 0;
  // End-to-end budget: the explicit deadline_ms, else the class e2e target x multiplier.
  std::optional<double> e2e_budget_ms;
  std::optional<double> tpot_budget_ms;  // class target x multiplier
  // Time to the first answer token: the class TTFA target x multiplier, never later than the
  // e2e budget (none without a TTFA target).
  std::optional<double> ttfa_budget_ms;
  // The request's own deadline_ms (also e2e_budget_ms); none when the budget is the class's.
  std::optional<double> deadline_ms;
  bool allow_context_trim = false;
};

// `targets`: the targets in force when the autotuner moved any (slo/target_board.h).
class TargetBoard;
Result<RequestBudget> Resolve(const SloConfig& config, const RequestSloFields& fields,
                              const TargetBoard* targets = nullptr);

}  // namespace lifeline::slo
