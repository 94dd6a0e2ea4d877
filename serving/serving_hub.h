// ServingHub: the api::ServingApi the HTTP front end talks to. Routes each request by
// its `model` field to one member: a local ModelEngine (each model has its own engine loop,
// KV budget and compute pool) or a RemoteBackend (a remote OpenAI-compatible server, see
// serving/remote_backend.h). Hands out request handles and renders gauges for /metrics.
//
// It also runs the SLO control plane (docs/slo.md): it owns the SloConfig, the latency
// tracker the engines record into, one speed estimator per engine, the Controller and a timer
// thread that calls Controller::Tick every controller.tick_ms (the engines read the published
// knobs at step start). At Submit it resolves the request's class / role / deadline (400 on
// unknown names), and applies the ladder and predictive admission: cap max_tokens, route to
// the next cascade member (SubmitResult::served_model), or shed with 429 + Retry-After.
//
// Remote members: admission has no queue model for them (no tokenization, no measured
// speeds); the ladder still applies (shed, cascade, max_tokens cap) and the member's
// max_queue_requests caps its requests in flight (route onward, else 429). They are listed
// by /v1/models, never gate Ready(), and their requests are counted under their own name.
//
// Ownership: owns the ModelEngines, RemoteBackends and the SLO objects. Thread-safety: every
// ServingApi method is safe from any thread (the member list is fixed after construction;
// handles map under a mutex; the controller and tracker lock internally). Failure: an unknown
// model is a 404 ApiError; an unknown class or role a 400; shedding a 429; everything else is
// the ModelEngine's or RemoteBackend's answer.
#pragma once

#include <atomic>
#include <functional>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/serving_api.h"
#include "serving/local_model.h"
#include "serving/remote_backend.h"
#include "slo/admission.h"
#include "slo/controller.h"
#include "slo/latency_tracker.h"
#include "slo/prediction_audit.h"
#include "slo/slo_config.h"
#include "slo/target_board.h"

namespace lifeline::serving {

// The clock the control plane reads (steady clock, us since its epoch, the epoch of a
// request's timeline.first_byte); empty: the steady clock. Tests pass a fake one.
using ServiceClock = std::function<int64_t()>;

class ServingHub final : public api::ServingApi {
 public:
  // The first engine is the default for requests that name no model. `slo_config.models`
  // lists the cascade (heavy -> light) by engine name; engines it does not name are added as
  // non-cascade members.
  explicit ServingHub(std::vector<std::unique_ptr<LocalModel>> engines,
                         slo::SloConfig slo_config = slo::DefaultSloConfig());
  // With remote members too (listed after the local ones; the first local engine, else the
  // first remote, is the default). Remote names must differ from local ones.
  ServingHub(std::vector<std::unique_ptr<LocalModel>> engines,
                std::vector<std::unique_ptr<RemoteBackend>> remotes,
                slo::SloConfig slo_config = slo::DefaultSloConfig(), ServiceClock clock = {});
  // ModelEngines, as `lifeline serve` builds them.
  template <typename Engine>
  explicit ServingHub(std::vector<std::unique_ptr<Engine>> engines,
                         slo::SloConfig slo_config = slo::DefaultSloConfig())
      : ServingHub(Up(std::move(engines)), {}, std::move(slo_config)) {}
  template <typename Engine>
  ServingHub(std::vector<std::unique_ptr<Engine>> engines,
                std::vector<std::unique_ptr<RemoteBackend>> remotes,
                slo::SloConfig slo_config = slo::DefaultSloConfig())
      : ServingHub(Up(std::move(engines)), std::move(remotes), std::move(slo_config)) {}
  ~ServingHub() override;

  void Start();
  void Stop();

  std::vector<api::ModelInfo> Models() const override;
  bool Ready() const override;
  std::string NotReadyReason() const override;
  api::SubmitResult Submit(api::GenerationRequest request,
                              api::GenerationSink sink) override;
  void Cancel(api::RequestHandle handle) override;
  std::string MetricsText() const override;
  std::optional<std::string> SloStatusJson() const override;
  // GET /v1/dashboard's engine part (serving/serving_hub_dashboard.cpp).
  std::optional<nlohmann::json> DashboardJson() const override;
  // A small one-shot view for `serve`'s SIGUSR1 dump (serving/serving_hub_dashboard.cpp):
  // readiness, per model the requests in flight (and a local model's queued / running), and
  // every (class, model) ladder level above normal. Safe from any thread (the dashboard's
  // sources), never from a signal handler.
  nlohmann::json StateJson() const;
  std::variant<std::string, api::ApiError> ApplyTemplate(
      const api::GenerationRequest& request) const override;
  std::variant<std::vector<int32_t>, api::ApiError> Tokenize(
      const api::TokenizeRequest& request) const override;
  std::variant<std::string, api::ApiError> Detokenize(
      const api::DetokenizeRequest& request) const override;

  LocalModel* Find(const std::string& name) const;
  RemoteBackend* FindRemote(const std::string& name) const;
  const slo::Controller& controller() const { return *controller_; }
  // The targets in force; the autotuner moves them (`serve`, docs/economics.md).
  const std::shared_ptr<slo::TargetBoard>& target_board() const { return target_board_; }
  const slo::SloConfig& slo_config() const { return slo_config_; }
  // GET /v1/slo's object (SloStatusJson's text), with the requests in flight and each local
  // model's prediction audit.
  nlohmann::json SloStatus() const;
  // The prediction audit of a local model (nullptr for a remote or unknown name).
  const slo::PredictionAudit* Audit(const std::string& name) const;
  // One controller tick now (the timer does this every tick_ms).
  void TickNow();

