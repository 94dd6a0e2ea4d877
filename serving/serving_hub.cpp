#include "serving/serving_hub.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "base/prometheus.h"
#include "text/toolcall/format.h"
#include "serving/request_timing.h"
#include "slo/slo_report.h"

namespace lifeline::serving {

namespace {

int64_t UsOf(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

api::ApiError SloBadRequest(const std::string& message) {
  // Resolve's messages start with the field: "slo_class: unknown class ...".
  const auto colon = message.find(':');
  return api::InvalidRequestError(
      colon == std::string::npos ? "slo_class" : message.substr(0, colon), message,
      "invalid_slo");
}

api::ApiError Shed(const slo::AdmissionDecision& d, const std::string& cls,
                      const std::string& model) {
  if (d.action == slo::Action::kRefuse) {
    // Not load: the request as asked cannot be served, so no Retry-After.
    return api::InvalidRequestError("deadline_ms", "model '" + model + "': " + d.reason,
                                       "deadline_unreachable");
  }
  const bool not_ready = d.shed_cause == slo::ShedCause::kNotReady;
  return api::MakeError(
      not_ready ? api::ErrorKind::kUnavailable : api::ErrorKind::kOverloaded,
      not_ready ? "model_not_ready" : "slo_shed",
      "class '" + cls + "' on model '" + model + "' is shedding load: " + d.reason +
          "; retry after " + std::to_string(d.retry_after_s) + " s",
      {}, d.retry_after_s);
}

}  // namespace

int64_t ServingHub::SteadyNowUs() { return UsOf(Clock::now()); }

ServingHub::ServingHub(std::vector<std::unique_ptr<LocalModel>> engines,
                             slo::SloConfig slo_config)
    : ServingHub(std::move(engines), {}, std::move(slo_config)) {}

ServingHub::ServingHub(std::vector<std::unique_ptr<LocalModel>> engines,
                             std::vector<std::unique_ptr<RemoteBackend>> remotes,
                             slo::SloConfig slo_config, ServiceClock clock)
    : clock_(std::move(clock)),
      engines_(std::move(engines)),
      remotes_(std::move(remotes)),
      slo_config_(std::move(slo_config)),
      tracker_(slo_config_.window) {
  created_unix_s_ = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  std::vector<std::string> names;
  for (size_t i = 0; i < engines_.size(); ++i) {
    LocalModel* e = engines_[i].get();
    names.push_back(e->name());
    members_.push_back(Member{e->name(), e, nullptr, i});
    if (slo_config_.FindModel(e->name()) == nullptr) {
      slo::ModelEntry m;
      m.name = e->name();
      m.path = "local";
      m.in_cascade = false;
      slo_config_.models.push_back(std::move(m));
    }
  }
  for (auto& r : remotes_) {
    members_.push_back(Member{r->name(), nullptr, r.get(), 0});
    if (slo_config_.FindModel(r->name()) == nullptr) {
      slo::ModelEntry m;
      m.name = r->name();
      m.url = r->options().url;
      m.remote_model = r->options().remote_model;
      m.in_cascade = false;
      m.max_queue_requests = r->options().max_in_flight;
      slo_config_.models.push_back(std::move(m));
    }
    r->AttachTracker(&tracker_);
  }
  // Batch knobs exist only for local engines; remote members have no engine loop to steer.
  controller_ = std::make_unique<slo::Controller>(slo_config_, names, NowUs());
  controller_->SetTargetBoard(target_board_.get());
  for (auto& e : engines_) {
    speeds_.push_back(std::make_unique<slo::SpeedEstimator>(
        slo_config_.admission.ewma_alpha, slo_config_.admission.speed_stale_ms));
    audits_.push_back(std::make_unique<slo::PredictionAudit>(
        0.4, 20.0, slo_config_.admission.speed_stale_ms));
    SloHooks hooks;
    hooks.knobs = &controller_->board();
    hooks.tracker = &tracker_;
    hooks.speeds = speeds_.back().get();
    hooks.config = &slo_config_;
    hooks.targets = target_board_.get();
    hooks.outcomes = &outcomes_;
    if (clock_) {
      // The engines read the same clock as the control plane.
      hooks.clock = [clock = clock_] { return Clock::time_point(std::chrono::microseconds(clock())); };
    }
    e->AttachSlo(std::move(hooks));
  }
}

ServingHub::~ServingHub() { Stop(); }

void ServingHub::Start() {
  for (auto& e : engines_) e->Start();
  for (auto& r : remotes_) r->Start();
  std::lock_guard<std::mutex> lock(timer_mu_);
  if (timer_.joinable()) return;
  timer_stop_ = false;
  timer_ = std::thread([this] { TimerLoop(); });
}

void ServingHub::Stop() {
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    timer_stop_ = true;
  }
  timer_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
  for (auto& e : engines_) e->Stop();
  for (auto& r : remotes_) r->Stop();
}

void ServingHub::TimerLoop() {
  const auto period = std::chrono::milliseconds(slo_config_.controller.tick_ms);
  std::unique_lock<std::mutex> lock(timer_mu_);
  while (!timer_cv_.wait_for(lock, period, [&] { return timer_stop_; })) {
    lock.unlock();
    TickNow();
    lock.lock();
  }
}

std::vector<slo::InFlightRequest> ServingHub::InFlightRequests() const {
  std::vector<slo::InFlightRequest> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.reserve(owner_.size());
  for (const auto& [handle, f] : owner_) {
    out.push_back(slo::InFlightRequest{f->slo_class, f->member->name, f->first_byte_us,
                                       f->first_token.load(std::memory_order_relaxed),
                                       f->first_answer.load(std::memory_order_relaxed),
                                       f->thinks});
  }
  return out;
}

void ServingHub::TickNow() {
  const int64_t now = NowUs();
  const auto since = controller_->LastTransitions();
  // The requests in flight are the controller's second sensor: their ages are lower bounds
  // of their latencies (a queue that produces no first token must not look idle), and a
  // (class, model) with none in flight is idle, whatever its window remembers.
  const std::vector<slo::InFlightRequest> in_flight = InFlightRequests();
  slo::LatencyTracker::SnapshotOptions options;
  options.since_by_series = &since;
  options.has_in_flight = true;
  options.in_flight = in_flight;
  slo::TrackerSnapshot snapshot = tracker_.Snapshot(now, options);
  snapshot.live_requests = static_cast<int64_t>(in_flight.size());
  (void)controller_->Tick(now, snapshot);
}

const slo::PredictionAudit* ServingHub::Audit(const std::string& name) const {
  for (size_t i = 0; i < engines_.size(); ++i) {
    if (engines_[i]->name() == name) return audits_[i].get();
  }
  return nullptr;
}

LocalModel* ServingHub::Find(const std::string& name) const {
  for (const auto& e : engines_) {
    if (e->name() == name) return e.get();
  }
  return nullptr;
}

RemoteBackend* ServingHub::FindRemote(const std::string& name) const {
  for (const auto& r : remotes_) {
    if (r->name() == name) return r.get();
  }
  return nullptr;
}

const ServingHub::Member* ServingHub::FindMember(const std::string& name) const {
  for (const Member& m : members_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::vector<api::ModelInfo> ServingHub::Models() const {
  std::vector<api::ModelInfo> out;
  for (const auto& e : engines_) {
    api::ModelInfo m = e->Info();
    m.created_unix_s = created_unix_s_;
    out.push_back(m);
  }
  for (const auto& r : remotes_) {
    api::ModelInfo m;
    m.id = r->name();
    m.created_unix_s = created_unix_s_;
    m.context_length_tokens = 0;  // unknown: the remote server decides
    out.push_back(m);
  }
  return out;
}

std::variant<const LocalModel*, api::ApiError> ServingHub::LocalFor(
    const std::string& model, const std::string& what) const {
  if (const LocalModel* e = Find(model)) return e;
  if (FindRemote(model) != nullptr) {
    return api::InvalidRequestError(
        "model", "model '" + model + "' is served by a remote backend; its " + what + " lives there",
        "not_supported");
  }
  return api::NotFoundError("model", "model '" + model + "' does not exist",
                               "model_not_found");
}

std::variant<std::string, api::ApiError> ServingHub::ApplyTemplate(
    const api::GenerationRequest& request) const {
  auto e = LocalFor(request.model, "chat template");
  if (auto* err = std::get_if<api::ApiError>(&e)) return *err;
  return std::get<const LocalModel*>(e)->ApplyTemplate(request);
}

std::variant<std::vector<int32_t>, api::ApiError> ServingHub::Tokenize(
    const api::TokenizeRequest& request) const {
  auto e = LocalFor(request.model, "tokenizer");
  if (auto* err = std::get_if<api::ApiError>(&e)) return *err;
  return std::get<const LocalModel*>(e)->Tokenize(request);
}

std::variant<std::string, api::ApiError> ServingHub::Detokenize(
    const api::DetokenizeRequest& request) const {
  auto e = LocalFor(request.model, "tokenizer");
  if (auto* err = std::get_if<api::ApiError>(&e)) return *err;
  return std::get<const LocalModel*>(e)->Detokenize(request);
}

bool ServingHub::Ready() const {
  // Remote members never gate readiness: a remote outage shows up as 502s on the requests
  // routed there, not as this server being unready. A remote-only server is ready once built.
  if (engines_.empty()) return !remotes_.empty();
  for (const auto& e : engines_) {
    if (!e->Healthy()) return false;
  }
  return true;
}

std::string ServingHub::NotReadyReason() const {
  std::string out;
  for (const auto& e : engines_) {
    const std::string why = e->Failure();
    if (why.empty()) continue;
    if (!out.empty()) out += "; ";
    out += "model '" + e->name() + "' failed: " + why;
  }
  return out;
}

api::SubmitResult ServingHub::Submit(api::GenerationRequest request,
                                           api::GenerationSink sink) {
  const Member* member = nullptr;
  if (!members_.empty()) {
    member = request.model.empty() ? &members_.front() : FindMember(request.model);
  }
  if (member == nullptr) {
    return api::SubmitResult::Reject(api::NotFoundError(
        "model", "model '" + request.model + "' is not served here (see GET /v1/models)",
        "model_not_found"));
  }
  slo::RequestSloFields fields;
  fields.slo_class = request.slo_class;
  // An embedding or rerank request that names no class is judged under its own preset (when
  // the configuration keeps it), not the chat default: a query embedding's budget is tens of
  // milliseconds.
  if (fields.slo_class.empty() && request.task != api::Task::kGenerate) {
    const char* preset = request.task == api::Task::kEmbed ? "search-embed" : "search-rerank";
    if (slo_config_.FindClass(preset) != nullptr) fields.slo_class = preset;
  }
  fields.user_role = request.user_role;
  fields.allow_context_trim = request.allow_context_trim;
  if (request.deadline_ms) fields.deadline_ms = static_cast<double>(*request.deadline_ms);
  auto budget = slo::Resolve(slo_config_, fields, target_board_.get());
  if (!budget.ok()) return api::SubmitResult::Reject(SloBadRequest(budget.status().message()));

  const api::RequestHandle handle = next_handle_.fetch_add(1);
  auto shared_sink = std::make_shared<api::GenerationSink>(std::move(sink));
  api::SubmitResult result = SubmitFrom(member, 0, handle, request, *budget, shared_sink, nullptr);
  result.slo_class = budget->slo_class;
  return result;
}

api::SubmitResult ServingHub::SubmitFrom(
    const Member* member, int32_t hops, api::RequestHandle handle,
    const api::GenerationRequest& request, const slo::RequestBudget& budget,
    const std::shared_ptr<api::GenerationSink>& sink,
    const std::function<void(const Member&)>& before_submit) {
  for (;; ++hops) {
    // Vectors and scores of another model are not the asked model's: embeddings and reranks
    // never move down the cascade.
    const slo::ModelEntry* next = request.task == api::Task::kGenerate
                                      ? slo_config_.NextInCascade(member->name)
                                      : nullptr;
    const Member* next_member = next != nullptr ? FindMember(next->name) : nullptr;
    if (before_submit) before_submit(*member);
    bool routed = false;
    api::SubmitResult result =
        member->remote != nullptr
            ? SubmitRemote(*member, hops, next_member, handle, request, budget, sink, &routed)
            : SubmitLocal(*member, hops, next_member, handle, request, budget, sink, &routed);
    if (!routed) return result;
    member = next_member;  // the cascade is finite and only moves forward
  }
}

bool ServingHub::RerouteLate(api::RequestHandle handle, const InFlight& entry,
                                const std::shared_ptr<api::GenerationSink>& sink,
                                const api::ApiError& late) {
  if (entry.request == nullptr || entry.request->task != api::Task::kGenerate) return false;
  const slo::ModelEntry* next = slo_config_.NextInCascade(entry.member->name);
  const Member* next_member = next != nullptr ? FindMember(next->name) : nullptr;
  if (next_member == nullptr) return false;
  outcomes_.Count(entry.slo_class, entry.member->name, "late_routed");
  api::GenerationRequest request = *entry.request;
  request.timeline.rerouted = Clock::time_point(std::chrono::microseconds(NowUs()));
  // The client hears of each member before that member can send a token.
  auto announce = [&](const Member& m) { (*sink)(api::GenerationEvent::Routed(m.name)); };
  api::SubmitResult r = SubmitFrom(next_member, entry.hops + 1, handle, request,
                                      entry.budget, sink, announce);
  if (r.accepted()) return true;
  // Nobody lighter could take it in time: its refusal (a 429 with Retry-After) ends it.
  (*sink)(api::GenerationEvent::Error(r.error ? *r.error : late));
  return true;
}

api::GenerationSink ServingHub::Wrap(api::RequestHandle handle,
                                           std::shared_ptr<InFlight> entry,
                                           const std::shared_ptr<api::GenerationSink>& sink) {
  // The handle leaves the map when its terminal event passes through. The first token (or a
  // completion without one) marks the request as no longer waiting, and checks admission's
  // prediction against what happened (on the engine thread, as the token is produced).
  return [this, handle, entry = std::move(entry), sink](api::GenerationEvent ev) {
    if (ev.kind == api::GenerationEvent::Kind::kError && ev.error.code == "slo_late") {
      if (entry->audit != nullptr && entry->raw_service_ms > 0) {
        // Admitted, then dropped as late: its time so far is a lower bound of what the
        // prediction should have said. Left out, the spread would only count the survivors.
        const int64_t now = NowUs();
        entry->audit->Observe(entry->raw_service_ms, entry->correction,
                              static_cast<double>(now - entry->first_byte_us) / 1000.0 -
                                  entry->decided_elapsed_ms,
                              now);
      }
      if (entry->request != nullptr) {
        // Dropped before its first token: a lighter member may still make it. The entry
        // leaves the table first: the member that takes it enters its own under the handle.
        {
          std::lock_guard<std::mutex> lock(mu_);
          owner_.erase(handle);
        }
        if (RerouteLate(handle, *entry, sink, ev.error)) return;
      }
    }
    const bool terminal = ev.terminal();
    const bool produced = ev.kind == api::GenerationEvent::Kind::kToken ||
                          ev.kind == api::GenerationEvent::Kind::kDone;
    if ((ev.kind == api::GenerationEvent::Kind::kToken && !ev.text.empty()) ||
        ev.kind == api::GenerationEvent::Kind::kDone) {
      entry->first_answer.store(true, std::memory_order_relaxed);
    }
    if (produced && !entry->first_token.exchange(true, std::memory_order_relaxed) &&
        entry->audit != nullptr && entry->raw_service_ms > 0 &&
        ev.kind == api::GenerationEvent::Kind::kToken) {
      const int64_t now = NowUs();
      const double measured_ms =
          static_cast<double>(now - entry->first_byte_us) / 1000.0 - entry->decided_elapsed_ms;
      entry->audit->Observe(entry->raw_service_ms, entry->correction, measured_ms, now);
    }
    (*sink)(std::move(ev));
    if (terminal) {
      std::lock_guard<std::mutex> lock(mu_);
      owner_.erase(handle);
    }
  };
}

api::SubmitResult ServingHub::SubmitLocal(
    const Member& m, int32_t hops, const Member* next, api::RequestHandle handle,
    const api::GenerationRequest& request, const slo::RequestBudget& budget,
    const std::shared_ptr<api::GenerationSink>& sink, bool* routed) {
  LocalModel* engine = m.local;
  const slo::ModelEntry* entry = slo_config_.FindModel(m.name);
  const std::string& cls = budget.slo_class;
  const auto first_byte = request.timeline.first_byte;
  SubmitSlo ctx;
  ctx.slo_class = cls;
  ctx.priority = budget.priority;
  ctx.ttft_budget_ms = budget.ttft_budget_ms;
  ctx.budget_is_deadline = budget.deadline_ms && budget.ttft_budget_ms >= *budget.deadline_ms;
  if (const slo::SloClass* c = slo_config_.FindClass(cls)) {
    ctx.serve_late = c->serve_late;
    ctx.thinking = c->thinking;
  }
  if (budget.e2e_budget_ms) {
    ctx.deadline_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          first_byte.time_since_epoch()).count() +
                      static_cast<int64_t>(*budget.e2e_budget_ms * 1000.0);
  }
  slo::SpeedEstimator& speeds = *speeds_[m.local_index];
  slo::PredictionAudit& audit = *audits_[m.local_index];
  const auto knobs = controller_->knobs();
  ctx.thinking.scale = knobs->ThinkingScaleOf(cls, m.name);
  // The admission request of a prompt of `prompt_tokens` against the model's load at `now_us`.
  auto admission = [&](int64_t prompt_tokens, int64_t max_tokens, int64_t now_us) {
    slo::AdmissionRequest ar;
    ar.budget = budget;
    ar.level = knobs->LevelOf(cls, m.name);
    ar.margin_scale = knobs->MarginScaleOf(cls, m.name);
    ar.prediction_correction = audit.correction();
    ar.prediction_spread = audit.spread_q95();
    ar.prompt_tokens = prompt_tokens;
    ar.max_tokens = max_tokens;
    ar.elapsed_ms = static_cast<double>(now_us - UsOf(first_byte)) / 1000.0;
    ar.load = engine->Load(now_us);
    if (entry != nullptr) {
      ar.max_queue_requests = entry->max_queue_requests;
      ar.max_queue_tokens = entry->max_queue_tokens;
    }
    ar.model_ready = engine->Healthy();
    ar.has_next_model = next != nullptr;
    ar.cascade_hops = hops;
    ar.floor_rule = request.task != api::Task::kGenerate;
    // A probe re-measures a model whose speed estimate, or whose checked predictions, have
    // gone stale (everything routed or shed on them).
    ar.probe_due = speeds.Stale(now_us) || audit.Stale(now_us);
    return ar;
  };
  // 0. Before any rendering or tokenizing: a load that already sheds or routes a request of
  // one prompt token does so for this one. Under overload most arrivals end here, and the I/O
  // thread does not spend the cores' time tokenizing prompts it will refuse.
  {
    const slo::AdmissionDecision early = slo::Decide(slo_config_, admission(1, 1, NowUs()), speeds);
    if (!early.probe && early.action == slo::Action::kRoute) {
      outcomes_.Count(cls, m.name, "routed");
      *routed = true;
      return {};
    }
    // A model whose file changed under it is not load that may pass: Prepare refuses it
    // with the documented 503 model_failed, naming the file, rather than model_not_ready.
    const bool failed =
        early.shed_cause == slo::ShedCause::kNotReady && !engine->Failure().empty();
    // A prediction made for one token understates an embedding's floor, and with it the wait
    // the floor rule allows it (admission.cpp): its short prompt is cheap to tokenize, so only
    // its prepared size decides a late verdict. (Generation keeps the early verdict.)
    const bool late_verdict = early.predicted.ttft_ms.has_value();
    const bool defer = late_verdict && request.task != api::Task::kGenerate;
    if (!early.probe && early.action == slo::Action::kShed && !failed && !defer) {
      outcomes_.Count(cls, m.name, slo::OutcomeCounters::OutcomeOf(early));
      return api::SubmitResult::Reject(Shed(early, cls, m.name));
    }
  }
  // 1. Prepare: render, tokenize, trim, check limits (refusals name the field).
  auto prepared = engine->Prepare(request, &ctx);
  if (auto* err = std::get_if<api::ApiError>(&prepared)) {
    return api::SubmitResult::Reject(std::move(*err));
  }
  PreparedSubmit& p = std::get<PreparedSubmit>(prepared);

  // 2. Admission on the prepared size, against the model's load now.
  const int64_t now_us = NowUs();
  // The prompt tokens the prefix cache holds need no prefill: priced are the rest.
  slo::AdmissionRequest ar =
      admission(std::max<int64_t>(1, p.prompt_tokens - p.cached_prompt_tokens), p.max_tokens,
                now_us);
  slo::AdmissionDecision decision = slo::Decide(slo_config_, ar, speeds);
  if (decision.probe && !speeds.TryClaimProbe(now_us) && !audit.TryClaimProbe(now_us)) {
    // Another request took this period's probe: decide as if the estimate were fresh.
    ar.probe_due = false;
    decision = slo::Decide(slo_config_, ar, speeds);
  }
  // Admitted or not, a request that misses its budget alone tells the controller to read this
  // class's pressure on this model against that floor (controller.h, AtFloor).
  if (decision.below_floor && decision.floor_ms) {
    tracker_.RecordFloor(cls, m.name, now_us, *decision.floor_ms);
  }
  if (decision.action == slo::Action::kRoute) {
    // Decide routes only when there is a next member (has_next_model).
    outcomes_.Count(cls, m.name, "routed");
    *routed = true;
    return {};
  }
  if (decision.action != slo::Action::kAdmit) {
    outcomes_.Count(cls, m.name, slo::OutcomeCounters::OutcomeOf(decision));
    return api::SubmitResult::Reject(Shed(decision, cls, m.name));
  }

  // 2b. A thinking request under a TTFA budget thinks only what fits: the room between its
  // predicted first token and the TTFA budget, at the time a token takes under the current
  // load -- instead of being refused, or answering late. When not one token fits (the first
  // token is already predicted at or past the budget), admission takes nothing away: the
  // thinking rung and the ladder act on the class as a whole.
  bool thinking_fitted = false;
  if (p.thinks && budget.ttfa_budget_ms && decision.predicted.ttft_ms) {
    const double per_token_ms = ar.load.decode_interval_ms > 0
                                    ? ar.load.decode_interval_ms
                                    : speeds.decode_ms_per_token().value_or(0);
    if (per_token_ms > 0) {
      const double room_ms = *budget.ttfa_budget_ms - *decision.predicted.ttft_ms;
      const auto fit = static_cast<int64_t>(std::max(0.0, std::floor(room_ms / per_token_ms)));
      if (fit >= 1 && (p.thinking_budget_tokens < 0 || fit < p.thinking_budget_tokens)) {
        p.thinking_budget_cap = fit;
        thinking_fitted = true;
      }
    }
  }

  // 3. Enqueue, with the ladder's max_tokens cap.
  auto flight = std::make_shared<InFlight>();
  flight->member = &m;
  flight->slo_class = cls;
  flight->first_byte_us = UsOf(first_byte);
  flight->thinks = p.thinks && p.thinking_budget_tokens != 0 &&
                   p.thinking_budget_cap.value_or(1) != 0;
  if (decision.predicted.raw_service_ms) {
    flight->raw_service_ms = *decision.predicted.raw_service_ms;
    flight->correction = ar.prediction_correction;
    flight->decided_elapsed_ms = ar.elapsed_ms;
    flight->audit = &audit;
  }
  const bool tools = request.tools.is_array() && !request.tools.empty();
  if (next != nullptr && !tools) {
    flight->request = std::make_shared<const api::GenerationRequest>(request);
    flight->budget = budget;
    flight->hops = hops;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    owner_[handle] = flight;
  }
  // Admitted against its floor: it is late in the queue only past that budget.
  if (decision.below_floor && decision.floor_budget_ms && p.slo) {
    p.slo->ttft_budget_ms = *decision.floor_budget_ms;
  }
  const std::string thinking_shortened_by = p.thinking_shortened_by;
  auto err = engine->EnqueuePrepared(std::move(p), handle, Wrap(handle, flight, sink),
                                     decision.max_tokens_cap, decision.cap_reason);
  if (!err) {
    outcomes_.Count(cls, m.name, "admitted");
    if (decision.max_tokens_cap) outcomes_.Count(cls, m.name, "truncated");
    if (thinking_shortened_by == "slo" || thinking_fitted) {
      outcomes_.Count(cls, m.name, "thinking_shortened");
    }
    if (decision.probe) outcomes_.Count(cls, m.name, "probe");
    // The class asks less of this model than it needs alone: visible, so the operator can set
    // a target the model can meet (docs/slo.md, "Budgets below a model's floor").
    if (decision.below_floor) outcomes_.Count(cls, m.name, "below_floor");
    return api::SubmitResult::Accept(handle, m.name);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    owner_.erase(handle);
  }
  return api::SubmitResult::Reject(std::move(*err));
}

api::SubmitResult ServingHub::SubmitRemote(
    const Member& m, int32_t hops, const Member* next, api::RequestHandle handle,
    const api::GenerationRequest& request, const slo::RequestBudget& budget,
    const std::shared_ptr<api::GenerationSink>& sink, bool* routed) {
  RemoteBackend* remote = m.remote;
  const slo::ModelEntry* entry = slo_config_.FindModel(m.name);
  const std::string& cls = budget.slo_class;
  const auto first_byte = request.timeline.first_byte;
  // No queue model for a remote member: its prompt is not tokenized here and there are no
  // measured speeds (never-fed estimator: no prediction). Decide still applies the ladder
  // (shed, cascade on the first hop, the truncation cap) and the in-flight cap as a queue.
  slo::AdmissionRequest ar;
  ar.budget = budget;
  const auto knobs = controller_->knobs();
  ar.level = knobs->LevelOf(cls, m.name);
  ar.margin_scale = knobs->MarginScaleOf(cls, m.name);
  ar.prompt_tokens = 0;
  // Unset max_tokens: the remote's own default, which a truncation cap must still bound.
  ar.max_tokens = request.max_tokens.value_or(std::numeric_limits<int32_t>::max());
  ar.elapsed_ms = static_cast<double>(NowUs() - UsOf(first_byte)) / 1000.0;
  ar.load.queued_requests = static_cast<int32_t>(remote->InFlight());
  ar.max_queue_requests = entry != nullptr ? entry->max_queue_requests
                                           : remote->options().max_in_flight;
  if (entry != nullptr) ar.max_queue_tokens = entry->max_queue_tokens;
  ar.model_ready = true;
  ar.has_next_model = next != nullptr;
  ar.cascade_hops = hops;
  const slo::AdmissionDecision decision = slo::Decide(slo_config_, ar, remote_speeds_);
  if (decision.action == slo::Action::kRoute && next != nullptr) {
    outcomes_.Count(cls, m.name, "routed");
    *routed = true;
    return {};
  }
  if (decision.action != slo::Action::kAdmit) {
    outcomes_.Count(cls, m.name, slo::OutcomeCounters::OutcomeOf(decision));
    return api::SubmitResult::Reject(Shed(decision, cls, m.name));
  }
  RemoteSubmit ctx;
  ctx.slo_class = cls;
  if (budget.e2e_budget_ms) {
    ctx.deadline_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          first_byte.time_since_epoch()).count() +
                      static_cast<int64_t>(*budget.e2e_budget_ms * 1000.0);
  }
  ctx.max_tokens_cap = decision.max_tokens_cap;
  ctx.cap_reason = decision.cap_reason;
  auto flight = std::make_shared<InFlight>();
  flight->member = &m;
  flight->slo_class = cls;
  flight->first_byte_us = UsOf(first_byte);
  {
    std::lock_guard<std::mutex> lock(mu_);
    owner_[handle] = flight;
  }
  auto err = remote->Submit(handle, request, Wrap(handle, flight, sink), ctx);
  if (!err) {
    outcomes_.Count(cls, m.name, "admitted");
    if (decision.max_tokens_cap) outcomes_.Count(cls, m.name, "truncated");
    return api::SubmitResult::Accept(handle, m.name);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    owner_.erase(handle);
  }
  // The remote's in-flight cap acts as its queue: a refusal there is shed load.
  if (err->code == "overloaded") outcomes_.Count(cls, m.name, "shed_429");
  return api::SubmitResult::Reject(std::move(*err));
}

std::optional<std::string> ServingHub::SloStatusJson() const {
  return SloStatus().dump();
}

nlohmann::json ServingHub::SloStatus() const {
  const int64_t now = NowUs();
  const std::vector<slo::InFlightRequest> in_flight = InFlightRequests();
  slo::LatencyTracker::SnapshotOptions options;
  options.has_in_flight = true;
  options.in_flight = in_flight;
  nlohmann::json j = slo::SloStatusJson(*controller_, tracker_.Snapshot(now, options), now);
  // Each local model's predictions held to account (docs/slo.md).
  for (nlohmann::json& m : j["models"]) {
    if (const slo::PredictionAudit* a = Audit(m.value("name", std::string()))) {
      m["prediction"] = slo::PredictionAuditJson(a->Snapshot());
    }
  }
  return j;
}

void ServingHub::Cancel(api::RequestHandle handle) {
  const Member* member = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = owner_.find(handle);
    if (it == owner_.end()) return;
    member = it->second->member;
  }
  if (member->remote != nullptr) {
    member->remote->Cancel(handle);
  } else {
    member->local->Cancel(handle);
  }
}

