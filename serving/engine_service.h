// EngineService: the server::EngineApi the HTTP front end talks to. Routes each request by
// its `model` field to one ModelEngine (each model has its own engine loop, KV budget and
// compute pool), hands out request handles, and renders engine gauges for /metrics.
//
// Ownership: owns the ModelEngines. Thread-safety: every EngineApi method is safe from any
// thread (the engine map is fixed after construction; handles map under a mutex).
// Failure: an unknown model is a 404 ApiError; everything else is the ModelEngine's answer.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/engine_api.h"
#include "serving/model_engine.h"

namespace lifeline::serving {

class EngineService final : public server::EngineApi {
 public:
  // The first engine is the default for requests that name no model.
  explicit EngineService(std::vector<std::unique_ptr<ModelEngine>> engines);
  ~EngineService() override;

  void Start();
  void Stop();

  std::vector<server::ModelInfo> Models() const override;
  bool Ready() const override;
  server::SubmitResult Submit(server::GenerationRequest request,
                              server::GenerationSink sink) override;
  void Cancel(server::RequestHandle handle) override;
  std::string MetricsText() const override;

  ModelEngine* Find(const std::string& name) const;

 private:
  std::vector<std::unique_ptr<ModelEngine>> engines_;
  int64_t created_unix_s_ = 0;
  std::atomic<server::RequestHandle> next_handle_{1};
  mutable std::mutex mu_;
  std::unordered_map<server::RequestHandle, ModelEngine*> owner_;  // live handles
};

}  // namespace lifeline::serving
