#include "bench/loadgen/sse.h"

namespace lifeline::loadgen {

bool SseParser::Feed(std::string_view bytes, std::vector<SseEvent>* out) {
  for (char c : bytes) {
    if (c == '\n' && last_was_cr_) {  // the LF of a CRLF pair: the line already ended at CR
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      OnLine(line_, out);
      line_.clear();
      continue;
    }
    if (line_.size() >= max_line_bytes_) return false;
    line_ += c;
  }
  return true;
}

void SseParser::OnLine(std::string_view line, std::vector<SseEvent>* out) {
  if (line.empty()) {  // blank line: dispatch
    if (has_data_) out->push_back(std::move(event_));
    event_ = SseEvent{};
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment (heartbeat)
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{}
                                                           : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) event_.data += '\n';
    event_.data += value;
    has_data_ = true;
  } else if (field == "event") {
    event_.event = std::string(value);
  }
  // id / retry / unknown fields carry nothing the benchmark needs.
}

namespace {

int64_t IntOr(const nlohmann::json& obj, const char* key, int64_t fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return fallback;
  return it->get<int64_t>();
}

std::string StringOr(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

}  // namespace

ChunkInfo ParseChunk(std::string_view data) {
  ChunkInfo info;
  std::string_view trimmed = data;
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\n')) {
    trimmed.remove_suffix(1);
  }
  if (trimmed == "[DONE]") {
    info.done = true;
    return info;
  }
  const nlohmann::json j = nlohmann::json::parse(trimmed, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    info.malformed = true;
    return info;
  }
  info.model = StringOr(j, "model");
  if (auto err = j.find("error"); err != j.end() && !err->is_null()) {
    info.error = err->is_object() && err->contains("message") && (*err)["message"].is_string()
                     ? (*err)["message"].get<std::string>()
                     : err->dump();
    if (info.error.empty()) info.error = "error";
  }
  if (auto choices = j.find("choices"); choices != j.end() && choices->is_array() &&
                                        !choices->empty()) {
    const nlohmann::json& c = (*choices)[0];
    info.text = StringOr(c, "text");
    if (info.text.empty() && c.is_object() && c.contains("delta")) {
      info.text = StringOr(c["delta"], "content");
    }
    info.finish_reason = StringOr(c, "finish_reason");
  }
  if (auto usage = j.find("usage"); usage != j.end()) {
    info.prompt_tokens = IntOr(*usage, "prompt_tokens", -1);
    info.completion_tokens = IntOr(*usage, "completion_tokens", -1);
  }
  if (auto t = j.find("timings"); t != j.end() && t->is_object()) info.timings = *t;
  return info;
}

}  // namespace lifeline::loadgen