std::string ServingHub::MetricsText() const {
  using prom::Family;
  using prom::Labels;
  using prom::Sample;
  // One snapshot per engine, so every family of one scrape describes the same instant.
  std::vector<EngineSnapshot> snaps;
  snaps.reserve(engines_.size());
  for (const auto& e : engines_) snaps.push_back(e->Snapshot());
  std::string o;
  // One family with one sample per engine, labelled by model.
  auto per_engine = [&](const char* name, const char* type, const char* help, auto value) {
    Family(&o, name, type, help);
    for (size_t i = 0; i < snaps.size(); ++i) {
      Sample(&o, name, Labels({{"model", engines_[i]->name()}}),
             static_cast<double>(value(snaps[i])));
    }
  };
  per_engine("lifeline_queue_depth", "gauge",
             "Requests waiting for their first step (incl. preempted).",
             [](const EngineSnapshot& s) { return s.waiting; });
  per_engine("lifeline_running_sequences", "gauge", "Sequences admitted and holding KV blocks.",
             [](const EngineSnapshot& s) { return s.running; });
  per_engine("lifeline_batch_window_waits_total", "counter",
             "Times the batching window held admission to fill a batch.",
             [](const EngineSnapshot& s) { return s.window_waits; });
  per_engine("lifeline_batch_window_max_delay_seconds", "gauge",
             "The batching window's max queue delay (0: off).",
             [](const EngineSnapshot& s) { return s.max_queue_delay_us / 1e6; });
  Family(&o, "lifeline_kv_blocks", "gauge", "KV cache blocks of 16 positions by state.");
  for (size_t i = 0; i < snaps.size(); ++i) {
    const std::string& m = engines_[i]->name();
    Sample(&o, "lifeline_kv_blocks", Labels({{"model", m}, {"state", "free"}}),
           snaps[i].kv_blocks_free);
    Sample(&o, "lifeline_kv_blocks", Labels({{"model", m}, {"state", "used"}}),
           snaps[i].kv_blocks_total - snaps[i].kv_blocks_free);
  }
  per_engine("lifeline_kv_blocks_touched", "gauge",
             "KV blocks ever used (the resident part of the KV pool).",
             [](const EngineSnapshot& s) { return s.kv_blocks_touched; });
  Family(&o, "lifeline_prefix_cache_tokens_total", "counter",
         "Prompt tokens looked up in / served by the prefix cache.");
  for (size_t i = 0; i < snaps.size(); ++i) {
    const std::string& m = engines_[i]->name();
    Sample(&o, "lifeline_prefix_cache_tokens_total", Labels({{"model", m}, {"kind", "lookup"}}),
           static_cast<double>(snaps[i].prefix_lookup_tokens));
    Sample(&o, "lifeline_prefix_cache_tokens_total", Labels({{"model", m}, {"kind", "hit"}}),
           static_cast<double>(snaps[i].prefix_hit_tokens));
    Sample(&o, "lifeline_prefix_cache_tokens_total",
           Labels({{"model", m}, {"kind", "restored"}}),
           static_cast<double>(snaps[i].prefix_restored_tokens));
  }
  // The prefix cache's RAM tier below the pool (serving/kv_tier.h).
  Family(&o, "lifeline_prefix_tier_bytes", "gauge",
         "Bytes of KV blocks held by the prefix cache's tier below the pool, and its capacity.");
  Family(&o, "lifeline_prefix_tier_blocks_total", "counter",
         "KV blocks the prefix cache's tier stored (evicted from the pool and kept), restored "
         "into the pool, dropped for capacity, refused as corrupt.");
  using TierEvents = std::initializer_list<std::pair<const char*, int64_t>>;
  auto tier = [&](const std::string& m, const char* name, uint64_t held, uint64_t capacity,
                  TierEvents events) {
    for (const auto& [kind, bytes] : {std::pair{"held", held}, std::pair{"capacity", capacity}}) {
      Sample(&o, "lifeline_prefix_tier_bytes", Labels({{"model", m}, {"tier", name}, {"kind", kind}}),
             static_cast<double>(bytes));
    }
    for (const auto& [event, n] : events) {
      Sample(&o, "lifeline_prefix_tier_blocks_total",
             Labels({{"model", m}, {"tier", name}, {"event", event}}), static_cast<double>(n));
    }
  };
  for (size_t i = 0; i < snaps.size(); ++i) {
    const std::string& m = engines_[i]->name();
    const KvTierStats& t = snaps[i].ram_tier;
    tier(m, "ram", t.bytes, t.capacity_bytes,
         {{"stored", t.stored}, {"restored", t.restored - t.restored_from_disk},
          {"dropped", t.dropped}, {"corrupt", t.corrupt}});
    if (t.disk_capacity_bytes == 0) continue;
    tier(m, "disk", t.disk_bytes, t.disk_capacity_bytes,
         {{"found_at_start", t.disk_found_at_start}, {"stored", t.disk_written},
          {"restored", t.restored_from_disk}, {"dropped", t.disk_dropped},
          {"corrupt", t.disk_rejected}, {"write_error", t.disk_write_errors},
          {"queue_full", t.disk_queue_full}});
  }
  per_engine("lifeline_prompt_tokens_total", "counter",
             "Prompt tokens of accepted requests (each prompt once).",
             [](const EngineSnapshot& s) { return s.prompt_tokens; });
  per_engine("lifeline_generation_tokens_total", "counter", "Tokens generated (every choice).",
             [](const EngineSnapshot& s) { return s.generation_tokens; });
  per_engine("lifeline_spec_drafted_tokens_total", "counter",
             "Speculative decoding: drafted tokens sent for verification.",
             [](const EngineSnapshot& s) { return s.spec_drafted; });
  per_engine("lifeline_spec_accepted_tokens_total", "counter",
             "Speculative decoding: drafted tokens the model sampled (generated without a step "
             "of their own).",
             [](const EngineSnapshot& s) { return s.spec_accepted; });
  per_engine("lifeline_preemptions_total", "counter",
             "Sequences preempted (recomputed later) for KV space.",
             [](const EngineSnapshot& s) { return s.preemptions; });
  per_engine("lifeline_engine_steps_total", "counter", "Non-empty engine steps.",
             [](const EngineSnapshot& s) { return s.steps; });
  if (!remotes_.empty()) {
    std::vector<RemoteSnapshot> rs;
    for (const auto& r : remotes_) rs.push_back(r->Snapshot());
    Family(&o, "lifeline_remote_in_flight", "gauge", "Requests in flight to a remote backend.");
    for (size_t i = 0; i < rs.size(); ++i) {
      Sample(&o, "lifeline_remote_in_flight", Labels({{"model", remotes_[i]->name()}}),
             static_cast<double>(rs[i].in_flight));
    }
    Family(&o, "lifeline_remote_requests_total", "counter",
           "Requests a remote backend finished, by outcome.");
    for (size_t i = 0; i < rs.size(); ++i) {
      const std::string& m = remotes_[i]->name();
      const std::pair<const char*, double> outcomes[] = {
          {"completed", static_cast<double>(rs[i].completed)},
          {"upstream_error", static_cast<double>(rs[i].errored)},
          {"cancelled", static_cast<double>(rs[i].cancelled)}};
      for (const auto& [outcome, n] : outcomes) {
        Sample(&o, "lifeline_remote_requests_total", Labels({{"model", m}, {"outcome", outcome}}),
               n);
      }
    }
  }
  const slo::TrackerSnapshot tracker = tracker_.Snapshot(NowUs());
  o += slo::SloPrometheusText(*controller_, tracker, &outcomes_);
  std::vector<slo::ModelAudit> audits;
  for (size_t i = 0; i < engines_.size(); ++i) {
    audits.push_back(slo::ModelAudit{engines_[i]->name(), audits_[i]->Snapshot()});
  }
  o += slo::PredictionAuditPrometheusText(audits);
  o += OpsMetricsText(snaps, tracker);  // attainment counters, vLLM-compatible gauges
  return o;
}

}  // namespace lifeline::serving
