#include "api/router.h"

#include "api/errors.h"
#include "api/openai.h"

namespace lifeline::api {

namespace {

constexpr RouteSpec kRoutes[] = {
    {"/v1/completions", "POST", Route::kCompletions, false},
    {"/v1/chat/completions", "POST", Route::kChatCompletions, false},
    {"/v1/responses", "POST", Route::kResponses, false},
    {"/v1/messages", "POST", Route::kMessages, false},
    {"/v1/embeddings", "POST", Route::kEmbeddings, false},
    {"/v1/rerank", "POST", Route::kRerank, false},
    {"/rerank", "POST", Route::kRerank, false},  // llama.cpp's path
    {"/v1/models", "GET", Route::kModels, false},
    {"/v1/models/{id}", "GET", Route::kModel, false},
    {"/health", "GET", Route::kHealth, true},
    {"/livez", "GET", Route::kHealth, true},
    {"/ready", "GET", Route::kReady, true},
    {"/readyz", "GET", Route::kReady, true},
    {"/metrics", "GET", Route::kMetrics, false},
    {"/v1/slo", "GET", Route::kSlo, false},
    {"/v1/outcomes", "POST", Route::kOutcomes, false},
    {"/v1/economics", "GET", Route::kEconomics, false},
    {"/apply-template", "POST", Route::kApplyTemplate, false},
    {"/tokenize", "POST", Route::kTokenize, false},
    {"/detokenize", "POST", Route::kDetokenize, false},
    {"/infill", "POST", Route::kInfill, false},
    {"/", "GET", Route::kDashboardPage, true},
    {"/dashboard", "GET", Route::kDashboardPage, true},
    {"/v1/dashboard", "GET", Route::kDashboardState, false},
};

// Exact paths compare whole; a "{id}" pattern takes any non-empty rest of the path as the id
// (ids such as "org/model" contain '/'; the lookup decides whether it names anything).
bool PathMatches(const RouteSpec& r, std::string_view path, std::string_view* id) {
  if (!r.path.ends_with(kIdParam)) return r.path == path;
  const std::string_view prefix = r.path.substr(0, r.path.size() - kIdParam.size());
  if (!path.starts_with(prefix) || path.size() == prefix.size()) return false;
  *id = path.substr(prefix.size());
  return true;
}

// "GET" also allows HEAD (answered as GET without the body).
void AddAllowed(std::string* allow, std::string_view method) {
  if (!allow->empty()) *allow += ", ";
  *allow += method;
  if (method == "GET") *allow += ", HEAD";
}

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
  return MakeError(ErrorKind::kUnauthorized, "invalid_api_key", std::move(message));
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
  const std::string_view as_method = method == "HEAD" ? std::string_view("GET") : method;
  RouteMatch m;
  for (const RouteSpec& r : kRoutes) {
    std::string_view id;
    if (!PathMatches(r, path, &id)) continue;
    m.label = r.path;
    if (r.method == as_method) {
      m.spec = &r;
      m.id = id;
      m.error.reset();
      return m;
    }
    AddAllowed(&m.allow, r.method);
  }
  if (!m.label.empty()) {
    m.error = MakeError(ErrorKind::kMethodNotAllowed, "method_not_allowed",
                        "method " + std::string(method.substr(0, 32)) + " is not allowed on " +
                            std::string(path) + "; allowed: " + m.allow);
    return m;
  }
  m.label = "other";
  m.error = NotFoundError("", "no route for " + std::string(method.substr(0, 32)) + " " +
                                  std::string(path.substr(0, 256)),
                          "route_not_found");
  return m;
}

std::string OriginFormTarget(std::string_view target) {
  // scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ), then "://".
  const size_t sep = target.find("://");
  if (sep == std::string_view::npos || sep == 0) return std::string(target);
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (!alpha(target[0])) return std::string(target);
  for (size_t i = 1; i < sep; ++i) {
    const char c = target[i];
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.') {
      return std::string(target);
    }
  }
  const std::string_view rest = target.substr(sep + 3);
  const size_t path = rest.find_first_of("/?#");
  if (path == std::string_view::npos) return "/";
  if (rest[path] == '/') return std::string(rest.substr(path));
  return "/" + std::string(rest.substr(path));
}

