#include "slo/slo_config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include <toml++/toml.h>

#include "base/prometheus.h"
#include "slo/target_board.h"

namespace lifeline::slo {

namespace {

constexpr size_t kMaxNameChars = 64;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameChars) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

// Request values are echoed in errors; keep them short.
std::string Echo(std::string_view s) {
  return s.size() <= kMaxNameChars ? std::string(s)
                                   : std::string(s.substr(0, kMaxNameChars)) + "...";
}

std::string Num(double v) { return prom::Number(v); }  // shortest round-trip form

SloClass Preset(std::string name, std::optional<double> ttft, std::optional<double> e2e,
                int32_t priority) {
  SloClass c;
  c.name = std::move(name);
  c.ttft_p95_ms = ttft;
  c.e2e_p95_ms = e2e;
  c.priority = priority;
  return c;
}

// Reads typed values out of toml++ tables and turns every defect into a Status naming the
// source, line, dotted key, value and limit.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  Status Error(const toml::source_region& at, std::string_view key, const std::string& msg) const {
    return InvalidArgument(source_ + ":" + std::to_string(at.begin.line) + ": " +
                           std::string(key) + ": " + msg);
  }

  Status CheckKeys(const toml::table& t, const std::string& prefix,
                   std::initializer_list<std::string_view> allowed) const {
    for (const auto& [k, v] : t) {
      if (std::find(allowed.begin(), allowed.end(), k.str()) == allowed.end()) {
        return Error(k.source(), Join(prefix, k.str()), "unknown key");
      }
    }
    return Status::Ok();
  }

  const toml::table* Table(const toml::table& t, std::string_view key, const std::string& prefix,
                           Status* st) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return nullptr;
    if (!n->is_table()) *st = Error(n->source(), Join(prefix, key), "expected a table");
    return n->as_table();
  }

  Status Int(const toml::table& t, const std::string& prefix, std::string_view key, int64_t lo,
             int64_t hi, int64_t* out) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return Status::Ok();
    const auto* v = n->as_integer();
    if (v == nullptr) return Error(n->source(), Join(prefix, key), "expected an integer");
    const int64_t x = v->get();
    if (x < lo || x > hi) {
      return Error(n->source(), Join(prefix, key),
                   "value " + std::to_string(x) + " is outside [" + std::to_string(lo) + ", " +
                       std::to_string(hi) + "]");
    }
    *out = x;
    return Status::Ok();
  }

  template <typename T>
  Status IntAs(const toml::table& t, const std::string& prefix, std::string_view key, int64_t lo,
               int64_t hi, T* out) const {
    int64_t x = static_cast<int64_t>(*out);
    LL_RETURN_IF_ERROR(Int(t, prefix, key, lo, hi, &x));
    *out = static_cast<T>(x);
    return Status::Ok();
  }

  // Accepts integers and floats. `lo_open`: the lower bound itself is not allowed.
  Status Double(const toml::table& t, const std::string& prefix, std::string_view key, double lo,
                bool lo_open, double hi, double* out) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return Status::Ok();
    double x = 0;
    if (const auto* i = n->as_integer()) {
      x = static_cast<double>(i->get());
    } else if (const auto* f = n->as_floating_point()) {
      x = f->get();
    } else {
      return Error(n->source(), Join(prefix, key), "expected a number");
    }
    if (!std::isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi) {
      return Error(n->source(), Join(prefix, key),
                   "value " + Num(x) + " is outside " + (lo_open ? "(" : "[") + Num(lo) + ", " +
                       Num(hi) + "]");
    }
    *out = x;
    return Status::Ok();
  }

  // A P95 target in ms: 0 removes it, otherwise (0, kMaxBudgetMs].
  Status Target(const toml::table& t, const std::string& prefix, std::string_view key,
                std::optional<double>* out) const {
    if (t.get(key) == nullptr) return Status::Ok();
    double x = -1;
    LL_RETURN_IF_ERROR(Double(t, prefix, key, 0, false, kMaxBudgetMs, &x));
    *out = x == 0 ? std::nullopt : std::optional<double>(x);
    return Status::Ok();
  }

  Status Bool(const toml::table& t, const std::string& prefix, std::string_view key,
              bool* out) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return Status::Ok();
    const auto* v = n->as_boolean();
    if (v == nullptr) return Error(n->source(), Join(prefix, key), "expected true or false");
    *out = v->get();
    return Status::Ok();
  }

  Status String(const toml::table& t, const std::string& prefix, std::string_view key,
                std::string* out) const {
    const toml::node* n = t.get(key);
    if (n == nullptr) return Status::Ok();
    const auto* v = n->as_string();
    if (v == nullptr) return Error(n->source(), Join(prefix, key), "expected a string");
    *out = v->get();
    return Status::Ok();
  }

  static std::string Join(const std::string& prefix, std::string_view key) {
    return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
  }

 private:
  std::string source_;
};