 private:
  // One cascade member: exactly one of `local` / `remote` is set.
  struct Member {
    std::string name;
    LocalModel* local = nullptr;
    RemoteBackend* remote = nullptr;
    size_t local_index = 0;  // into engines_ / speeds_ when local
  };
  const Member* FindMember(const std::string& name) const;
  // One accepted request until its terminal event: the member it runs on, and what the
  // controller (its age, whether its first token is out) and the prediction audit need.
  struct InFlight {
    const Member* member = nullptr;
    std::string slo_class;
    int64_t first_byte_us = 0;          // steady clock, us
    std::atomic<bool> first_token{false};
    std::atomic<bool> first_answer{false};  // answer text out (thinking models: after it)
    bool thinks = false;  // admitted to think (set before it is shared)
    // Admission's prediction (local members): the raw service time, the correction in force
    // and the time elapsed at the decision; raw_service_ms 0: nothing to audit.
    double raw_service_ms = 0;
    double correction = 1.0;
    double decided_elapsed_ms = 0;
    slo::PredictionAudit* audit = nullptr;
    // To move it down the cascade when its model drops it as late (429 slo_late): a copy of
    // the request, its budget and the hops so far; null when there is no lighter member (or
    // tools are in play: the answer's call format is the first model's).
    std::shared_ptr<const api::GenerationRequest> request;
    slo::RequestBudget budget;
    int32_t hops = 0;
  };
  // The requests in flight, as the controller's snapshot takes them.
  std::vector<slo::InFlightRequest> InFlightRequests() const;
  // The local engine serving `model` for a request that needs this server's own template or
  // tokenizer (`what`); else 400 for a remote member, 404 for an unknown name.
  std::variant<const LocalModel*, api::ApiError> LocalFor(const std::string& model,
                                                             const std::string& what) const;
  api::SubmitResult SubmitLocal(const Member& m, int32_t hops, const Member* next,
                                   api::RequestHandle handle,
                                   const api::GenerationRequest& request,
                                   const slo::RequestBudget& budget,
                                   const std::shared_ptr<api::GenerationSink>& sink,
                                   bool* routed);
  api::SubmitResult SubmitRemote(const Member& m, int32_t hops, const Member* next,
                                    api::RequestHandle handle,
                                    const api::GenerationRequest& request,
                                    const slo::RequestBudget& budget,
                                    const std::shared_ptr<api::GenerationSink>& sink,
                                    bool* routed);
  api::GenerationSink Wrap(api::RequestHandle handle, std::shared_ptr<InFlight> entry,
                              const std::shared_ptr<api::GenerationSink>& sink);
  // A late request dropped by its model: tries the lighter members in cascade order (each
  // announced to the client with a kRouted event before it is submitted there); true when
  // the request was handled here (accepted by one, or ended with the last refusal), false
  // when there is no lighter member to try.
  bool RerouteLate(api::RequestHandle handle, const InFlight& entry,
                   const std::shared_ptr<api::GenerationSink>& sink,
                   const api::ApiError& late);
  // Submit's member loop from `member` on: routes down the cascade while admission says so;
  // `before_submit` (may be empty) runs before each member is tried.
  api::SubmitResult SubmitFrom(const Member* member, int32_t hops,
                                  api::RequestHandle handle,
                                  const api::GenerationRequest& request,
                                  const slo::RequestBudget& budget,
                                  const std::shared_ptr<api::GenerationSink>& sink,
                                  const std::function<void(const Member&)>& before_submit);
  void TimerLoop();
  // /metrics families of serving/ops_metrics.h, from the snapshots MetricsText took.
  std::string OpsMetricsText(const std::vector<EngineSnapshot>& snaps,
                             const slo::TrackerSnapshot& tracker) const;

  template <typename Engine>
  static std::vector<std::unique_ptr<LocalModel>> Up(std::vector<std::unique_ptr<Engine>> in) {
    std::vector<std::unique_ptr<LocalModel>> out;
    for (auto& e : in) out.push_back(std::move(e));
    return out;
  }
  int64_t NowUs() const { return clock_ ? clock_() : SteadyNowUs(); }
  static int64_t SteadyNowUs();

  ServiceClock clock_;
  std::vector<std::unique_ptr<LocalModel>> engines_;
  std::vector<std::unique_ptr<RemoteBackend>> remotes_;
  std::vector<Member> members_;  // locals, then remotes
  int64_t created_unix_s_ = 0;
  std::atomic<api::RequestHandle> next_handle_{1};
  mutable std::mutex mu_;
  std::unordered_map<api::RequestHandle, std::shared_ptr<InFlight>> owner_;  // live handles

  slo::SloConfig slo_config_;
  // The class targets in force: the configured ones until the autotuner moves one
  // (slo/autotune.h, wired by `serve`); read by the controller, Resolve and the reports.
  std::shared_ptr<slo::TargetBoard> target_board_ = std::make_shared<slo::TargetBoard>();
  slo::LatencyTracker tracker_;
  std::vector<std::unique_ptr<slo::SpeedEstimator>> speeds_;  // [engines_.size()]
  std::vector<std::unique_ptr<slo::PredictionAudit>> audits_;  // [engines_.size()]
  slo::SpeedEstimator remote_speeds_;  // never fed: remote members get no TTFT prediction
  std::unique_ptr<slo::Controller> controller_;
  slo::OutcomeCounters outcomes_;

  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  bool timer_stop_ = false;
  std::thread timer_;
};

}  // namespace lifeline::serving
