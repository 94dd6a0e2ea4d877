#include "analysis/simulate.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "analysis/rng.h"

namespace lifeline::analysis {

namespace {

constexpr uint64_t kPurposeSessions = 11;
constexpr uint64_t kPurposeEvents = 12;

Status NumberField(std::string_view flag, std::string_view text, std::string_view key,
                   std::string_view value, double lo, double hi, double* out) {
  double v = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || p != value.data() + value.size() || !std::isfinite(v)) {
    return InvalidArgument(std::string(flag) + " '" + std::string(text) + "': " +
                           std::string(key) + " = '" + std::string(value) + "' is not a number");
  }
  if (v < lo || v > hi) {
    char buf[160];
    std::snprintf(buf, sizeof buf, " = %g is outside [%g, %g]", v, lo, hi);
    return InvalidArgument(std::string(flag) + " '" + std::string(text) + "': " +
                           std::string(key) + buf);
  }
  *out = v;
  return Status::Ok();
}

double Logit(double p) { return std::log(p / (1 - p)); }
double Logistic(double x) { return 1 / (1 + std::exp(-x)); }

void AppendLatency(std::string* out, double t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", t);
  *out += buf;
}

}  // namespace

Result<SessionScenarioSpec> ParseScenarioSpec(std::string_view text, std::string_view flag) {
  SessionScenarioSpec s;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument(std::string(flag) + " '" + std::string(text) + "': '" +
                             std::string(item) + "' is not KEY=VALUE");
    }
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    double v = 0;
    if (key == "name") {
      if (value.empty() || value.size() > 64 || value.find_first_of(",\"\n\r") != value.npos) {
        return InvalidArgument(std::string(flag) + " '" + std::string(text) +
                               "': name must be 1-64 characters without commas or quotes");
      }
      s.name = std::string(value);
    } else if (key == "knee") {
      if (value == "none") {
        s.knee_ms.reset();
      } else {
        LL_RETURN_IF_ERROR(NumberField(flag, text, key, value, 0, 3.6e6, &v));
        s.knee_ms = v;
      }
    } else if (key == "below") {
      LL_RETURN_IF_ERROR(NumberField(flag, text, key, value, 1e-6, 1 - 1e-6, &s.rate_below));
    } else if (key == "above") {
      LL_RETURN_IF_ERROR(NumberField(flag, text, key, value, 1e-6, 1 - 1e-6, &s.rate_above));
    } else if (key == "slope") {
      LL_RETURN_IF_ERROR(NumberField(flag, text, key, value, -100, 100, &s.slope_per_s));
    } else if (key == "median") {
      LL_RETURN_IF_ERROR(NumberField(flag, text, key, value, 1e-3, 3.6e6, &s.median_ms));
    } else if (key == "sigma") {
      LL_RETURN_IF_ERROR(NumberField(flag, text, key, value, 1e-3, 5, &s.sigma));
    } else if (key == "rows") {
      LL_RETURN_IF_ERROR(NumberField(flag, text, key, value, 1, kMaxSimulatedRows, &v));
      s.rows = static_cast<int64_t>(v);
    } else if (key == "jitter") {
      LL_RETURN_IF_ERROR(NumberField(flag, text, key, value, 0, 3.6e6, &s.jitter_ms));
    } else if (key == "users") {
      LL_RETURN_IF_ERROR(NumberField(flag, text, key, value, 0, kMaxSimulatedRows, &v));
      s.users = static_cast<int64_t>(v);
    } else if (key == "user_sd") {
      LL_RETURN_IF_ERROR(NumberField(flag, text, key, value, 0, 10, &s.user_sd));
    } else {
      return InvalidArgument(std::string(flag) + " '" + std::string(text) + "': unknown key '" +
                             std::string(key) + "' (name, knee, below, above, slope, median, "
                             "sigma, rows, jitter, users, user_sd)");
    }
  }
  return s;
}

Status ValidateEventSpec(const EventSpec& e) {
  if (e.rows < 1 || e.rows > kMaxSimulatedRows) {
    return InvalidArgument("--rows " + std::to_string(e.rows) + " is outside [1, " +
                           std::to_string(kMaxSimulatedRows) + "]");
  }
  auto in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  if (!in(e.c0, 1e-6, 1)) return InvalidArgument("--c0 must be in (0, 1]");
  if (!in(e.v0, 1e-6, 1)) return InvalidArgument("--v0 must be in (0, 1]");
  if (!in(e.a, 0, 1) || !in(e.b, 0, 1)) return InvalidArgument("--a and --b must be in [0, 1] per ms");
  if (!in(e.g, 0, 1e-2)) return InvalidArgument("--g must be in [0, 0.01] per ms^2");
  if (!in(e.median_ms, 1e-3, 3.6e6)) return InvalidArgument("--median-ms must be in (0, 3600000]");
  if (!in(e.sigma, 1e-3, 5)) return InvalidArgument("--sigma must be in (0, 5]");
  return Status::Ok();
}

