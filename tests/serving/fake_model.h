// A scripted LocalModel for ServingHub's tests: requests are queued as they are enqueued,
// and the test decides when each gets its first token and when it ends, on a fake clock. The
// load it reports is what the test sets (SetLoad) plus its own open requests, so admission,
// the ladder, the queue sensor and the prediction audit run exactly as in production while
// nothing depends on how fast a machine runs a model.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "serving/local_model.h"
#include "serving/request_prep.h"

namespace lifeline::testing {

class FakeModel final : public serving::LocalModel {
 public:
  explicit FakeModel(std::string name, int64_t prompt_tokens = 64)
      : name_(std::move(name)), prompt_tokens_(prompt_tokens) {}

  // The load admission reads, besides the open requests counted here.
  void SetLoad(slo::QueueLoad load) {
    std::lock_guard<std::mutex> lock(mu_);
    load_ = load;
  }
  // Of each prompt, the tokens Prepare reports the prefix cache holds (PreparedSubmit).
  void SetCachedPromptTokens(int64_t n) { cached_prompt_tokens_ = n; }
  void SetPromptTokens(int64_t n) { prompt_tokens_ = n; }
  // The speed estimator the service attached (to seed a fit, as calibration would).
  slo::SpeedEstimator* speeds() const { return hooks_.speeds; }

