// FakeEngine: an ServingApi for the server tests. Each accepted request plays a script (token
// texts with delays, then done or an error) on the engine's own worker thread, like a real
// engine delivering events asynchronously. It records what it was given (requests, cancels,
// terminal events) so tests can check the server's side of the contract.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/outcomes.h"
#include "api/serving_api.h"

namespace lifeline::api::testing {

struct FakeScript {
  std::vector<std::string> tokens = {"Hello", ",", " world"};
  // Non-empty: an embeddings / rerank answer instead of `tokens`: choice i gets one token event
  // with no text and embeddings[i] as its `embedding`.
  std::vector<std::vector<float>> embeddings;
  std::chrono::milliseconds first_token_delay{0};
  std::chrono::milliseconds token_interval{0};
  std::string finish_reason = "stop";
  std::optional<ApiError> error_at_end;  // terminal error instead of done
  std::optional<ApiError> reject;        // Submit refuses with this
  std::optional<std::string> routed_to;  // a kRouted event naming this model comes first
  // Submit itself sends every event, the terminal one included, before it returns (delays
  // ignored): an engine faster than the server's hand-off of the acceptance.
  bool events_within_submit = false;
  Usage usage{7, -1};                    // completion_tokens -1: number of tokens
  nlohmann::json timings = {{"queue_ms", 1.5}, {"prefill_ms", 12.25}, {"decode_ms", 30.0}};
};

class FakeEngine final : public ServingApi {
 public:
  FakeEngine();
  ~FakeEngine() override;

  void SetScript(FakeScript script);
  void SetReady(bool ready);
  // As a real engine reports a model whose file changed under it: Ready() false,
  // NotReadyReason() naming the model, and its requests refused with 503 model_failed (the
  // other models are served).
  void FailModel(std::string model, std::string why);
  void SetModels(std::vector<ModelInfo> models);
  // While held, Submit waits (holding none of the engine's locks) until ReleaseSubmits: a
  // stand-in for a Submit that renders a huge template or compiles a huge schema, ended by
  // the test rather than by a clock.
  void HoldSubmits();
  void ReleaseSubmits();
  int submits_waiting() const;  // Submit calls held right now

  std::vector<ModelInfo> Models() const override;
  bool Ready() const override;
  std::string NotReadyReason() const override;
  SubmitResult Submit(GenerationRequest request, GenerationSink sink) override;
  void Cancel(RequestHandle handle) override;
  std::string MetricsText() const override;
  // A fixed status object: the fake stands for an engine with an SLO control plane.
  std::optional<std::string> SloStatusJson() const override {
    return std::string(R"({"object":"slo.status","classes":[]})");
  }

  // A stand-in template: "<role>content" per message, "<assistant>" when asked for; a
  // message whose content is "raise" fails as a template's raise_exception would (400).
  std::variant<std::string, ApiError> ApplyTemplate(const GenerationRequest& request) const override {
    std::string out;
    for (const ChatMessage& m : request.messages) {
      if (m.content == "raise") {
        return ApiError{400, "invalid_request_error", "template_error", "template raised: no",
                        "messages", 0};
      }
      out += "<" + m.role + ">" + m.content;
    }
    if (request.add_generation_prompt) out += "<assistant>";
    return out;
  }

  // A stand-in tokenizer over a 257-id vocabulary: every byte is its own id, 256 is "BOS"
  // (prepended with add_special; the text "<s>" with parse_special). Detokenize inverts it
  // (256 contributes nothing); ids >= 257 are 400 naming tokens[i], as a real vocab's are.
  static constexpr int32_t kFakeBos = 256;
  static constexpr int32_t kFakeVocab = 257;
  std::variant<std::vector<int32_t>, ApiError> Tokenize(const TokenizeRequest& request) const override;
  std::variant<std::string, ApiError> Detokenize(const DetokenizeRequest& request) const override;
  // The model the last Tokenize / Detokenize was routed to (after the server resolved it).
  std::string last_token_model() const;

  std::vector<GenerationRequest> submitted() const;
  int accepted() const;
  int cancels_for(RequestHandle handle) const;
  int total_cancels() const;
  int terminals_sent() const;
  // Waits until `pred()` holds (checked under the engine's lock after every change).
  bool WaitFor(const std::function<bool()>& pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(5));

 private:
  struct Job {
    FakeScript script;
    GenerationSink sink;
    size_t next_token = 0;
    std::chrono::steady_clock::time_point due;
    bool cancelled = false;
  };
  void Run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  mutable std::mutex hold_mu_;  // apart from mu_: a held Submit blocks nothing else
  std::condition_variable hold_cv_;
  bool submits_held_ = false;
  int submits_waiting_ = 0;
  bool stop_ = false;
  bool ready_ = true;
  std::string failed_model_;  // "" = none
  std::string failed_why_;
  FakeScript script_;
  std::vector<ModelInfo> models_;
  std::map<RequestHandle, Job> jobs_;
  std::vector<GenerationRequest> submitted_;
  std::map<RequestHandle, int> cancels_;
  RequestHandle next_handle_ = 1;
  int accepted_ = 0;
  int terminals_ = 0;
  mutable std::string last_token_model_;
  std::thread worker_;
};

// An EconomicsApi that records what the server hands over (outcomes.h).
class RecordingEconomics final : public EconomicsApi {
 public:
  void OnFinished(const RequestLogEntry& e) override {
    std::lock_guard lock(mu);
    finished.push_back(e);
  }
  OutcomesResult PostOutcomes(const std::vector<OutcomeEvent>& ev) override {
    std::lock_guard lock(mu);
    events.insert(events.end(), ev.begin(), ev.end());
    OutcomesResult r{static_cast<int64_t>(ev.size()), static_cast<int64_t>(ev.size()), 0, {}};
    r.request_ids.assign(ev.size(), joined_id);
    return r;
  }
  nlohmann::json EconomicsJson() const override { return {{"object", "economics"}}; }
  std::string MetricsText() const override { return "lifeline_test_economics 1\n"; }
  std::mutex mu;
  std::vector<RequestLogEntry> finished;
  std::vector<OutcomeEvent> events;
  std::string joined_id = "req-joined";  // what every posted event is said to join
};

}  // namespace lifeline::api::testing