Status ParseWindow(const Reader& r, const toml::table& t, SloConfig* c) {
  LL_RETURN_IF_ERROR(r.CheckKeys(t, "window", {"bucket_ms", "buckets"}));
  int64_t bucket_ms = c->window.bucket_us / 1000;
  LL_RETURN_IF_ERROR(r.Int(t, "window", "bucket_ms", 100, 600'000, &bucket_ms));
  c->window.bucket_us = bucket_ms * 1000;
  return r.IntAs(t, "window", "buckets", 1, 120, &c->window.n_buckets);
}

Status ParseController(const Reader& r, const toml::table& t, ControllerParams* p) {
  const std::string s = "controller";
  LL_RETURN_IF_ERROR(r.CheckKeys(t, s, {"tick_ms", "min_samples", "batch_high_ratio",
                                        "batch_low_ratio", "batch_adjust_interval_ms"}));
  LL_RETURN_IF_ERROR(r.Int(t, s, "tick_ms", 10, 60'000, &p->tick_ms));
  LL_RETURN_IF_ERROR(r.Int(t, s, "min_samples", 1, 1'000'000, &p->min_samples));
  LL_RETURN_IF_ERROR(r.Double(t, s, "batch_high_ratio", 0, true, 100, &p->batch_high_ratio));
  LL_RETURN_IF_ERROR(r.Double(t, s, "batch_low_ratio", 0, true, 100, &p->batch_low_ratio));
  LL_RETURN_IF_ERROR(
      r.Int(t, s, "batch_adjust_interval_ms", 0, 3'600'000, &p->batch_adjust_interval_ms));
  if (p->batch_low_ratio >= p->batch_high_ratio) {
    return r.Error(t.source(), "controller.batch_low_ratio",
                   "value " + Num(p->batch_low_ratio) + " must be below batch_high_ratio " +
                       Num(p->batch_high_ratio));
  }
  return Status::Ok();
}

Status ParseBatching(const Reader& r, const toml::table& t, BatchParams* p) {
  const std::string s = "batching";
  LL_RETURN_IF_ERROR(r.CheckKeys(t, s, {"initial", "floor", "cap", "step_tokens_per_seq",
                                        "min_step_tokens", "preferred_batch_sizes",
                                        "max_queue_delay_ms"}));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "initial", 1, 65'536, &p->initial));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "floor", 1, 65'536, &p->floor));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "cap", 1, 65'536, &p->cap));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "step_tokens_per_seq", 1, 65'536, &p->step_tokens_per_seq));
  LL_RETURN_IF_ERROR(r.Int(t, s, "min_step_tokens", 1, 1 << 24, &p->min_step_tokens));
  LL_RETURN_IF_ERROR(r.Double(t, s, "max_queue_delay_ms", 0, false, 60'000, &p->max_queue_delay_ms));
  if (p->floor > p->cap) {
    return r.Error(t.source(), "batching.floor",
                   "value " + std::to_string(p->floor) + " is above cap " + std::to_string(p->cap));
  }
  if (p->initial < p->floor || p->initial > p->cap) {
    return r.Error(t.source(), "batching.initial",
                   "value " + std::to_string(p->initial) + " is outside [floor, cap] = [" +
                       std::to_string(p->floor) + ", " + std::to_string(p->cap) + "]");
  }
  if (const toml::node* n = t.get("preferred_batch_sizes")) {
    const auto* arr = n->as_array();
    if (arr == nullptr) return r.Error(n->source(), "batching.preferred_batch_sizes", "expected an array");
    p->preferred_batch_sizes.clear();
    for (const toml::node& e : *arr) {
      const auto* v = e.as_integer();
      const int64_t prev = p->preferred_batch_sizes.empty() ? 0 : p->preferred_batch_sizes.back();
      if (v == nullptr || v->get() <= prev || v->get() > p->cap) {
        return r.Error(e.source(), "batching.preferred_batch_sizes",
                       "entries must be strictly ascending integers in [1, cap = " +
                           std::to_string(p->cap) + "]");
      }
      p->preferred_batch_sizes.push_back(static_cast<int32_t>(v->get()));
    }
  }
  return Status::Ok();
}

Status ParseLadder(const Reader& r, const toml::table& t, LadderParams* p) {
  const std::string s = "ladder";
  LL_RETURN_IF_ERROR(r.CheckKeys(t, s, {"enter_ratio", "recover_ratio", "recover_ticks",
                                        "min_dwell_ms", "raise_interval_ms", "max_level",
                                        "truncate_max_tokens", "truncate_min_tokens",
                                        "trim_to_tokens", "event_log_size",
                                        "raise_needs_fresh_samples", "min_thinking_scale"}));
  LL_RETURN_IF_ERROR(r.Double(t, s, "enter_ratio", 0, true, 100, &p->enter_ratio));
  LL_RETURN_IF_ERROR(r.Double(t, s, "recover_ratio", 0, true, 100, &p->recover_ratio));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "recover_ticks", 1, 100'000, &p->recover_ticks));
  LL_RETURN_IF_ERROR(r.Int(t, s, "min_dwell_ms", 0, 3'600'000, &p->min_dwell_ms));
  LL_RETURN_IF_ERROR(r.Int(t, s, "raise_interval_ms", 0, 3'600'000, &p->raise_interval_ms));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "max_level", 0, 4, &p->max_level));
  LL_RETURN_IF_ERROR(r.Int(t, s, "truncate_max_tokens", 1, 1 << 20, &p->truncate_max_tokens));
  LL_RETURN_IF_ERROR(r.Int(t, s, "truncate_min_tokens", 1, 1 << 20, &p->truncate_min_tokens));
  LL_RETURN_IF_ERROR(r.Int(t, s, "trim_to_tokens", 1, 1 << 24, &p->trim_to_tokens));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "event_log_size", 1, 100'000, &p->event_log_size));
  LL_RETURN_IF_ERROR(
      r.Bool(t, s, "raise_needs_fresh_samples", &p->raise_needs_fresh_samples));
  LL_RETURN_IF_ERROR(
      r.Double(t, s, "min_thinking_scale", 0, true, 1, &p->min_thinking_scale));
  if (p->recover_ratio >= p->enter_ratio) {
    return r.Error(t.source(), "ladder.recover_ratio",
                   "value " + Num(p->recover_ratio) + " must be below enter_ratio " +
                       Num(p->enter_ratio) + " (hysteresis)");
  }
  return Status::Ok();
}

