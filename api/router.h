// The route table (method, path, public or key-protected), API-key checking, CORS headers and
// the handlers of the small endpoints (/health, /ready, /v1/models[/{id}], /metrics). Generation
// routes are only matched here; the connection code runs them because they stream.
//
// Routes: POST /v1/completions, POST /v1/chat/completions, POST /apply-template (a chat body
// -> {"prompt": the rendered template}), POST /tokenize and /detokenize (token_endpoints.h),
// POST /infill (llama.cpp's fill-in-the-middle route: a text completion of input_prefix /
// input_suffix), POST /v1/embeddings and POST /v1/rerank (also /rerank, llama.cpp's path;
// embeddings_api.h),
// GET /v1/models, GET /v1/models/{id} (one model object; the id is the rest of the path, '/'
// included, compared literally: no percent-decoding), GET /health and /livez (always 200
// while the process answers), GET /ready and /readyz (200 when the engine is ready and the
// server is not draining, else 503 type "unavailable"), GET /metrics, GET /v1/slo,
// GET / and /dashboard (the dashboard page, public: it holds no data) and GET /v1/dashboard
// (the state the page polls; api/dashboard.h).
// HEAD is accepted wherever GET is (the caller sends GET's status and headers, no body).
// A known path with another method is 405 (with Allow); anything else is 404.
//
// Auth: with API keys configured every route except health, readiness and the dashboard page
// needs exactly one
// `Authorization: Bearer <key>` header naming one of them; keys compare case-sensitively in
// time independent of where the first mismatch is. CORS is off unless origins are
// allow-listed; an allowed Origin is echoed ("*" only when the list holds "*"; never with
// credentials).
//
// Ownership: the table is static and immutable. Thread-safety: pure functions. Failure:
// std::optional<ApiError> / HttpResponse values.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "api/serving_api.h"
#include "api/http_message.h"
#include "api/server_metrics.h"

namespace lifeline::api {

enum class Route : uint8_t {
  kCompletions, kChatCompletions, kModels, kModel, kHealth, kReady, kMetrics, kSlo,
  kApplyTemplate, kTokenize, kDetokenize, kInfill, kDashboardPage, kDashboardState, kResponses,
  kMessages, kOutcomes, kEconomics, kEmbeddings, kRerank
};

// A path ending in "{id}" is a prefix route: it matches the text before "{id}" followed by a
// non-empty rest, the id. The pattern itself is the metrics label, so ids never become labels.
inline constexpr std::string_view kIdParam = "{id}";

struct RouteSpec {
  std::string_view path;     // exact path, or a pattern ending in kIdParam
  std::string_view method;
  Route route;
  bool public_access;  // reachable without the API key (health, readiness, the page)
};

std::span<const RouteSpec> RouteTable();

struct RouteMatch {
  const RouteSpec* spec = nullptr;  // set on success
  std::optional<ApiError> error;    // 404 unknown path, 405 known path with another method
  std::string_view label;           // metrics label: the route path, or "other"
  std::string allow;                // for 405: the methods the path accepts
  std::string_view id;              // a prefix route's id (a view into `target`)
};

// `target` may carry a query string; it is ignored for matching. HEAD matches GET routes.
RouteMatch MatchRoute(std::string_view method, std::string_view target);

// The origin form ("/path?query") of a request target: an absolute-form target
// ("http://host:port/path?query", any scheme, RFC 9112 3.2.2) loses its scheme and
// authority ("/" when it has no path); any other target is returned as it is.
std::string OriginFormTarget(std::string_view target);

// A client's X-Request-Id is kept when it is 1..128 characters of [A-Za-z0-9._:-]: safe to
// echo in a header and to write into logs unescaped. Anything else is ignored.
inline constexpr size_t kMaxClientRequestIdBytes = 128;
bool ValidClientRequestId(std::string_view id);

// Compares in time that depends only on `expected`'s length.
bool ConstantTimeEquals(std::string_view given, std::string_view expected);

// `authorization` holds every Authorization header value of the request. Returns 401
// (authentication_error) unless exactly one is "Bearer <key>" for one of `api_keys`; no keys
// means no authentication.
std::optional<ApiError> CheckApiKey(std::span<const std::string> api_keys,
                                    std::span<const std::string_view> authorization);

// `serve --cors-origin` values: "*" or an origin as browsers send it, "http(s)://host[:port]"
// (no path, no trailing slash, no userinfo). InvalidArgument naming the flag otherwise.
Status CheckCorsOrigin(std::string_view origin);
// `serve --api-key-file` contents: one key per line; blank lines and lines starting with '#'
// are skipped, surrounding spaces trimmed. A key is 1..256 visible ASCII characters without
// spaces. Errors name `source` and the line.
Result<std::vector<std::string>> ParseApiKeys(std::string_view text, std::string_view source);

// CORS headers for an allow-listed Origin (empty when off or not allowed): the origin echoed
// (or "*" when "*" is on the list) and the response headers scripts may read.
std::vector<std::pair<std::string, std::string>> CorsHeaders(
    std::optional<std::string_view> origin, std::span<const std::string> allowed_origins);
// A 204 preflight answer for OPTIONS on a known path from an allowed origin; nullopt otherwise
// (then OPTIONS is an ordinary 405). Allowed request headers: Authorization, Content-Type,
// X-Request-Id, X-SLO-Class, X-User-Role, and the X-Stainless-* headers the OpenAI SDKs send
// when `requested_headers` (Access-Control-Request-Headers) names them.
std::optional<HttpResponse> PreflightResponse(
    std::string_view target, std::optional<std::string_view> origin,
    std::span<const std::string> allowed_origins,
    std::optional<std::string_view> requested_headers = std::nullopt);

HttpResponse HealthResponse();
HttpResponse ReadyResponse(bool engine_ready, bool draining, const std::string& reason = "");
HttpResponse ModelsResponse(const std::vector<ModelInfo>& models);
// GET /v1/models/{id}: the entry of `models` with that id (the shape of a /v1/models entry),
// else 404 model_not_found naming `model`.
HttpResponse ModelResponse(const std::vector<ModelInfo>& models, std::string_view id);
HttpResponse MetricsResponse(const ServerMetrics& metrics, const std::string& engine_text);
// GET /v1/slo: the engine's SLO status JSON, or 404 when the engine has no SLO control plane.
HttpResponse SloResponse(const std::optional<std::string>& status_json);

}  // namespace lifeline::api
