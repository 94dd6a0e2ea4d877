// The live dashboard: GET / and GET /dashboard answer one self-contained HTML page (its CSS
// and JavaScript inline, charts drawn as SVG by the page itself; it fetches nothing but this
// server's API), and GET /v1/dashboard answers the state the page polls about once a second:
//
//   {"object": "dashboard.state", "instance": "<hex, new per server start>",
//    "unix_ms": <wall clock>, "ready": bool, "draining": bool,
//    "slo": <the GET /v1/slo object of this instant, or null>,
//    "models": [...], "outcomes": [...], "attainment": [...]   (the engine's, see ServingApi),
//    "server": {"accepted", "completed", "errored", "cancelled", "in_flight",
//               "responses_429", "responses_503", "open_connections"},
//    "recent": [the last 64 requests' splits, api/recent_requests.h],
//    "economics": <the GET /v1/economics object, or null> (docs/economics.md)}
//
// Polling with validators: the answer carries an ETag computed over everything except the
// clock fields (unix_ms, slo.now_ms, classes' level_age_ms and healthy_ticks, events'
// age_ms) and server.open_connections; a request whose If-None-Match names it gets 304 with no body. Each poll is one
// small bounded response on a keep-alive connection, so a stalled browser holds nothing but
// its socket (the connection's write deadline closes it), unlike a push stream that would
// have to buffer for it.
//
// The page is public (it holds no data); the state needs the API key like every other data
// route. docs/dashboard.md describes the page and the state.
//
// Ownership: values. Thread-safety: pure functions of their inputs (the inputs lock
// themselves). Failure: none; an engine without DashboardJson gives nulls and empty lists.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/outcomes.h"
#include "api/serving_api.h"
#include "api/http_message.h"
#include "api/recent_requests.h"
#include "api/server_metrics.h"

namespace lifeline::api {

// The page (generated at build time from api/dashboard/).
std::string_view DashboardPageHtml();
// 200 text/html with a Content-Security-Policy that forbids loading anything from elsewhere.
HttpResponse DashboardPageResponse();

struct DashboardSources {
  const ServingApi* engine = nullptr;
  const ServerMetrics* metrics = nullptr;
  const RecentRequests* recent = nullptr;
  const EconomicsApi* economics = nullptr;  // null: "economics" is null
  uint64_t instance = 0;  // random per server start: the page resets its rates on a change
  bool draining = false;
};
nlohmann::json DashboardState(const DashboardSources& sources);

// A strong validator over the state minus its clock fields (see above), quoted.
std::string DashboardEtag(const nlohmann::json& state);
// True when one of the comma-separated entity tags of `if_none_match` (W/ prefixes ignored)
// is `etag`, or it is "*".
bool EtagMatches(std::string_view if_none_match, std::string_view etag);
// 200 with the state and its ETag, or 304 (no body) when `if_none_match` matches.
HttpResponse DashboardStateResponse(const nlohmann::json& state,
                                    std::optional<std::string_view> if_none_match);

}  // namespace lifeline::api
