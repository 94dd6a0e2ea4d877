#include "server/router.h"

#include "server/openai.h"

namespace lifeline::server {

namespace {

constexpr RouteSpec kRoutes[] = {
    {"/v1/completions", "POST", Route::kCompletions, false},
    {"/v1/chat/completions", "POST", Route::kChatCompletions, false},
    {"/v1/models", "GET", Route::kModels, false},
    {"/health", "GET", Route::kHealth, true},
    {"/livez", "GET", Route::kHealth, true},
    {"/ready", "GET", Route::kReady, true},
    {"/readyz", "GET", Route::kReady, true},
    {"/metrics", "GET", Route::kMetrics, false},
    {"/v1/slo", "GET", Route::kSlo, false},
    {"/apply-template", "POST", Route::kApplyTemplate, false},
};

std::string_view PathOf(std::string_view target) {
  return target.substr(0, target.find_first_of("?#"));
}

bool IEqualsAscii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

ApiError Unauthorized(std::string message) {
  return ApiError{401, "authentication_error", "invalid_api_key", std::move(message), "", 0};
}

}  // namespace

std::span<const RouteSpec> RouteTable() { return kRoutes; }

HttpResponse SloResponse(const std::optional<std::string>& status_json) {
  if (!status_json) {
    return ErrorResponse(NotFoundError("", "this engine has no SLO control plane", "not_found"));
  }
  HttpResponse r;
  r.body = *status_json;
  return r;
}

RouteMatch MatchRoute(std::string_view method, std::string_view target) {
  const std::string_view path = PathOf(target);
  RouteMatch m;
  for (const RouteSpec& r : kRoutes) {
    if (r.path != path) continue;
    m.label = r.path;
    if (r.method == method) {
      m.spec = &r;
      m.error.reset();
      return m;
    }
    if (!m.allow.empty()) m.allow += ", ";
    m.allow += r.method;
  }
  if (!m.label.empty()) {
    m.error = ApiError{405, "invalid_request_error", "method_not_allowed",
                       "method " + std::string(method.substr(0, 32)) + " is not allowed on " +
                           std::string(path) + "; allowed: " + m.allow,
                       "", 0};
    return m;
  }
  m.label = "other";
  m.error = NotFoundError("", "no route for " + std::string(method.substr(0, 32)) + " " +
                                  std::string(path.substr(0, 256)),
                          "route_not_found");
  return m;
}

bool ConstantTimeEquals(std::string_view given, std::string_view expected) {
  // Loop bound and memory accesses depend on `expected` only; a length mismatch is folded in
  // rather than returned early.
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

std::optional<ApiError> CheckApiKey(std::string_view api_key,
                                    std::span<const std::string_view> authorization) {
  if (api_key.empty()) return std::nullopt;
  if (authorization.empty()) {
    return Unauthorized("missing API key: send 'Authorization: Bearer <key>'");
  }
  if (authorization.size() > 1) {
    return Unauthorized("more than one Authorization header");
  }
  constexpr std::string_view kScheme = "Bearer ";
  const std::string_view value = authorization.front();
  if (value.size() < kScheme.size() || !IEqualsAscii(value.substr(0, kScheme.size()), kScheme)) {
    return Unauthorized("Authorization must use the Bearer scheme");
  }
  if (!ConstantTimeEquals(value.substr(kScheme.size()), api_key)) {
    return Unauthorized("invalid API key");
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> CorsHeaders(
    std::optional<std::string_view> origin, std::span<const std::string> allowed_origins) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!origin || allowed_origins.empty()) return headers;
  for (const std::string& allowed : allowed_origins) {
    if (allowed == *origin) {
      headers.emplace_back("Access-Control-Allow-Origin", allowed);
      headers.emplace_back("Vary", "Origin");
      break;
    }
  }
  return headers;
}

std::optional<HttpResponse> PreflightResponse(std::string_view target,
                                              std::optional<std::string_view> origin,
                                              std::span<const std::string> allowed_origins) {
  auto cors = CorsHeaders(origin, allowed_origins);
  if (cors.empty()) return std::nullopt;
  const std::string_view path = PathOf(target);
  std::string methods;
  for (const RouteSpec& r : kRoutes) {
    if (r.path != path) continue;
    if (!methods.empty()) methods += ", ";
    methods += r.method;
  }
  if (methods.empty()) return std::nullopt;
  HttpResponse r;
  r.status = 204;
  r.content_type.clear();
  r.headers = std::move(cors);
  r.headers.emplace_back("Access-Control-Allow-Methods", methods);
  r.headers.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type");
  r.headers.emplace_back("Access-Control-Max-Age", "600");
  return r;
}

HttpResponse HealthResponse() { return JsonResponse(200, {{"status", "ok"}}); }

HttpResponse ReadyResponse(bool engine_ready, bool draining) {
  if (draining) {
    return ErrorResponse(UnavailableError("server is shutting down", "shutting_down", 0));
  }
  if (!engine_ready) {
    return ErrorResponse(UnavailableError("engine is not ready (model loading or engine loop "
                                          "not running)",
                                          "not_ready", 1));
  }
  return JsonResponse(200, {{"status", "ready"}});
}

HttpResponse ModelsResponse(const std::vector<ModelInfo>& models) {
  nlohmann::json data = nlohmann::json::array();
  for (const ModelInfo& m : models) {
    nlohmann::json entry = {{"id", m.id},
                            {"object", "model"},
                            {"created", m.created_unix_s},
                            {"owned_by", m.owned_by}};
    if (m.context_length_tokens > 0) {
      entry["meta"] = {{"context_length", m.context_length_tokens}};
    }
    if (!m.chat_template_source.empty()) {
      entry["meta"]["chat_template"] = {{"source", m.chat_template_source},
                                        {"name", m.chat_template_name}};
    }
    data.push_back(std::move(entry));
  }
  return JsonResponse(200, {{"object", "list"}, {"data", std::move(data)}});
}

HttpResponse MetricsResponse(const ServerMetrics& metrics, const std::string& engine_text) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics.PrometheusText();
  r.body += engine_text;
  if (!r.body.empty() && r.body.back() != '\n') r.body += '\n';
  return r;
}

}  // namespace lifeline::server
