#include "api/fake_engine.h"

namespace lifeline::api::testing {

using Clock = std::chrono::steady_clock;

namespace {

// The script's token events: its texts, or one embedding event per choice.
size_t ScriptEvents(const FakeScript& s) {
  return s.embeddings.empty() ? s.tokens.size() : s.embeddings.size();
}

GenerationEvent ScriptEvent(const FakeScript& s, size_t i) {
  if (s.embeddings.empty()) return GenerationEvent::Token(s.tokens[i], static_cast<int32_t>(i));
  GenerationEvent e = GenerationEvent::Token("", -1);
  e.index = static_cast<int32_t>(i);
  e.embedding = s.embeddings[i];
  return e;
}

}  // namespace

FakeEngine::FakeEngine() {
  models_ = {ModelInfo{"fake-model", "lifeline", 1700000000, 2048},
             ModelInfo{"fake-light", "lifeline", 1700000000, 1024}};
  worker_ = std::thread([this] { Run(); });
}

FakeEngine::~FakeEngine() {
  ReleaseSubmits();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void FakeEngine::SetScript(FakeScript script) {
  std::lock_guard lock(mu_);
  script_ = std::move(script);
}

void FakeEngine::SetReady(bool ready) {
  std::lock_guard lock(mu_);
  ready_ = ready;
}

void FakeEngine::SetModels(std::vector<ModelInfo> models) {
  std::lock_guard lock(mu_);
  models_ = std::move(models);
}

std::vector<ModelInfo> FakeEngine::Models() const {
  std::lock_guard lock(mu_);
  return models_;
}

void FakeEngine::FailModel(std::string model, std::string why) {
  std::lock_guard lock(mu_);
  failed_model_ = std::move(model);
  failed_why_ = std::move(why);
}

bool FakeEngine::Ready() const {
  std::lock_guard lock(mu_);
  return ready_ && failed_model_.empty();
}

std::string FakeEngine::NotReadyReason() const {
  std::lock_guard lock(mu_);
  return failed_model_.empty() ? std::string()
                               : "model '" + failed_model_ + "' failed: " + failed_why_;
}

void FakeEngine::HoldSubmits() {
  std::lock_guard lock(hold_mu_);
  submits_held_ = true;
}

void FakeEngine::ReleaseSubmits() {
  {
    std::lock_guard lock(hold_mu_);
    submits_held_ = false;
  }
  hold_cv_.notify_all();
}

int FakeEngine::submits_waiting() const {
  std::lock_guard lock(hold_mu_);
  return submits_waiting_;
}

SubmitResult FakeEngine::Submit(GenerationRequest request, GenerationSink sink) {
  {
    std::unique_lock hold(hold_mu_);
    ++submits_waiting_;
    hold_cv_.wait(hold, [&] { return !submits_held_; });
    --submits_waiting_;
  }
  std::unique_lock lock(mu_);
  submitted_.push_back(request);
  if (!failed_model_.empty() && request.model == failed_model_) {
    return SubmitResult::Reject(MakeError(ErrorKind::kUnavailable, "model_failed",
                                          "model '" + failed_model_ + "' failed: " + failed_why_));
  }
  if (script_.reject) return SubmitResult::Reject(*script_.reject);
  const RequestHandle h = next_handle_++;
  if (script_.events_within_submit) {
    const FakeScript script = script_;
    ++accepted_;
    ++terminals_;
    lock.unlock();
    if (script.routed_to) sink(GenerationEvent::Routed(*script.routed_to));
    for (size_t i = 0; i < ScriptEvents(script); ++i) sink(ScriptEvent(script, i));
    Usage usage = script.usage;
    if (usage.completion_tokens < 0) {
      usage.completion_tokens = static_cast<int64_t>(script.tokens.size());
    }
    sink(script.error_at_end ? GenerationEvent::Error(*script.error_at_end)
                             : GenerationEvent::Done(script.finish_reason, usage, script.timings));
    return SubmitResult::Accept(h);
  }
  Job job;
  job.script = script_;
  job.sink = std::move(sink);
  job.due = Clock::now() + script_.first_token_delay;
  jobs_.emplace(h, std::move(job));
  ++accepted_;
  cv_.notify_all();
  return SubmitResult::Accept(h);
}

void FakeEngine::Cancel(RequestHandle handle) {
  std::lock_guard lock(mu_);
  ++cancels_[handle];
  auto it = jobs_.find(handle);
  if (it != jobs_.end()) {
    it->second.cancelled = true;
    it->second.due = Clock::now();
  }
  cv_.notify_all();
}

std::string FakeEngine::MetricsText() const {
  return "# TYPE fake_engine_steps_total counter\nfake_engine_steps_total 42\n";
}

std::variant<std::vector<int32_t>, ApiError> FakeEngine::Tokenize(
    const TokenizeRequest& request) const {
  {
    std::lock_guard lock(mu_);
    last_token_model_ = request.model;
  }
  std::vector<int32_t> ids;
  if (request.add_special) ids.push_back(kFakeBos);
  const std::string& text = request.content;
  for (size_t i = 0; i < text.size(); ++i) {
    if (request.parse_special && text.compare(i, 3, "<s>") == 0) {
      ids.push_back(kFakeBos);
      i += 2;
      continue;
    }
    ids.push_back(static_cast<unsigned char>(text[i]));
  }
  return ids;
}

std::variant<std::string, ApiError> FakeEngine::Detokenize(const DetokenizeRequest& request) const {
  {
    std::lock_guard lock(mu_);
    last_token_model_ = request.model;
  }
  std::string out;
  for (size_t i = 0; i < request.tokens.size(); ++i) {
    const int32_t id = request.tokens[i];
    if (id >= kFakeVocab) {
      const std::string param = "tokens[" + std::to_string(i) + "]";
      return ApiError{400, "invalid_request_error", "out_of_range",
                      "'" + param + "' is outside the vocabulary ([0, 257))", param, 0};
    }
    if (id != kFakeBos) out += static_cast<char>(id);
  }
  return out;
}

std::string FakeEngine::last_token_model() const {
  std::lock_guard lock(mu_);
  return last_token_model_;
}

std::vector<GenerationRequest> FakeEngine::submitted() const {
  std::lock_guard lock(mu_);
  return submitted_;
}

int FakeEngine::accepted() const {
  std::lock_guard lock(mu_);
  return accepted_;
}

int FakeEngine::cancels_for(RequestHandle handle) const {
  std::lock_guard lock(mu_);
  auto it = cancels_.find(handle);
  return it == cancels_.end() ? 0 : it->second;
}

int FakeEngine::total_cancels() const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& [h, c] : cancels_) n += c;
  return n;
}