Result<std::string> SimulateSessions(const std::vector<SessionScenarioSpec>& specs,
                                     uint64_t seed) {
  int64_t total = 0;
  for (const SessionScenarioSpec& s : specs) total += s.rows;
  if (total > kMaxSimulatedRows) {
    return InvalidArgument("simulate: " + std::to_string(total) + " rows in all exceeds " +
                           std::to_string(kMaxSimulatedRows));
  }
  std::string out = "session_id,user_id,scenario,latency_ms,abandoned\n";
  int64_t session = 0, user_base = 0;
  for (size_t si = 0; si < specs.size(); ++si) {
    const SessionScenarioSpec& s = specs[si];
    Rng rng(DeriveSeed(seed, kPurposeSessions, si));
    const int64_t users = s.users > 0 ? s.users : s.rows;
    std::vector<double> effect;
    if (s.users > 0) {
      effect.resize(static_cast<size_t>(users));
      for (double& e : effect) e = s.user_sd > 0 ? gsl_ran_gaussian(rng.get(), s.user_sd) : 0;
    }
    const double ref_ms = s.knee_ms.value_or(s.median_ms);
    for (int64_t i = 0; i < s.rows; ++i) {
      const int64_t user = s.users > 0 ? static_cast<int64_t>(rng.Below(users)) : i;
      const double t = gsl_ran_lognormal(rng.get(), std::log(s.median_ms), s.sigma);
      const double base = s.knee_ms && t >= *s.knee_ms ? s.rate_above : s.rate_below;
      double eta = Logit(base) + s.slope_per_s * (t - ref_ms) / 1000;
      if (s.users > 0 && s.user_sd > 0) eta += effect[static_cast<size_t>(user)];
      else if (s.user_sd > 0) eta += gsl_ran_gaussian(rng.get(), s.user_sd);
      const int abandoned = rng.Uniform() < Logistic(eta) ? 1 : 0;
      double logged = t;
      if (s.jitter_ms > 0) logged = std::max(0.0, t + gsl_ran_gaussian(rng.get(), s.jitter_ms));
      out += std::to_string(session++) + "," + std::to_string(user_base + user) + "," + s.name +
             ",";
      AppendLatency(&out, logged);
      out += abandoned ? ",1\n" : ",0\n";
    }
    user_base += users;
  }
  return out;
}

Result<std::string> SimulateEvents(const EventSpec& e, uint64_t seed) {
  LL_RETURN_IF_ERROR(ValidateEventSpec(e));
  Rng rng(DeriveSeed(seed, kPurposeEvents, 0));
  std::string out = "event_id,latency_ms,clicked,converted\n";
  for (int64_t i = 0; i < e.rows; ++i) {
    const double t = gsl_ran_lognormal(rng.get(), std::log(e.median_ms), e.sigma);
    const bool clicked = rng.Uniform() < e.c0 * std::exp(-e.a * t);
    const bool converted = clicked && rng.Uniform() < e.v0 * std::exp(-e.b * t - e.g * t * t);
    out += std::to_string(i) + ",";
    AppendLatency(&out, t);
    out += clicked ? ",1" : ",0";
    out += converted ? ",1\n" : ",0\n";
  }
  return out;
}

nlohmann::json SessionTruthJson(const std::vector<SessionScenarioSpec>& specs, uint64_t seed) {
  nlohmann::json j;
  j["kind"] = "sessions";
  j["seed"] = seed;
  j["scenarios"] = nlohmann::json::array();
  for (const SessionScenarioSpec& s : specs) {
    j["scenarios"].push_back({{"name", s.name},
                              {"rows", s.rows},
                              {"knee_ms", s.knee_ms ? nlohmann::json(*s.knee_ms) : nullptr},
                              {"rate_below", s.rate_below},
                              {"rate_above", s.knee_ms ? s.rate_above : s.rate_below},
                              {"slope_per_s", s.slope_per_s},
                              {"latency", {{"lognormal_median_ms", s.median_ms},
                                           {"sigma", s.sigma}}},
                              {"jitter_ms", s.jitter_ms},
                              {"users", s.users},
                              {"user_sd", s.user_sd}});
  }
  return j;
}

nlohmann::json EventTruthJson(const EventSpec& e, uint64_t seed) {
  return {{"kind", "events"},
          {"seed", seed},
          {"rows", e.rows},
          {"ctr", {{"c0", e.c0}, {"a", e.a}}},
          {"cvr", {{"v0", e.v0}, {"b", e.b}, {"g", e.g}}},
          {"latency", {{"lognormal_median_ms", e.median_ms}, {"sigma", e.sigma}}}};
}

}  // namespace lifeline::analysis