Status ParseAdmission(const Reader& r, const toml::table& t, AdmissionParams* p) {
  const std::string s = "admission";
  LL_RETURN_IF_ERROR(r.CheckKeys(
      t, s, {"predictive", "ewma_alpha", "prediction_margin", "speed_stale_ms",
             "max_retry_after_s", "not_ready_retry_after_s", "max_margin_scale",
             "margin_raise_factor", "margin_lower_factor"}));
  LL_RETURN_IF_ERROR(r.Bool(t, s, "predictive", &p->predictive));
  LL_RETURN_IF_ERROR(r.Double(t, s, "ewma_alpha", 0, true, 1, &p->ewma_alpha));
  LL_RETURN_IF_ERROR(r.Double(t, s, "prediction_margin", 1, false, 10, &p->prediction_margin));
  LL_RETURN_IF_ERROR(r.Int(t, s, "speed_stale_ms", 0, 3'600'000, &p->speed_stale_ms));
  LL_RETURN_IF_ERROR(r.Double(t, s, "max_margin_scale", 1, false, 100, &p->max_margin_scale));
  LL_RETURN_IF_ERROR(
      r.Double(t, s, "margin_raise_factor", 1, false, 10, &p->margin_raise_factor));
  LL_RETURN_IF_ERROR(
      r.Double(t, s, "margin_lower_factor", 1, false, 10, &p->margin_lower_factor));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "max_retry_after_s", 1, 3600, &p->max_retry_after_s));
  LL_RETURN_IF_ERROR(
      r.IntAs(t, s, "not_ready_retry_after_s", 1, 3600, &p->not_ready_retry_after_s));
  return Status::Ok();
}

