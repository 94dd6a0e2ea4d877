#include "api/dashboard.h"

#include <chrono>
#include <cstdio>

namespace lifeline::api {

namespace {

using nlohmann::json;

// Generation routes (every route whose request the engine serves): the dashboard's 429 / 503
// counts are of these only (its own polls and scrapes are not load).
constexpr std::string_view kGenerationRoutes[] = {
    "/v1/completions", "/v1/chat/completions", "/infill",     "/v1/responses",
    "/v1/messages",    "/v1/embeddings",       "/v1/rerank", "/rerank"};

// Inline script and style only; connect-src is open because the page may be pointed at
// another Lifeline server (CORS decides there). Nothing else may be fetched or embedded.
constexpr std::string_view kPageCsp =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; connect-src *; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

json ServerJson(const ServerMetrics& metrics) {
  const LedgerSnapshot l = metrics.Ledger();
  uint64_t r429 = 0, r503 = 0;
  for (std::string_view route : kGenerationRoutes) {
    r429 += metrics.ResponseCount(route, 429);
    r503 += metrics.ResponseCount(route, 503);
  }
  return {{"accepted", l.accepted},   {"completed", l.completed}, {"errored", l.errored},
          {"cancelled", l.cancelled}, {"in_flight", l.in_flight()},
          {"responses_429", r429},    {"responses_503", r503},
          {"open_connections", metrics.OpenConnections()}};
}

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

void EraseIn(json* array, const char* key) {
  if (!array->is_array()) return;
  for (json& item : *array) {
    if (item.is_object()) item.erase(key);
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

HttpResponse DashboardPageResponse() {
  HttpResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::string(DashboardPageHtml());
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.headers.emplace_back("Content-Security-Policy", std::string(kPageCsp));
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  return r;
}

json DashboardState(const DashboardSources& s) {
  json state = {{"object", "dashboard.state"}};
  char instance[17];
  std::snprintf(instance, sizeof instance, "%016llx", static_cast<unsigned long long>(s.instance));
  state["instance"] = instance;
  state["unix_ms"] = UnixMs();
  state["ready"] = s.engine != nullptr && s.engine->Ready();
  state["draining"] = s.draining;
  std::optional<json> engine;
  if (s.engine != nullptr) engine = s.engine->DashboardJson();
  const bool has = engine && engine->is_object();
  auto part = [&](const char* key, json fallback) {
    return has && engine->contains(key) ? (*engine)[key] : fallback;
  };
  state["slo"] = part("slo", nullptr);
  state["models"] = part("models", json::array());
  state["outcomes"] = part("outcomes", json::array());
  state["attainment"] = part("attainment", json::array());
  state["server"] = s.metrics != nullptr ? ServerJson(*s.metrics) : json(nullptr);
  state["recent"] = s.recent != nullptr ? s.recent->Json() : json::array();
  state["economics"] = s.economics != nullptr ? s.economics->EconomicsJson() : json(nullptr);
  return state;
}

std::string DashboardEtag(const json& state) {
  json stable = state;
  stable.erase("unix_ms");
  // The page's own keep-alive connection opening and closing is not news.
  if (stable.contains("server") && stable["server"].is_object()) {
    stable["server"].erase("open_connections");
  }
  if (stable.contains("slo") && stable["slo"].is_object()) {
    json& slo = stable["slo"];
    slo.erase("now_ms");
    if (slo.contains("classes")) {
      EraseIn(&slo["classes"], "level_age_ms");
      EraseIn(&slo["classes"], "healthy_ticks");
    }
    if (slo.contains("events")) EraseIn(&slo["events"], "age_ms");
  }
  char tag[24];
  std::snprintf(tag, sizeof tag, "\"%016llx\"",
                static_cast<unsigned long long>(Fnv1a64(DumpJson(stable))));
  return tag;
}

bool EtagMatches(std::string_view if_none_match, std::string_view etag) {
  std::string_view rest = if_none_match;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view tag = Trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (tag == "*") return true;
    if (tag.starts_with("W/")) tag.remove_prefix(2);  // weak comparison (RFC 9110 13.1.2)
    if (tag == etag) return true;
  }
  return false;
}

HttpResponse DashboardStateResponse(const json& state,
                                    std::optional<std::string_view> if_none_match) {
  const std::string etag = DashboardEtag(state);
  HttpResponse r;
  if (if_none_match && EtagMatches(*if_none_match, etag)) {
    r.status = 304;
    r.content_type.clear();
  } else {
    r.body = DumpJson(state);
  }
  r.headers.emplace_back("ETag", etag);
  r.headers.emplace_back("Cache-Control", "no-cache");
  // The server's SLO clock at this answer, also on a 304: what the page shows was confirmed
  // current at this instant even when nothing changed.
  if (auto slo = state.find("slo"); slo != state.end() && slo->is_object()) {
    if (auto now = slo->find("now_ms"); now != slo->end() && now->is_number()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3f", now->get<double>());
      r.headers.emplace_back("X-Lifeline-Now-Ms", buf);
    }
  }
  return r;
}

}  // namespace lifeline::api
