// EngineService: the server::EngineApi the HTTP front end talks to. Routes each request by
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
// EngineApi method is safe from any thread (the member list is fixed after construction;
// handles map under a mutex; the controller and tracker lock internally). Failure: an unknown
// model is a 404 ApiError; an unknown class or role a 400; shedding a 429; everything else is
// the ModelEngine's or RemoteBackend's answer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/engine_api.h"
#include "serving/model_engine.h"
#include "serving/remote_backend.h"
#include "slo/admission.h"
#include "slo/controller.h"
#include "slo/latency_tracker.h"
#include "slo/slo_config.h"

namespace lifeline::serving {

class EngineService final : public server::EngineApi {
 public:
  // The first engine is the default for requests that name no model. `slo_config.models`
  // lists the cascade (heavy -> light) by engine name; engines it does not name are added as
  // non-cascade members.
  explicit EngineService(std::vector<std::unique_ptr<ModelEngine>> engines,
                         slo::SloConfig slo_config = slo::DefaultSloConfig());
  // With remote members too (listed after the local ones; the first local engine, else the
  // first remote, is the default). Remote names must differ from local ones.
  EngineService(std::vector<std::unique_ptr<ModelEngine>> engines,
                std::vector<std::unique_ptr<RemoteBackend>> remotes,
                slo::SloConfig slo_config = slo::DefaultSloConfig());
  ~EngineService() override;

  void Start();
  void Stop();

  std::vector<server::ModelInfo> Models() const override;
  bool Ready() const override;
  std::string NotReadyReason() const override;
  server::SubmitResult Submit(server::GenerationRequest request,
                              server::GenerationSink sink) override;
  void Cancel(server::RequestHandle handle) override;
  std::string MetricsText() const override;
  std::optional<std::string> SloStatusJson() const override;
  // GET /v1/dashboard's engine part (serving/engine_dashboard.cpp).
  std::optional<nlohmann::json> DashboardJson() const override;
  std::variant<std::string, server::ApiError> ApplyTemplate(
      const server::GenerationRequest& request) const override;
  std::variant<std::vector<int32_t>, server::ApiError> Tokenize(
      const server::TokenizeRequest& request) const override;
  std::variant<std::string, server::ApiError> Detokenize(
      const server::DetokenizeRequest& request) const override;

  ModelEngine* Find(const std::string& name) const;
  RemoteBackend* FindRemote(const std::string& name) const;
  const slo::Controller& controller() const { return *controller_; }
  // One controller tick now (the timer does this every tick_ms).
  void TickNow();

 private:
  // One cascade member: exactly one of `local` / `remote` is set.
  struct Member {
    std::string name;
    ModelEngine* local = nullptr;
    RemoteBackend* remote = nullptr;
    size_t local_index = 0;  // into engines_ / speeds_ when local
  };
  const Member* FindMember(const std::string& name) const;
  // The local engine serving `model` for a request that needs this server's own template or
  // tokenizer (`what`); else 400 for a remote member, 404 for an unknown name.
  std::variant<const ModelEngine*, server::ApiError> LocalFor(const std::string& model,
                                                              const std::string& what) const;
  server::SubmitResult SubmitLocal(const Member& m, int32_t hops, const Member* next,
                                   server::RequestHandle handle,
                                   const server::GenerationRequest& request,
                                   const slo::RequestBudget& budget,
                                   const std::shared_ptr<server::GenerationSink>& sink,
                                   bool* routed);
  server::SubmitResult SubmitRemote(const Member& m, int32_t hops, const Member* next,
                                    server::RequestHandle handle,
                                    const server::GenerationRequest& request,
                                    const slo::RequestBudget& budget,
                                    const std::shared_ptr<server::GenerationSink>& sink,
                                    bool* routed);
  server::GenerationSink Wrap(server::RequestHandle handle,
                              const std::shared_ptr<server::GenerationSink>& sink);
  void TimerLoop();
  // /metrics families of serving/ops_metrics.h, from the snapshots MetricsText took.
  std::string OpsMetricsText(const std::vector<EngineSnapshot>& snaps,
                             const slo::TrackerSnapshot& tracker) const;

  std::vector<std::unique_ptr<ModelEngine>> engines_;
  std::vector<std::unique_ptr<RemoteBackend>> remotes_;
  std::vector<Member> members_;  // locals, then remotes
  int64_t created_unix_s_ = 0;
  std::atomic<server::RequestHandle> next_handle_{1};
  mutable std::mutex mu_;
  std::unordered_map<server::RequestHandle, const Member*> owner_;  // live handles

  slo::SloConfig slo_config_;
  slo::LatencyTracker tracker_;
  std::vector<std::unique_ptr<slo::SpeedEstimator>> speeds_;  // [engines_.size()]
  slo::SpeedEstimator remote_speeds_;  // never fed: remote members get no TTFT prediction
  std::unique_ptr<slo::Controller> controller_;
  slo::OutcomeCounters outcomes_;

  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  bool timer_stop_ = false;
  std::thread timer_;
};

}  // namespace lifeline::serving