Status ParseAutotune(const Reader& r, const toml::table& t, AutotuneParams* p) {
  const std::string s = "autotune";
  LL_RETURN_IF_ERROR(r.CheckKeys(t, s, {"enabled", "margin", "max_step", "min_factor",
                                        "max_factor", "stable_refits", "min_interval_ms"}));
  LL_RETURN_IF_ERROR(r.Bool(t, s, "enabled", &p->enabled));
  LL_RETURN_IF_ERROR(r.Double(t, s, "margin", 0, false, 0.9, &p->margin));
  LL_RETURN_IF_ERROR(r.Double(t, s, "max_step", 0, true, 1, &p->max_step));
  LL_RETURN_IF_ERROR(r.Double(t, s, "min_factor", 0, true, 1, &p->min_factor));
  LL_RETURN_IF_ERROR(r.Double(t, s, "max_factor", 1, false, 100, &p->max_factor));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "stable_refits", 1, 1000, &p->stable_refits));
  LL_RETURN_IF_ERROR(r.Int(t, s, "min_interval_ms", 0, 86'400'000 * int64_t{7}, &p->min_interval_ms));
  return Status::Ok();
}

Status ParseClass(const Reader& r, const std::string& name, const toml::table& t, SloClass* c) {
  const std::string s = "classes." + name;
  LL_RETURN_IF_ERROR(r.CheckKeys(
      t, s, {"ttft_p95_ms", "ttfa_p95_ms", "e2e_p95_ms", "tpot_p95_ms", "priority", "max_level",
             "on_late", "reasoning_budget_tokens", "max_reasoning_budget_tokens",
             "reasoning_effort_tokens"}));
  LL_RETURN_IF_ERROR(r.Target(t, s, "ttft_p95_ms", &c->ttft_p95_ms));
  LL_RETURN_IF_ERROR(r.Target(t, s, "ttfa_p95_ms", &c->ttfa_p95_ms));
  LL_RETURN_IF_ERROR(r.Int(t, s, "reasoning_budget_tokens", -1, 1 << 24,
                           &c->thinking.default_budget_tokens));
  LL_RETURN_IF_ERROR(r.Int(t, s, "max_reasoning_budget_tokens", -1, 1 << 24,
                           &c->thinking.max_budget_tokens));
  if (const toml::node* n = t.get("reasoning_effort_tokens")) {
    const std::string e = s + ".reasoning_effort_tokens";
    const toml::table* efforts = n->as_table();
    if (efforts == nullptr) {
      return r.Error(n->source(), e, "expected a table {minimal, low, medium, high}");
    }
    LL_RETURN_IF_ERROR(r.CheckKeys(*efforts, e, {"minimal", "low", "medium", "high"}));
    const char* names[] = {"minimal", "low", "medium", "high"};
    for (size_t i = 0; i < 4; ++i) {
      LL_RETURN_IF_ERROR(r.Int(*efforts, e, names[i], -1, 1 << 24,
                               &c->thinking.effort_budget_tokens[i]));
    }
  }
  LL_RETURN_IF_ERROR(r.Target(t, s, "e2e_p95_ms", &c->e2e_p95_ms));
  LL_RETURN_IF_ERROR(r.Target(t, s, "tpot_p95_ms", &c->tpot_p95_ms));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "priority", -1000, 1000, &c->priority));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "max_level", 0, 4, &c->max_level));
  if (const toml::node* n = t.get("on_late")) {
    std::string on_late;
    LL_RETURN_IF_ERROR(r.String(t, s, "on_late", &on_late));
    if (on_late != "shed" && on_late != "serve") {
      return r.Error(n->source(), s + ".on_late",
                     "value '" + on_late + "' is not one of \"shed\", \"serve\"");
    }
    c->serve_late = on_late == "serve";
  }
  if (!c->ttft_p95_ms && !c->ttfa_p95_ms && !c->e2e_p95_ms) {
    return r.Error(t.source(), s, "needs ttft_p95_ms, ttfa_p95_ms or e2e_p95_ms (a per-token "
                                  "target alone gives no first-token budget)");
  }
  return Status::Ok();
}

