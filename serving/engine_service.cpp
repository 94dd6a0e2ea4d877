#include "serving/engine_service.h"

#include <chrono>
#include <sstream>

namespace lifeline::serving {

EngineService::EngineService(std::vector<std::unique_ptr<ModelEngine>> engines)
    : engines_(std::move(engines)) {
  created_unix_s_ = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
}

EngineService::~EngineService() { Stop(); }

void EngineService::Start() {
  for (auto& e : engines_) e->Start();
}

void EngineService::Stop() {
  for (auto& e : engines_) e->Stop();
}

ModelEngine* EngineService::Find(const std::string& name) const {
  for (const auto& e : engines_) {
    if (e->name() == name) return e.get();
  }
  return nullptr;
}

std::vector<server::ModelInfo> EngineService::Models() const {
  std::vector<server::ModelInfo> out;
  for (const auto& e : engines_) {
    server::ModelInfo m;
    m.id = e->name();
    m.created_unix_s = created_unix_s_;
    m.context_length_tokens = e->n_ctx();
    out.push_back(m);
  }
  return out;
}

bool EngineService::Ready() const {
  if (engines_.empty()) return false;
  for (const auto& e : engines_) {
    if (!e->Healthy()) return false;
  }
  return true;
}

server::SubmitResult EngineService::Submit(server::GenerationRequest request,
                                           server::GenerationSink sink) {
  ModelEngine* engine = request.model.empty() ? engines_.front().get() : Find(request.model);
  if (engine == nullptr) {
    server::ApiError e;
    e.http_status = 404;
    e.type = "not_found_error";
    e.code = "model_not_found";
    e.param = "model";
    e.message = "model '" + request.model + "' is not served here (see GET /v1/models)";
    return server::SubmitResult::Reject(std::move(e));
  }
  const server::RequestHandle handle = next_handle_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    owner_[handle] = engine;
  }
  // The handle leaves the map when its terminal event passes through.
  auto wrapped = [this, handle, sink = std::move(sink)](server::GenerationEvent ev) {
    const bool terminal = ev.terminal();
    sink(std::move(ev));
    if (terminal) {
      std::lock_guard<std::mutex> lock(mu_);
      owner_.erase(handle);
    }
  };
  if (auto err = engine->Submit(handle, std::move(request), std::move(wrapped))) {
    std::lock_guard<std::mutex> lock(mu_);
    owner_.erase(handle);
    return server::SubmitResult::Reject(std::move(*err));
  }
  return server::SubmitResult::Accept(handle, engine->name());
}

void EngineService::Cancel(server::RequestHandle handle) {
  ModelEngine* engine = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = owner_.find(handle);
    if (it == owner_.end()) return;
    engine = it->second;
  }
  engine->Cancel(handle);
}

std::string EngineService::MetricsText() const {
  std::ostringstream o;
  o << "# HELP lifeline_queue_depth Requests waiting for their first step (incl. preempted).\n"
       "# TYPE lifeline_queue_depth gauge\n";
  for (const auto& e : engines_) o << "lifeline_queue_depth{model=\"" << e->name() << "\"} " << e->Snapshot().waiting << "\n";
  o << "# HELP lifeline_running_sequences Sequences admitted and holding KV blocks.\n"
       "# TYPE lifeline_running_sequences gauge\n";
  for (const auto& e : engines_) o << "lifeline_running_sequences{model=\"" << e->name() << "\"} " << e->Snapshot().running << "\n";
  o << "# HELP lifeline_kv_blocks KV cache blocks of 16 positions by state.\n"
       "# TYPE lifeline_kv_blocks gauge\n";
  for (const auto& e : engines_) {
    const EngineSnapshot s = e->Snapshot();
    o << "lifeline_kv_blocks{model=\"" << e->name() << "\",state=\"free\"} " << s.kv_blocks_free << "\n";
    o << "lifeline_kv_blocks{model=\"" << e->name() << "\",state=\"used\"} "
      << (s.kv_blocks_total - s.kv_blocks_free) << "\n";
  }
  o << "# HELP lifeline_prefix_cache_tokens_total Prompt tokens looked up in / served by the prefix cache.\n"
       "# TYPE lifeline_prefix_cache_tokens_total counter\n";
  for (const auto& e : engines_) {
    const EngineSnapshot s = e->Snapshot();
    o << "lifeline_prefix_cache_tokens_total{model=\"" << e->name() << "\",kind=\"lookup\"} " << s.prefix_lookup_tokens << "\n";
    o << "lifeline_prefix_cache_tokens_total{model=\"" << e->name() << "\",kind=\"hit\"} " << s.prefix_hit_tokens << "\n";
  }
  o << "# HELP lifeline_preemptions_total Sequences preempted (recomputed later) for KV space.\n"
       "# TYPE lifeline_preemptions_total counter\n";
  for (const auto& e : engines_) o << "lifeline_preemptions_total{model=\"" << e->name() << "\"} " << e->Snapshot().preemptions << "\n";
  o << "# HELP lifeline_engine_steps_total Non-empty engine steps.\n"
       "# TYPE lifeline_engine_steps_total counter\n";
  for (const auto& e : engines_) o << "lifeline_engine_steps_total{model=\"" << e->name() << "\"} " << e->Snapshot().steps << "\n";
  return o.str();
}

}  // namespace lifeline::serving