bool ValidClientRequestId(std::string_view id) {
  if (id.empty() || id.size() > kMaxClientRequestIdBytes) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
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

std::optional<ApiError> CheckApiKey(std::span<const std::string> api_keys,
                                    std::span<const std::string_view> authorization) {
  if (api_keys.empty()) return std::nullopt;
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
  // Every key is compared (no early exit), so the time does not tell which key was close.
  bool match = false;
  for (const std::string& key : api_keys) {
    match |= ConstantTimeEquals(value.substr(kScheme.size()), key);
  }
  if (!match) return Unauthorized("invalid API key");
  return std::nullopt;
}

namespace {

// Response headers a browser script may read (CORS hides the rest).
constexpr std::string_view kExposedHeaders =
    "X-Request-Id, X-Served-Model, Server-Timing, Retry-After, X-Lifeline-Truncated, "
    "X-Lifeline-Thinking, ETag, X-Lifeline-Now-Ms";
// Request headers a preflight always allows: the API's own and the OpenAI SDK's.
constexpr std::string_view kAllowedHeaders =
    "Authorization, Content-Type, X-Request-Id, X-SLO-Class, X-User-Role, If-None-Match";
constexpr std::string_view kStainlessPrefix = "x-stainless-";
constexpr size_t kMaxRequestedHeaderBytes = 64;

bool IsTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_' || c == '.';
}

// The SDK's X-Stainless-* headers named in Access-Control-Request-Headers (each a plain
// token of bounded length), so its preflight passes without allowing arbitrary headers.
std::string StainlessHeaders(std::optional<std::string_view> requested) {
  std::string out;
  if (!requested) return out;
  std::string_view rest = *requested;
  size_t n = 0;
  while (!rest.empty() && n < 32) {
    const size_t comma = rest.find(',');
    std::string_view name = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    if (name.size() <= kStainlessPrefix.size() || name.size() > kMaxRequestedHeaderBytes ||
        !IEqualsAscii(name.substr(0, kStainlessPrefix.size()), kStainlessPrefix)) {
      continue;
    }
    bool token = true;
    for (char c : name) token &= IsTokenChar(c);
    if (!token) continue;
    out += ", ";
    out += name;
    ++n;
  }
  return out;
}

}  // namespace

Status CheckCorsOrigin(std::string_view origin) {
  if (origin == "*") return Status::Ok();
  auto bad = [&](std::string_view why) {
    return InvalidArgument("--cors-origin: '" + std::string(origin.substr(0, 256)) + "' " +
                           std::string(why) + " (expected * or http(s)://host[:port])");
  };
  std::string_view rest;
  if (origin.starts_with("http://")) {
    rest = origin.substr(7);
  } else if (origin.starts_with("https://")) {
    rest = origin.substr(8);
  } else {
    return bad("has no http:// or https:// scheme");
  }
  if (rest.empty()) return bad("has no host");
  if (origin.size() > 512) return bad("is longer than 512 bytes");
  for (char c : rest) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == ':' || c == '[' || c == ']';
    if (!ok) return bad("may hold only a host and a port");
  }
  return Status::Ok();
}

Result<std::vector<std::string>> ParseApiKeys(std::string_view text, std::string_view source) {
  constexpr size_t kMaxKeyBytes = 256;
  constexpr size_t kMaxKeys = 4096;
  std::vector<std::string> keys;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.remove_suffix(1);
    }
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = std::string(source) + " line " + std::to_string(line_no);
    if (line.size() > kMaxKeyBytes) {
      return InvalidArgument(where + ": key is " + std::to_string(line.size()) +
                             " bytes; at most " + std::to_string(kMaxKeyBytes));
    }
    for (char c : line) {
      if (c <= ' ' || c >= 0x7f) {
        return InvalidArgument(where + ": a key is visible ASCII without spaces");
      }
    }
    if (keys.size() == kMaxKeys) {
      return InvalidArgument(std::string(source) + ": more than " + std::to_string(kMaxKeys) +
                             " keys");
    }
    keys.emplace_back(line);
  }
  if (keys.empty()) return InvalidArgument(std::string(source) + ": no key in the file");
  return keys;
}