Status ParseClasses(const Reader& r, const toml::table& t, SloConfig* c) {
  for (const auto& [k, v] : t) {
    const std::string name(k.str());
    if (!ValidName(name)) {
      return r.Error(k.source(), "classes." + name, "class names are 1-64 of [a-z0-9_-]");
    }
    if (!v.is_table()) return r.Error(v.source(), "classes." + name, "expected a table");
    auto it = std::find_if(c->classes.begin(), c->classes.end(),
                           [&](const SloClass& x) { return x.name == name; });
    if (it == c->classes.end()) {
      SloClass fresh;
      fresh.name = name;
      fresh.max_level = c->ladder.max_level;
      c->classes.push_back(fresh);
      it = c->classes.end() - 1;
    }
    LL_RETURN_IF_ERROR(ParseClass(r, name, *v.as_table(), &*it));
  }
  return Status::Ok();
}

Status ParseRoles(const Reader& r, const toml::table& t, SloConfig* c) {
  for (const auto& [k, v] : t) {
    const std::string name(k.str());
    if (!ValidName(name)) {
      return r.Error(k.source(), "roles." + name, "role names are 1-64 of [a-z0-9_-]");
    }
    double m = 1;
    LL_RETURN_IF_ERROR(r.Double(t, "roles", name, 0, true, 100, &m));
    auto it = std::find_if(c->roles.begin(), c->roles.end(),
                           [&](const auto& x) { return x.first == name; });
    if (it == c->roles.end()) {
      c->roles.emplace_back(name, m);
    } else {
      it->second = m;
    }
  }
  return Status::Ok();
}

