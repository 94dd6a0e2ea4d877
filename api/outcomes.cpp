#include "api/outcomes.h"

#include <chrono>
#include <limits>

#include "api/router.h"

namespace lifeline::api {

std::string_view OutcomeTypeName(OutcomeType type) {
  switch (type) {
    case OutcomeType::kAbandoned: return "abandoned";
    case OutcomeType::kCompleted: return "completed";
    case OutcomeType::kClicked: return "clicked";
    case OutcomeType::kConverted: return "converted";
  }
  return "?";
}

namespace {

std::optional<OutcomeType> TypeOf(std::string_view name) {
  for (int t = 0; t < kOutcomeTypes; ++t) {
    if (OutcomeTypeName(static_cast<OutcomeType>(t)) == name) return static_cast<OutcomeType>(t);
  }
  return std::nullopt;
}

ApiError Bad(const std::string& param, const std::string& message) {
  return InvalidRequestError(param, message, "invalid_value");
}

// An id field: absent is fine (the caller checks that one of the two is there).
std::optional<ApiError> IdField(const nlohmann::json& event, const char* key,
                                const std::string& at, std::string* out) {
  auto it = event.find(key);
  if (it == event.end() || it->is_null()) return std::nullopt;
  const std::string param = at + "." + key;
  if (!it->is_string() || !ValidClientRequestId(it->get_ref<const std::string&>())) {
    return Bad(param, "'" + param + "' must be 1.." + std::to_string(kMaxClientRequestIdBytes) +
                          " characters of [A-Za-z0-9._:-]");
  }
  *out = it->get<std::string>();
  return std::nullopt;
}

}  // namespace

std::variant<std::vector<OutcomeEvent>, ApiError> ParseOutcomes(const nlohmann::json& body) {
  for (const auto& [key, value] : body.items()) {
    if (key != "events") return Bad(key, "unknown field '" + key + "' (expected 'events')");
  }
  auto events = body.find("events");
  if (events == body.end()) return Bad("events", "'events' is required: an array of events");
  if (!events->is_array()) return Bad("events", "'events' must be an array of events");
  if (events->size() > kMaxOutcomeEvents) {
    return InvalidRequestError("events",
                               "'events' has " + std::to_string(events->size()) +
                                   " entries; at most " + std::to_string(kMaxOutcomeEvents) +
                                   " per call",
                               "out_of_range");
  }
  std::vector<OutcomeEvent> out;
  out.reserve(events->size());
  for (size_t i = 0; i < events->size(); ++i) {
    const nlohmann::json& e = (*events)[i];
    const std::string at = "events[" + std::to_string(i) + "]";
    if (!e.is_object()) return Bad(at, "'" + at + "' must be an object {request_id | session_id, type, time}");
    for (const auto& [key, value] : e.items()) {
      if (key != "request_id" && key != "session_id" && key != "type" && key != "time") {
        return Bad(at + "." + key, "unknown field '" + at + "." + key +
                                       "' (expected request_id, session_id, type, time)");
      }
    }
    OutcomeEvent ev;
    if (auto err = IdField(e, "request_id", at, &ev.request_id)) return *err;
    if (auto err = IdField(e, "session_id", at, &ev.session_id)) return *err;
    if (ev.request_id.empty() == ev.session_id.empty()) {
      return Bad(at, "'" + at + "' needs exactly one of request_id and session_id");
    }
    auto type = e.find("type");
    if (type == e.end() || !type->is_string()) {
      return Bad(at + ".type", "'" + at + ".type' must be one of abandoned, completed, clicked, converted");
    }
    auto t = TypeOf(type->get_ref<const std::string&>());
    if (!t) {
      return Bad(at + ".type", "'" + at + ".type' must be one of abandoned, completed, clicked, converted");
    }
    ev.type = *t;
    if (auto time = e.find("time"); time != e.end() && !time->is_null()) {
      // Unix milliseconds between 2001 and 2286: a number in seconds is a unit mistake.
      if (!time->is_number() || time->get<double>() < 1e12 || time->get<double>() > 1e13) {
        return Bad(at + ".time", "'" + at + ".time' must be unix time in milliseconds");
      }
      ev.time_unix_ms = static_cast<int64_t>(time->get<double>());
    }
    out.push_back(std::move(ev));
  }
  return out;
}

HttpResponse OutcomesResponse(EconomicsApi& economics, RequestLog* request_log,
                              std::optional<std::string_view> content_type,
                              std::string_view body, const RequestLimits& limits) {
  if (auto err = CheckContentType(content_type)) return ErrorResponse(*err);
  nlohmann::json doc;
  if (auto err = ParseJsonObject(body, limits, &doc)) return ErrorResponse(*err);
  auto parsed = ParseOutcomes(doc);
  if (auto* err = std::get_if<ApiError>(&parsed)) return ErrorResponse(*err);
  const auto& events = std::get<std::vector<OutcomeEvent>>(parsed);
  const OutcomesResult result = economics.PostOutcomes(events);
  if (request_log != nullptr) {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    for (size_t i = 0; i < events.size(); ++i) {
      request_log->Append(OutcomeLogLine(
          events[i], i < result.request_ids.size() ? result.request_ids[i] : std::string(), now));
    }
  }
  return JsonResponse(200, OutcomesResultJson(result));
}

std::string OutcomeLogLine(const OutcomeEvent& e, const std::string& joined, int64_t received_unix_ms) {
  auto text = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
  nlohmann::json j = {{"event", "outcome"},
                      {"id", text(joined)},
                      {"request_id", text(e.request_id)},
                      {"session_id", text(e.session_id)},
                      {"type", OutcomeTypeName(e.type)},
                      {"time_unix_ms", e.time_unix_ms.value_or(received_unix_ms)}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse EconomicsOffResponse() {
  return ErrorResponse(NotFoundError("", "this server keeps no latency economics",
                                     "economics_off"));
}

nlohmann::json OutcomesResultJson(const OutcomesResult& r) {
  return {{"object", "outcomes.result"},
          {"accepted", r.accepted},
          {"joined", r.joined},
          {"unknown", r.unknown}};
}

}  // namespace lifeline::api
