// The economics plane's boundary: what the HTTP front end hands to whatever learns the latency
// cliff from the server's own traffic (economics/live_economics.h), and `POST /v1/outcomes`,
// the application's side of that story.
//
// Every finished generation request (the request log's entry, request_log.h) goes to
// OnFinished. The calling application knows what the server cannot -- the user abandoned,
// completed the session, clicked, converted -- and posts it:
//
//   POST /v1/outcomes  {"events": [{"request_id": "...", "type": "clicked", "time": 1765000000000},
//                                  {"session_id": "...", "type": "abandoned"}]}
//
// request_id is the X-Request-Id the answer carried; session_id the X-Session-Id the request
// sent (the session's latest request takes the event). type: abandoned | completed | clicked |
// converted; time (unix ms) optional. At most kMaxOutcomeEvents per call; ids are 1..128
// characters of [A-Za-z0-9._:-]. Unknown or expired ids are counted, not errors: the answer is
// {"object": "outcomes.result", "accepted": N, "joined": J, "unknown": U}.
//
// Ownership: the server borrows the EconomicsApi (it must outlive the HttpServer).
// Thread-safety: every method may be called from any thread, concurrently. Failure:
// ParseOutcomes names the field and the limit (400); the rest does not fail.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/errors.h"
#include "api/http_message.h"
#include "api/openai.h"
#include "api/request_log.h"

namespace lifeline::api {

inline constexpr size_t kMaxOutcomeEvents = 1000;

enum class OutcomeType : uint8_t { kAbandoned, kCompleted, kClicked, kConverted };
inline constexpr int kOutcomeTypes = 4;
std::string_view OutcomeTypeName(OutcomeType type);

struct OutcomeEvent {
  std::string request_id;  // one of request_id, session_id
  std::string session_id;
  OutcomeType type = OutcomeType::kAbandoned;
  std::optional<int64_t> time_unix_ms;
};

struct OutcomesResult {
  int64_t accepted = 0;
  int64_t joined = 0;   // matched a request still in the join window
  int64_t unknown = 0;  // no such request (never seen, or out of the window)
  // Per event, in order: the request it joined ("" when unknown). A session's event names
  // the request it went to, so the request log can record the join as it was made.
  std::vector<std::string> request_ids;
};

class EconomicsApi {
 public:
  virtual ~EconomicsApi() = default;
  // A generation request ended (completed, error, cancelled or refused).
  virtual void OnFinished(const RequestLogEntry& entry) = 0;
  virtual OutcomesResult PostOutcomes(const std::vector<OutcomeEvent>& events) = 0;
  // GET /v1/economics: the live estimate per class (docs/economics.md).
  virtual nlohmann::json EconomicsJson() const = 0;
  virtual std::string MetricsText() const = 0;
};

// The body of POST /v1/outcomes (after the shared JSON checks: UTF-8, depth, duplicate keys).
std::variant<std::vector<OutcomeEvent>, ApiError> ParseOutcomes(const nlohmann::json& body);

// {"object": "outcomes.result", "accepted", "joined", "unknown"}.
nlohmann::json OutcomesResultJson(const OutcomesResult& r);

// The whole POST /v1/outcomes exchange: content type, the shared JSON checks, ParseOutcomes,
// `economics.PostOutcomes`, then one request-log line per event when there is a log
// (OutcomeLogLine), so `lifeline analyze` joins them to their requests offline.
HttpResponse OutcomesResponse(EconomicsApi& economics, RequestLog* request_log,
                              std::optional<std::string_view> content_type,
                              std::string_view body, const RequestLimits& limits);
// {"event": "outcome", "id": the request it joined (null when unknown), "request_id" /
//  "session_id": as posted, "type", "time_unix_ms": as posted, else when it arrived}.
std::string OutcomeLogLine(const OutcomeEvent& event, const std::string& joined_request_id,
                           int64_t received_unix_ms);
// 404 economics_off: a server started without the economics plane.
HttpResponse EconomicsOffResponse();

}  // namespace lifeline::api