Status ParseModel(const Reader& r, const toml::table& t, size_t index, const SloConfig& c,
                  ModelEntry* m) {
  const std::string s = "models[" + std::to_string(index) + "]";
  m->source_line = t.source().begin.line;
  LL_RETURN_IF_ERROR(r.CheckKeys(t, s, {"name", "path", "url", "model", "cascade",
                                        "max_queue_requests", "max_queue_tokens"}));
  LL_RETURN_IF_ERROR(r.String(t, s, "name", &m->name));
  LL_RETURN_IF_ERROR(r.String(t, s, "path", &m->path));
  LL_RETURN_IF_ERROR(r.String(t, s, "url", &m->url));
  LL_RETURN_IF_ERROR(r.String(t, s, "model", &m->remote_model));
  LL_RETURN_IF_ERROR(r.Bool(t, s, "cascade", &m->in_cascade));
  LL_RETURN_IF_ERROR(r.IntAs(t, s, "max_queue_requests", 1, 1'000'000, &m->max_queue_requests));
  LL_RETURN_IF_ERROR(r.Int(t, s, "max_queue_tokens", 1, int64_t{1} << 40, &m->max_queue_tokens));
  if (m->name.empty() || m->name.size() > 256) {
    return r.Error(t.source(), s + ".name", "required, 1-256 characters");
  }
  if (c.FindModel(m->name) != nullptr) {
    return r.Error(t.source(), s + ".name", "duplicate model name '" + m->name + "'");
  }
  if (m->path.empty() == m->url.empty()) {
    return r.Error(t.source(), s, "needs exactly one of path (local) or url (remote)");
  }
  if (m->remote()) {
    if (m->url.rfind("http://", 0) != 0 && m->url.rfind("https://", 0) != 0) {
      return r.Error(t.source(), s + ".url", "'" + m->url + "' must start with http:// or https://");
    }
    if (m->remote_model.empty()) {
      return r.Error(t.source(), s + ".model", "required for a remote backend (url)");
    }
  } else if (!m->remote_model.empty()) {
    return r.Error(t.source(), s + ".model", "only for remote backends (url)");
  }
  return Status::Ok();
}

Status ParseModels(const Reader& r, const toml::node& n, SloConfig* c) {
  const auto* arr = n.as_array();
  if (arr == nullptr) return r.Error(n.source(), "models", "expected an array of tables [[models]]");
  for (size_t i = 0; i < arr->size(); ++i) {
    const toml::node& e = *arr->get(i);
    if (!e.is_table()) return r.Error(e.source(), "models", "expected an array of tables [[models]]");
    ModelEntry m;
    LL_RETURN_IF_ERROR(ParseModel(r, *e.as_table(), i, *c, &m));
    c->models.push_back(std::move(m));
  }
  return Status::Ok();
}

// Sections in dependency order: the ladder's max_level is the default of new classes.
Status ParseRoot(const Reader& r, const toml::table& root, SloConfig* c) {
  LL_RETURN_IF_ERROR(r.CheckKeys(root, "", {"default_class", "use_presets", "classes", "roles",
                                            "models", "window", "controller", "batching",
                                            "ladder", "admission", "autotune"}));
  bool use_presets = true;
  LL_RETURN_IF_ERROR(r.Bool(root, "", "use_presets", &use_presets));
  if (!use_presets) {
    c->classes.clear();
    c->roles.clear();
  }
  LL_RETURN_IF_ERROR(r.String(root, "", "default_class", &c->default_class));
  Status st;
  using SectionFn = Status (*)(const Reader&, const toml::table&, SloConfig*);
  const std::pair<const char*, SectionFn> sections[] = {
      {"window", &ParseWindow},
      {"controller", [](const Reader& r, const toml::table& t, SloConfig* c) {
         return ParseController(r, t, &c->controller); }},
      {"batching", [](const Reader& r, const toml::table& t, SloConfig* c) {
         return ParseBatching(r, t, &c->batching); }},
      {"ladder", [](const Reader& r, const toml::table& t, SloConfig* c) {
         Status s = ParseLadder(r, t, &c->ladder);
         if (s.ok()) for (SloClass& k : c->classes) k.max_level = c->ladder.max_level;
         return s; }},
      {"admission", [](const Reader& r, const toml::table& t, SloConfig* c) {
         return ParseAdmission(r, t, &c->admission); }},
      {"autotune", [](const Reader& r, const toml::table& t, SloConfig* c) {
         return ParseAutotune(r, t, &c->autotune); }},
      {"classes", &ParseClasses},
      {"roles", &ParseRoles},
  };
  for (const auto& [name, fn] : sections) {
    const toml::table* t = r.Table(root, name, "", &st);
    LL_RETURN_IF_ERROR(st);
    if (t != nullptr) LL_RETURN_IF_ERROR(fn(r, *t, c));
  }
  if (const toml::node* n = root.get("models")) LL_RETURN_IF_ERROR(ParseModels(r, *n, c));
  if (c->FindClass(c->default_class) == nullptr) {
    const toml::node* n = root.get("default_class");
    return r.Error(n ? n->source() : root.source(), "default_class",
                   "'" + c->default_class + "' is not a configured class");
  }
  return Status::Ok();
}