std::vector<std::pair<std::string, std::string>> CorsHeaders(
    std::optional<std::string_view> origin, std::span<const std::string> allowed_origins) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!origin || allowed_origins.empty()) return headers;
  for (const std::string& allowed : allowed_origins) {
    if (allowed == "*") {
      // Any origin: no credentials are involved (the API key travels in a header the
      // preflight allows), so the plain wildcard is what browsers expect.
      headers.emplace_back("Access-Control-Allow-Origin", "*");
      break;
    }
    if (allowed == *origin) {
      headers.emplace_back("Access-Control-Allow-Origin", allowed);
      headers.emplace_back("Vary", "Origin");
      break;
    }
  }
  if (!headers.empty()) headers.emplace_back("Access-Control-Expose-Headers", kExposedHeaders);
  return headers;
}

std::optional<HttpResponse> PreflightResponse(std::string_view target,
                                              std::optional<std::string_view> origin,
                                              std::span<const std::string> allowed_origins,
                                              std::optional<std::string_view> requested_headers) {
  auto cors = CorsHeaders(origin, allowed_origins);
  if (cors.empty()) return std::nullopt;
  const std::string_view path = PathOf(target);
  std::string methods;
  for (const RouteSpec& r : kRoutes) {
    std::string_view id;
    if (PathMatches(r, path, &id)) AddAllowed(&methods, r.method);
  }
  if (methods.empty()) return std::nullopt;
  HttpResponse r;
  r.status = 204;
  r.content_type.clear();
  r.headers = std::move(cors);
  r.headers.emplace_back("Access-Control-Allow-Methods", methods);
  r.headers.emplace_back("Access-Control-Allow-Headers",
                         std::string(kAllowedHeaders) + StainlessHeaders(requested_headers));
  r.headers.emplace_back("Access-Control-Max-Age", "600");
  return r;
}

HttpResponse HealthResponse() { return JsonResponse(200, {{"status", "ok"}}); }

HttpResponse ReadyResponse(bool engine_ready, bool draining, const std::string& reason) {
  if (draining) {
    // Retry-After: another instance (or this one, restarted) may take the request then.
    return ErrorResponse(UnavailableError("server is shutting down", "shutting_down", 1));
  }
  if (!engine_ready) {
    return ErrorResponse(UnavailableError(
        reason.empty() ? "engine is not ready (model loading or engine loop not running)"
                       : "engine is not ready: " + reason,
        "not_ready", 1));
  }
  return JsonResponse(200, {{"status", "ready"}});
}

namespace {

nlohmann::json ModelJson(const ModelInfo& m) {
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
  if (!m.reasoning_format.empty()) entry["meta"]["reasoning_format"] = m.reasoning_format;
  if (!m.tool_call_format.empty()) {
    entry["meta"]["tool_call_format"] = m.tool_call_format;
  }
  // What /v1/embeddings' `dimensions` may ask for, and whether /v1/rerank serves the model.
  if (m.embedding_length > 0) entry["meta"]["embedding_length"] = m.embedding_length;
  if (!m.pooling.empty()) entry["meta"]["pooling"] = m.pooling;
  if (m.rerank_outputs > 0) entry["meta"]["rerank_outputs"] = m.rerank_outputs;
  return entry;
}

}  // namespace

HttpResponse ModelsResponse(const std::vector<ModelInfo>& models) {
  nlohmann::json data = nlohmann::json::array();
  for (const ModelInfo& m : models) data.push_back(ModelJson(m));
  return JsonResponse(200, {{"object", "list"}, {"data", std::move(data)}});
}

HttpResponse ModelResponse(const std::vector<ModelInfo>& models, std::string_view id) {
  for (const ModelInfo& m : models) {
    if (m.id == id) return JsonResponse(200, ModelJson(m));
  }
  return ErrorResponse(NotFoundError("model",
                                     "model '" + std::string(id.substr(0, 256)) +
                                         "' does not exist (ids are compared literally, without "
                                         "percent-decoding; see GET /v1/models)",
                                     "model_not_found"));
}

HttpResponse MetricsResponse(const ServerMetrics& metrics, const std::string& engine_text) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics.PrometheusText();
  r.body += engine_text;
  if (!r.body.empty() && r.body.back() != '\n') r.body += '\n';
  return r;
}

}  // namespace lifeline::api