int FakeEngine::terminals_sent() const {
  std::lock_guard lock(mu_);
  return terminals_;
}

bool FakeEngine::WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  // Predicates call the public getters (which lock), so poll instead of waiting on cv_.
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

void FakeEngine::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    if (jobs_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto next = jobs_.begin();
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
      if (it->second.due < next->second.due) next = it;
    }
    if (next->second.due > Clock::now()) {
      cv_.wait_until(lock, next->second.due);
      continue;
    }
    Job& job = next->second;
    GenerationEvent event;
    bool terminal = false;
    if (job.cancelled) {
      // The contract: a terminal event follows even a cancelled request.
      event = GenerationEvent::Error(ApiError{499, "cancelled", "cancelled", "cancelled", "", 0});
      terminal = true;
    } else if (job.script.routed_to) {
      event = GenerationEvent::Routed(*job.script.routed_to);
      job.script.routed_to.reset();
    } else if (job.next_token < ScriptEvents(job.script)) {
      event = ScriptEvent(job.script, job.next_token);
      ++job.next_token;
      job.due = Clock::now() + job.script.token_interval;
    } else if (job.script.error_at_end) {
      event = GenerationEvent::Error(*job.script.error_at_end);
      terminal = true;
    } else {
      Usage usage = job.script.usage;
      if (usage.completion_tokens < 0) {
        usage.completion_tokens = static_cast<int64_t>(job.script.tokens.size());
      }
      event = GenerationEvent::Done(job.script.finish_reason, usage, job.script.timings);
      terminal = true;
    }
    GenerationSink sink = job.sink;
    if (terminal) {
      ++terminals_;
      jobs_.erase(next);
    }
    lock.unlock();
    sink(std::move(event));
    lock.lock();
  }
}

}  // namespace lifeline::api::testing