void SortTables(SloConfig* c) {
  std::sort(c->classes.begin(), c->classes.end(),
            [](const SloClass& a, const SloClass& b) { return a.name < b.name; });
  std::sort(c->roles.begin(), c->roles.end());
}

}  // namespace

const SloClass* SloConfig::FindClass(std::string_view name) const {
  for (const SloClass& c : classes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::optional<double> SloConfig::RoleMultiplier(std::string_view role) const {
  for (const auto& [name, m] : roles) {
    if (name == role) return m;
  }
  return std::nullopt;
}

const ModelEntry* SloConfig::FindModel(std::string_view name) const {
  for (const ModelEntry& m : models) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

const ModelEntry* SloConfig::NextInCascade(std::string_view model) const {
  auto it = std::find_if(models.begin(), models.end(),
                         [&](const ModelEntry& m) { return m.name == model; });
  if (it == models.end() || !it->in_cascade) return nullptr;
  for (++it; it != models.end(); ++it) {
    if (it->in_cascade) return &*it;
  }
  return nullptr;
}

SloConfig DefaultSloConfig() {
  SloConfig c;
  // The research's targets. Streaming scenarios are judged on the first token (what a user
  // perceives as "the answer started"); risk control is a one-shot scoring call, so its
  // budget is end to end.
  c.classes = {
      Preset("interactive", 387, std::nullopt, 0),
      Preset("chat", 350, std::nullopt, 1),
      Preset("code-completion", 200, std::nullopt, 2),
      Preset("customer-service", 220, std::nullopt, 2),
      Preset("asr", 300, std::nullopt, 3),
      Preset("video-call", 150, std::nullopt, 3),
      Preset("medical", 150, std::nullopt, 4),
      Preset("risk-control", std::nullopt, 85, 4),
      // Search on the request path: a query embedding, then a rerank of the candidates, inside
      // one search budget; both outrank chat so a chat load cannot push them past it. The
      // answer is the first (only) output, so TTFT is the whole request.
      Preset("search-embed", 50, std::nullopt, 3),
      Preset("search-rerank", 150, std::nullopt, 3),
  };
  c.roles = {{"agent", 1.0}, {"doctor", 0.8}, {"user", 1.3}};
  SortTables(&c);
  return c;
}

Result<SloConfig> ParseSloConfig(std::string_view toml_text, std::string_view source_name) {
  const Reader reader(source_name);
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(std::string(source_name) + ":" +
                           std::to_string(e.source().begin.line) + ":" +
                           std::to_string(e.source().begin.column) +
                           ": TOML syntax: " + std::string(e.description()));
  }
  SloConfig c = DefaultSloConfig();
  LL_RETURN_IF_ERROR(ParseRoot(reader, root, &c));
  SortTables(&c);
  return c;
}

Result<SloConfig> LoadSloConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("slo config '" + path + "': cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError("slo config '" + path + "': read failed");
  return ParseSloConfig(ss.str(), path);
}

Status CheckModelFiles(const SloConfig& config, std::string_view source_name) {
  for (size_t i = 0; i < config.models.size(); ++i) {
    const ModelEntry& m = config.models[i];
    if (m.remote() || m.path.empty()) continue;
    std::string problem;
    std::error_code ec;
    const auto st = std::filesystem::status(m.path, ec);
    if (st.type() == std::filesystem::file_type::not_found) {
      problem = "does not exist";
    } else if (ec) {
      problem = "cannot be read: " + ec.message();
    } else if (st.type() == std::filesystem::file_type::directory) {
      problem = "is a directory, not a file";
    } else if (st.type() != std::filesystem::file_type::regular) {
      problem = "is not a regular file";
    } else if (std::ifstream in(m.path, std::ios::binary); !in) {
      problem = std::string("cannot be read: ") + std::strerror(errno);
    }
    if (problem.empty()) continue;
    return InvalidArgument(std::string(source_name) +
                           (m.source_line > 0 ? ":" + std::to_string(m.source_line) : "") +
                           ": models[" + std::to_string(i) + "] ('" + m.name + "').path: '" +
                           m.path + "' " + problem);
  }
  return Status::Ok();
}

Result<RequestBudget> Resolve(const SloConfig& config, const RequestSloFields& fields,
                              const TargetBoard* targets) {
  const std::string class_name =
      fields.slo_class.empty() ? config.default_class : Lower(fields.slo_class);
  const SloClass* cls = config.FindClass(class_name);
  if (cls == nullptr) {
    std::string known;
    for (const SloClass& c : config.classes) known += (known.empty() ? "" : ", ") + c.name;
    return InvalidArgument("slo_class: unknown class '" + Echo(fields.slo_class) +
                           "' (known: " + known + ")");
  }
  SloClass in_force;
  if (targets != nullptr) {
    in_force = targets->Apply(*cls);
    cls = &in_force;
  }
  double multiplier = 1.0;
  if (!fields.user_role.empty()) {
    const auto m = config.RoleMultiplier(Lower(fields.user_role));
    if (!m) {
      std::string known;
      for (const auto& [name, _] : config.roles) known += (known.empty() ? "" : ", ") + name;
      return InvalidArgument("user_role: unknown role '" + Echo(fields.user_role) +
                             "' (known: " + known + ")");
    }
    multiplier = *m;
  }
  if (fields.deadline_ms) {
    const double d = *fields.deadline_ms;
    if (!std::isfinite(d) || d <= 0 || d > kMaxBudgetMs) {
      return InvalidArgument("deadline_ms: value " + Num(d) + " is outside (0, " +
                             Num(kMaxBudgetMs) + "]");
    }
  }
  RequestBudget b;
  b.slo_class = cls->name;
  b.priority = cls->priority;
  b.multiplier = multiplier;
  b.allow_context_trim = fields.allow_context_trim;
  if (fields.deadline_ms) {
    b.e2e_budget_ms = *fields.deadline_ms;
    b.deadline_ms = *fields.deadline_ms;
  } else if (cls->e2e_p95_ms) {
    b.e2e_budget_ms = *cls->e2e_p95_ms * multiplier;
  }
  if (cls->tpot_p95_ms) b.tpot_budget_ms = *cls->tpot_p95_ms * multiplier;
  if (cls->ttfa_p95_ms) {
    b.ttfa_budget_ms = *cls->ttfa_p95_ms * multiplier;
    if (b.e2e_budget_ms) b.ttfa_budget_ms = std::min(*b.ttfa_budget_ms, *b.e2e_budget_ms);
  }
  // The first-token budget: the TTFT target, else the TTFA target (the answer's first token
  // comes no earlier than the first token), else the e2e budget (a class has one of the
  // three, validated).
  if (cls->ttft_p95_ms || cls->ttfa_p95_ms) {
    b.ttft_budget_ms = (cls->ttft_p95_ms ? *cls->ttft_p95_ms : *cls->ttfa_p95_ms) * multiplier;
    if (b.e2e_budget_ms) b.ttft_budget_ms = std::min(b.ttft_budget_ms, *b.e2e_budget_ms);
  } else {
    b.ttft_budget_ms = *b.e2e_budget_ms;
  }
  return b;
}

}  // namespace lifeline::slo
