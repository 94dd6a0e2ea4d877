#include "economics/live_economics.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "analysis/csv.h"
#include "analysis/threshold.h"
#include "base/prometheus.h"

namespace lifeline::economics {

namespace {

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

nlohmann::json Ms(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return nullptr;
  return std::round(*v * 10.0) / 10.0;
}

double Rate(int64_t k, int64_t n) { return n > 0 ? static_cast<double>(k) / n : 0.0; }

}  // namespace

LiveEconomics::LiveEconomics(EconomicsOptions options) : options_(std::move(options)) {}

LiveEconomics::~LiveEconomics() {
  {
    std::lock_guard lock(run_mu_);
    stop_ = true;
  }
  run_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t LiveEconomics::Now() const { return options_.now_ms ? options_.now_ms() : SystemNowMs(); }

void LiveEconomics::Start() {
  if (options_.refit_interval_ms <= 0 || thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void LiveEconomics::Run() {
  // A refit is background work: the engine threads' steps go first.
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);
  std::unique_lock lock(run_mu_);
  while (!run_cv_.wait_for(lock, std::chrono::milliseconds(options_.refit_interval_ms),
                           [&] { return stop_; })) {
    lock.unlock();
    RefitNow();
    lock.lock();
  }
}

void LiveEconomics::Evict() {
  while (static_cast<int64_t>(window_.size()) > options_.window_requests) {
    const Request& r = window_.front();
    if (auto it = by_id_.find(r.id); it != by_id_.end() && it->second == first_seq_) by_id_.erase(it);
    if (!r.session.empty()) {
      if (auto it = by_session_.find(r.session); it != by_session_.end() && it->second == first_seq_) {
        by_session_.erase(it);
      }
    }
    window_.pop_front();
    ++first_seq_;
  }
}

void LiveEconomics::OnFinished(const api::RequestLogEntry& e) {
  Request r;
  r.id = e.id;
  r.session = e.session_id;
  r.slo_class = e.slo_class.empty() ? "unclassified" : e.slo_class;
  r.disconnected = e.disconnect_ms.has_value();
  r.sample = analysis::IsUserOutcome(e.outcome, e.cancel_reason);
  r.wait_ms = e.ttft_ms.value_or(e.e2e_ms);
  r.end_ms = Now();
  std::lock_guard lock(mu_);
  const uint64_t seq = first_seq_ + window_.size();
  window_.push_back(std::move(r));
  by_id_[window_.back().id] = seq;
  if (!window_.back().session.empty()) by_session_[window_.back().session] = seq;
  Evict();
}

api::OutcomesResult LiveEconomics::PostOutcomes(const std::vector<api::OutcomeEvent>& events) {
  api::OutcomesResult out;
  std::lock_guard lock(mu_);
  for (const api::OutcomeEvent& ev : events) {
    ++out.accepted;
    const auto& index = ev.request_id.empty() ? by_session_ : by_id_;
    const auto it = index.find(ev.request_id.empty() ? ev.session_id : ev.request_id);
    const int type = static_cast<int>(ev.type);
    if (it == index.end() || it->second < first_seq_) {
      ++out.unknown;
      ++unknown_[type];
      out.request_ids.emplace_back();
      continue;
    }
    Request& r = window_[it->second - first_seq_];
    out.request_ids.push_back(r.id);
    switch (ev.type) {
      case api::OutcomeType::kAbandoned: r.posted = 1; break;
      case api::OutcomeType::kCompleted: r.posted = 0; break;
      case api::OutcomeType::kClicked: r.clicked = true; break;
      case api::OutcomeType::kConverted: r.converted = true; break;
    }
    ++out.joined;
    ++joined_[type];
  }
  return out;
}

void LiveEconomics::RefitNow() {
  struct Sample {
    double wait_ms;
    uint8_t abandoned, clicked, converted;
  };
  std::map<std::string, std::vector<Sample>> by_class;
  const int64_t now = Now();
  {
    std::lock_guard lock(mu_);
    for (const Request& r : window_) {
      if (!r.sample || r.end_ms < now - options_.horizon_ms) continue;
      const uint8_t abandoned = r.posted >= 0 ? static_cast<uint8_t>(r.posted) : r.disconnected;
      by_class[r.slo_class].push_back({r.wait_ms, abandoned, r.clicked, r.converted});
    }
  }
  std::map<std::string, Estimate> fresh;
  for (auto& [cls, samples] : by_class) {
    Estimate est;
    est.fitted_unix_ms = now;
    est.samples = static_cast<int64_t>(samples.size());
    for (const Sample& s : samples) est.abandoned += s.abandoned;
    // Equal-count bins by wait.
    std::sort(samples.begin(), samples.end(),
              [](const Sample& a, const Sample& b) { return a.wait_ms < b.wait_ms; });
    const int64_t nbins = std::min<int64_t>(options_.bins, est.samples);
    for (int64_t b = 0; b < nbins; ++b) {
      const size_t lo = static_cast<size_t>(b * est.samples / nbins);
      const size_t hi = static_cast<size_t>((b + 1) * est.samples / nbins);
      Bin bin;
      bin.lo_ms = samples[lo].wait_ms;
      bin.hi_ms = samples[hi - 1].wait_ms;
      for (size_t i = lo; i < hi; ++i) {
        ++bin.n;
        bin.abandoned += samples[i].abandoned;
        bin.clicked += samples[i].clicked;
        bin.converted += samples[i].converted;
      }
      est.bins.push_back(bin);
    }
    if (est.samples < options_.min_samples) {
      est.status = "too_few_samples";
    } else if (est.abandoned == 0 || est.abandoned == est.samples) {
      est.status = "one_outcome";
    } else {
      analysis::ThresholdInput in;
      in.name = cls;
      for (const Sample& s : samples) {
        in.latency_ms.push_back(s.wait_ms);
        in.outcome.push_back(s.abandoned);
      }
      analysis::ThresholdOptions o;
      o.bootstrap = options_.bootstrap;
      o.null_replicates = options_.null_replicates;
      o.alpha = options_.alpha;
      o.direction = 1;  // abandonment jumps up with the wait
      o.seed = static_cast<uint64_t>(refits_ + 1);
      o.threads = 1;
      auto fit = analysis::FindThreshold(in, o);
      if (!fit.ok()) {
        est.status = "error: " + fit.status().message();
      } else if (!fit->found) {
        est.status = "no_cliff";
        est.p_value = fit->p_value;
      } else {
        est.status = "found";
        est.cliff_ms = fit->threshold_ms;
        est.ci_lo_ms = fit->ci_lo_ms;
        est.ci_hi_ms = fit->ci_hi_ms;
        est.p_value = fit->p_value;
        est.rate_below = fit->rate_below;
        est.rate_above = fit->rate_above;
      }
    }
    fresh[cls] = std::move(est);
  }
  std::vector<slo::CliffEstimate> cliffs;
  for (const auto& [cls, est] : fresh) {
    slo::CliffEstimate c;
    c.slo_class = cls;
    c.found = est.cliff_ms.has_value();
    c.cliff_ms = est.cliff_ms.value_or(0);
    c.ci_lo_ms = est.ci_lo_ms.value_or(0);
    c.ci_hi_ms = est.ci_hi_ms.value_or(0);
    c.p_value = est.p_value;
    c.samples = est.samples;
    cliffs.push_back(std::move(c));
  }
  {
    std::lock_guard lock(mu_);
    estimates_ = std::move(fresh);
    ++refits_;
    last_refit_unix_ms_ = now;
  }
  if (options_.on_refit) options_.on_refit(cliffs, now);
}

nlohmann::json LiveEconomics::EconomicsJson() const {
  using nlohmann::json;
  std::lock_guard lock(mu_);
  json classes = json::array();
  for (const auto& [cls, e] : estimates_) {
    json bins = json::array();
    for (const Bin& b : e.bins) {
      bins.push_back({{"lo_ms", Ms(b.lo_ms)},
                      {"hi_ms", Ms(b.hi_ms)},
                      {"n", b.n},
                      {"abandon_rate", Rate(b.abandoned, b.n)},
                      {"click_rate", Rate(b.clicked, b.n)},
                      {"convert_rate", Rate(b.converted, b.n)}});
    }
    const std::optional<double> target = options_.target_ms ? options_.target_ms(cls) : std::nullopt;
    json c = {{"class", cls},
              {"status", e.status},
              {"samples", e.samples},
              {"abandoned", e.abandoned},
              {"abandon_rate", Rate(e.abandoned, e.samples)},
              {"cliff_ms", Ms(e.cliff_ms)},
              {"ci95_ms", e.cliff_ms ? json::array({Ms(e.ci_lo_ms), Ms(e.ci_hi_ms)}) : json()},
              {"p_value", e.p_value},
              {"rate_below", e.cliff_ms ? json(e.rate_below) : json()},
              {"rate_above", e.cliff_ms ? json(e.rate_above) : json()},
              {"target_ms", Ms(target)},
              {"fitted_unix_ms", e.fitted_unix_ms},
              {"bins", std::move(bins)}};
    if (e.cliff_ms) {
      char text[256];
      if (target) {
        std::snprintf(text, sizeof text,
                      "class %s: your users' cliff is %.0f ms [%.0f, %.0f]; the target is %.0f ms",
                      cls.c_str(), *e.cliff_ms, *e.ci_lo_ms, *e.ci_hi_ms, *target);
      } else {
        std::snprintf(text, sizeof text, "class %s: your users' cliff is %.0f ms [%.0f, %.0f]",
                      cls.c_str(), *e.cliff_ms, *e.ci_lo_ms, *e.ci_hi_ms);
      }
      c["summary"] = text;
    }
    classes.push_back(std::move(c));
  }
  json joined = json::object(), unknown = json::object();
  for (int t = 0; t < api::kOutcomeTypes; ++t) {
    const std::string name(api::OutcomeTypeName(static_cast<api::OutcomeType>(t)));
    joined[name] = joined_[t];
    unknown[name] = unknown_[t];
  }
  json out = {{"object", "economics"},
          {"horizon_s", options_.horizon_ms / 1000},
          {"refit_interval_s", options_.refit_interval_ms / 1000},
          {"refits", refits_},
          {"last_refit_unix_ms", last_refit_unix_ms_ == 0 ? json() : json(last_refit_unix_ms_)},
          {"window", {{"requests", window_.size()}, {"capacity", options_.window_requests}}},
          {"outcomes", {{"joined", std::move(joined)}, {"unknown", std::move(unknown)}}},
          {"classes", std::move(classes)}};
  out["autotune"] = options_.autotune_json ? options_.autotune_json() : json(nullptr);
  return out;
}

std::string LiveEconomics::MetricsText() const {
  std::lock_guard lock(mu_);
  std::string out;
  prom::Family(&out, "lifeline_outcome_events_total", "counter",
               "Outcome events posted to /v1/outcomes, by type and whether a request in the "
               "window took them");
  for (int t = 0; t < api::kOutcomeTypes; ++t) {
    const std::string_view name = api::OutcomeTypeName(static_cast<api::OutcomeType>(t));
    prom::Sample(&out, "lifeline_outcome_events_total",
                 prom::Labels({{"type", name}, {"result", "joined"}}),
                 static_cast<double>(joined_[t]));
    prom::Sample(&out, "lifeline_outcome_events_total",
                 prom::Labels({{"type", name}, {"result", "unknown"}}),
                 static_cast<double>(unknown_[t]));
  }
  prom::Family(&out, "lifeline_economics_samples", "gauge",
               "Requests of the class in the last fit (completed, or left by their client)");
  prom::Family(&out, "lifeline_economics_cliff_ms", "gauge",
               "The class's latency cliff found by the last fit (absent when none was found)");
  for (const auto& [cls, e] : estimates_) {
    prom::Sample(&out, "lifeline_economics_samples", prom::Labels({{"class", cls}}),
                 static_cast<double>(e.samples));
    if (e.cliff_ms) {
      prom::Sample(&out, "lifeline_economics_cliff_ms", prom::Labels({{"class", cls}}),
                   *e.cliff_ms);
    }
  }
  prom::Family(&out, "lifeline_economics_refits_total", "counter", "Refits of the cliff estimates");
  prom::Sample(&out, "lifeline_economics_refits_total", "", static_cast<double>(refits_));
  return out;
}

}  // namespace lifeline::economics