  // The open requests, oldest first.
  std::vector<api::RequestHandle> Open() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<api::RequestHandle> out;
    for (const auto& [h, r] : open_) out.push_back(h);
    return out;
  }
  // Its first token now: the sink sees one token event and the tracker a TTFT sample, as the
  // engine's would (on the clock the service attached).
  void FirstToken(api::RequestHandle h) {
    Record(h, /*first=*/true);
    Emit(h, api::GenerationEvent::Token("x", 1));
  }
  // Its chat template implies a thinking format: Prepare resolves thinking budgets.
  void SetThinks(bool thinks) { thinks_ = thinks; }
  // A thinking model: its first token is thinking (a reasoning-only event, no answer yet);
  // Answer later gives the answer's first text and the tracker TTFA and thinking-time samples.
  void Think(api::RequestHandle h) {
    Record(h, /*first=*/true);
    api::GenerationEvent ev = api::GenerationEvent::Token("", 1);
    ev.reasoning = "hmm";
    Emit(h, std::move(ev));
  }
  void Answer(api::RequestHandle h) {
    RecordAnswer(h);
    Emit(h, api::GenerationEvent::Token("x", 2));
  }
  // What the service asked of an enqueued request (its class, thinking policy, ...).
  std::optional<serving::SubmitSlo> SloOf(api::RequestHandle h) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(h);
    return it == open_.end() ? std::nullopt : it->second.slo;
  }
  // The thinking budget Prepare resolved for an enqueued request (-1 unlimited) and the cap
  // admission set to fit its TTFA budget (nullopt: none).
  int64_t ThinkingBudgetOf(api::RequestHandle h) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(h);
    return it == open_.end() ? -1 : it->second.thinking_budget_tokens;
  }
  std::optional<int64_t> ThinkingCapOf(api::RequestHandle h) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(h);
    return it == open_.end() ? std::nullopt : it->second.thinking_budget_cap;
  }
  // Ends it with one done event; false when it is not open.
  bool Finish(api::RequestHandle h) {
    Record(h, /*first=*/false);
    api::Usage u;
    u.prompt_tokens = prompt_tokens_;
    u.completion_tokens = 1;
    return End(h, api::GenerationEvent::Done("stop", u));
  }
  // Drops it as late, as ModelEngine does with a queued request that can no longer meet its
  // TTFT budget: one 429 slo_late error event.
  void FailLate(api::RequestHandle h) {
    End(h, api::GenerationEvent::Error(api::MakeError(
                api::ErrorKind::kOverloaded, "slo_late", "late on " + name_, {}, 2)));
  }
  // The max_tokens cap of an enqueued request (nullopt: none).
  std::optional<int64_t> CapOf(api::RequestHandle h) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = open_.find(h);
    return it == open_.end() ? std::nullopt : it->second.cap;
  }

  const std::string& name() const override { return name_; }
  api::ModelInfo Info() const override {
    api::ModelInfo m;
    m.id = name_;
    m.context_length_tokens = 4096;
    return m;
  }
  void AttachSlo(serving::SloHooks hooks) override { hooks_ = std::move(hooks); }
  void Start() override {}
  void Stop() override {
    for (api::RequestHandle h : Open()) {
      End(h, api::GenerationEvent::Error(
                 api::MakeError(api::ErrorKind::kUnavailable, "shutting_down", "stopping")));
    }
  }
  // As ModelEngine when its file changed under it: unhealthy, saying why, and refusing in
  // Prepare with 503 model_failed.
  void Fail(std::string why) {
    std::lock_guard<std::mutex> lock(mu_);
    failure_ = std::move(why);
  }
  bool Healthy() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return failure_.empty();
  }
  std::string Failure() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }

  std::variant<serving::PreparedSubmit, api::ApiError> Prepare(
      api::GenerationRequest request, const serving::SubmitSlo* slo) override {
    if (std::string why = Failure(); !why.empty()) {
      return api::MakeError(api::ErrorKind::kUnavailable, "model_failed",
                               "model '" + name_ + "' failed: " + why);
    }
    serving::PreparedSubmit p;
    p.prompt_tokens = prompt_tokens_;
    p.cached_prompt_tokens = cached_prompt_tokens_;
    p.max_tokens = request.max_tokens.value_or(256);
    p.timing.first_byte = request.timeline.first_byte;
    if (slo != nullptr) p.slo = *slo;
    if (thinks_) {
      // As ModelEngine::Prepare does for a model with a reasoning format.
      serving::PreparedRequest prep;
      prep.reasoning = std::make_shared<serving::ReasoningSetup>();
      prep.max_tokens = p.max_tokens;
      serving::ApplyThinkingPolicy(slo != nullptr ? slo->thinking : slo::ThinkingPolicy{},
                                   request, &prep);
      p.thinking_shortened_by = prep.reasoning_shortened_by;
      p.thinks = true;
      p.thinking_budget_tokens = prep.reasoning_budget_tokens;
    }
    return p;
  }
  std::optional<api::ApiError> EnqueuePrepared(serving::PreparedSubmit prepared,
                                                  api::RequestHandle h,
                                                  api::GenerationSink sink,
                                                  std::optional<int64_t> cap,
                                                  std::string) override {
    std::lock_guard<std::mutex> lock(mu_);
    open_[h] = Open_{std::move(sink), cap, prepared.timing.first_byte,
                     prepared.slo ? prepared.slo->slo_class : std::string("interactive")};
    open_[h].slo = prepared.slo;
    open_[h].thinking_budget_tokens = prepared.thinking_budget_tokens;
    open_[h].thinking_budget_cap = prepared.thinking_budget_cap;
    return std::nullopt;
  }
  void Cancel(api::RequestHandle h) override {
    End(h, api::GenerationEvent::Error(
               api::MakeError(api::ErrorKind::kCancelled, "cancelled", "cancelled")));
  }
  slo::QueueLoad Load(int64_t) const override {
    std::lock_guard<std::mutex> lock(mu_);
    slo::QueueLoad l = load_;
    l.open_requests = static_cast<int64_t>(open_.size());
    return l;
  }
  int64_t OpenRequests() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(open_.size());
  }
  serving::EngineSnapshot Snapshot() const override {
    serving::EngineSnapshot s;
    s.live_requests = OpenRequests();
    return s;
  }
  std::variant<std::string, api::ApiError> ApplyTemplate(
      const api::GenerationRequest&) const override {
    return std::string();
  }
  std::variant<std::vector<int32_t>, api::ApiError> Tokenize(
      const api::TokenizeRequest&) const override {
    return std::vector<int32_t>{};
  }
  std::variant<std::string, api::ApiError> Detokenize(
      const api::DetokenizeRequest&) const override {
    return std::string();
  }

 private:
  struct Open_ {
    api::GenerationSink sink;
    std::optional<int64_t> cap;
    serving::Clock::time_point first_byte;
    std::string slo_class;
    bool first_recorded = false;
    std::optional<serving::SubmitSlo> slo;
    double first_token_ms = -1;
    int64_t thinking_budget_tokens = -1;
    std::optional<int64_t> thinking_budget_cap;
  };
  void RecordAnswer(api::RequestHandle h) {
    if (hooks_.tracker == nullptr || !hooks_.clock) return;
    const serving::Clock::time_point now = hooks_.clock();
    std::string cls;
    slo::RequestSample s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = open_.find(h);
      if (it == open_.end()) return;
      const double age_ms =
          std::chrono::duration<double, std::milli>(now - it->second.first_byte).count();
      s.ttfa_ms = age_ms;
      if (it->second.first_token_ms >= 0) s.think_ms = age_ms - it->second.first_token_ms;
      cls = it->second.slo_class;
    }
    const int64_t now_us =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
    hooks_.tracker->RecordRequest(cls, name_, now_us, s);
  }
  // TTFT at the first token, e2e at the end (a TTFT too when none was recorded).
  void Record(api::RequestHandle h, bool first) {
    if (hooks_.tracker == nullptr || !hooks_.clock) return;
    const serving::Clock::time_point now = hooks_.clock();
    std::string cls;
    slo::RequestSample s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = open_.find(h);
      if (it == open_.end()) return;
      const double age_ms =
          std::chrono::duration<double, std::milli>(now - it->second.first_byte).count();
      if (!it->second.first_recorded) s.ttft_ms = age_ms;
      if (first && !it->second.first_recorded) it->second.first_token_ms = age_ms;
      if (!first) s.e2e_ms = age_ms;
      if (first && it->second.first_recorded) return;
      it->second.first_recorded = true;
      cls = it->second.slo_class;
    }
    const int64_t now_us =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
    hooks_.tracker->RecordRequest(cls, name_, now_us, s);
  }
  // Its terminal event: the request leaves the open set first. False when it is not open.
  bool End(api::RequestHandle h, api::GenerationEvent ev) {
    api::GenerationSink sink;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = open_.find(h);
      if (it == open_.end()) return false;
      sink = std::move(it->second.sink);
      open_.erase(it);
    }
    sink(std::move(ev));
    return true;
  }
  void Emit(api::RequestHandle h, api::GenerationEvent ev) {
    api::GenerationSink sink;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = open_.find(h);
      if (it == open_.end()) return;
      sink = it->second.sink;
    }
    sink(std::move(ev));
  }

  std::string name_;
  std::atomic<int64_t> prompt_tokens_;
  std::atomic<int64_t> cached_prompt_tokens_{0};
  serving::SloHooks hooks_;
  mutable std::mutex mu_;
  slo::QueueLoad load_;
  std::string failure_;  // "" = healthy
  std::map<api::RequestHandle, Open_> open_;
  bool thinks_ = false;
};

}  // namespace lifeline::testing
